package celpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/testing/metricstest"
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

// The label index's series exist from registration, before any cycle used it.
func TestLabelIndexSeriesAtRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_celpolicy_label_index_cycles_total", "result", "narrowed", "no_nodes")
}

// A cycle answered from the index is counted.
func TestLabelIndexCounted(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "gpu-only", Filter: "'gpu' in node.metadata.labels"})
	narrowed := value(t, indexResults.WithLabelValues("narrowed"))
	none := value(t, indexResults.WithLabelValues("no_nodes"))
	_, ctx := ktesting.NewTestContext(t)
	gpu := st.MakeNode().Name("gpu").Label("gpu", "true").Obj()
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), batchPod, snapshotList([]*v1.Node{gpu, spotNode})); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), batchPod, snapshotList([]*v1.Node{spotNode})); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter without a gpu node: %v", s)
	}
	if d := value(t, indexResults.WithLabelValues("narrowed")) - narrowed; d != 1 {
		t.Errorf("narrowed counted %v, want 1", d)
	}
	if d := value(t, indexResults.WithLabelValues("no_nodes")) - none; d != 1 {
		t.Errorf("no_nodes counted %v, want 1", d)
	}
}
