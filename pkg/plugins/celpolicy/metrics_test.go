package celpolicy

import (
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestMetricsCount(t *testing.T) {
	pl := newPlugin(t,
		config.CELPolicyRule{Name: "metrics-filter", Filter: "node.metadata.labels['nope'] == 'x'", FailurePolicy: config.CELFailurePolicyIgnore},
		config.CELPolicyRule{Name: "metrics-score", Score: "250"},
	)
	value := func(c metrics.CounterMetric) float64 { return value(t, c) }
	errs := value(runtimeErrors.WithLabelValues("metrics-filter", "filter", "Ignore"))
	clamps := value(clampedScores.WithLabelValues("metrics-score"))

	// Outcomes that do not depend on the pod are computed once per node
	// generation: Filter and Score on the same NodeInfo evaluate each rule once.
	ni := nodeInfo(spotNode)
	if s := filterResult(t, pl, batchPod, ni); !s.IsSuccess() {
		t.Fatalf("Ignore should pass the node: %v", s)
	}
	if got := score(t, pl, batchPod, ni); got != 100 {
		t.Fatalf("score = %d, want 100 (clamped)", got)
	}
	if d := value(runtimeErrors.WithLabelValues("metrics-filter", "filter", "Ignore")) - errs; d != 1 {
		t.Errorf("runtime errors counted %v, want 1", d)
	}
	if d := value(clampedScores.WithLabelValues("metrics-score")) - clamps; d != 1 {
		t.Errorf("clamps counted %v, want 1", d)
	}
}

func value(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
