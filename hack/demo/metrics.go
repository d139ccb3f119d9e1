package main

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// LoadAware's MetricsAPI scenario, the path production runs: each node's
// kubelet endpoint reports its usage, the real metrics-server scrapes it,
// kube-apiserver's aggregation layer serves it as metrics.k8s.io, and the
// scheduler lists NodeMetrics with its own kubeconfig. metrics-server runs
// in a network namespace of its own (the aggregator cannot reach an
// endpoint on loopback), which needs root: without, the scenario is skipped
// and says why.
const metricsScenario = "loadaware-metrics"

var (
	metricsTaint      = v1.Taint{Key: "berth.io/demo", Value: "metrics", Effect: v1.TaintEffectNoSchedule}
	metricsNodeLabels = map[string]string{"berth.io/demo": "metrics"}
	metricsToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
)

// metricsNodes and what their kubelets report in use.
var metricsNodes = []struct {
	spec        sandbox.NodeSpec
	cpu, memory string
}{
	{sandbox.NodeSpec{Name: "hot-1", CPU: "8", Memory: "16Gi", Taints: []v1.Taint{metricsTaint}, Labels: metricsNodeLabels}, "7", "6Gi"},
	{sandbox.NodeSpec{Name: "cool-1", CPU: "4", Memory: "8Gi", Taints: []v1.Taint{metricsTaint}, Labels: metricsNodeLabels}, "400m", "1Gi"},
}

func metricsPod(name, cpu string, annotations map[string]string) sandbox.PodSpec {
	return sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "berth-loadaware-metrics", CPU: cpu, Memory: "1Gi",
		Tolerations: metricsToleration, NodeSelector: metricsNodeLabels, Annotations: annotations}
}

// metricsPods come after the other scenarios' first phase, while
// metrics-server, started first, takes its second scrape: report waits
// (onMissingMetrics: Reject) until the scheduler has the nodes' first
// NodeMetrics, report-big comes once report is placed.
var metricsPods = []demoPod{
	{scenario: metricsScenario, phase: 1, spec: metricsPod("report", "1", explainRequest), expectNode: "cool-1", showEvent: explainedEvent,
		why: "hot-1's kubelet reports 7 of 8 CPU in use (metrics-server, through the aggregation layer); by requests hot-1 would win"},
	{scenario: metricsScenario, phase: 2, spec: metricsPod("report-big", "3500m", nil),
		why: "only hot-1 has 3.5 CPU unrequested, and its measured usage is over the 80% threshold"},
}

// startMetrics prepares metrics-server, creates the scenario's nodes with
// their kubelet endpoints, and starts it. It returns nil (and the scenario
// is dropped) if this machine cannot run it.
func startMetrics(ctx context.Context, env *sandbox.ControlPlane, bin string) (*sandbox.MetricsServer, error) {
	if err := sandbox.CanCreateNetns(); err != nil {
		step("skipping LoadAware's MetricsAPI scenario: metrics-server needs a network namespace of its own (%v); the annotation scenario still runs", err)
		return nil, nil
	}
	step("starting metrics-server %s in a network namespace, registered as APIService v1beta1.metrics.k8s.io", bin)
	m, err := sandbox.NewMetricsServer(ctx, env, bin)
	if err != nil {
		return nil, err
	}
	for _, n := range metricsNodes {
		if _, err := sandbox.CreateNode(ctx, env.Client, n.spec); err != nil {
			m.Close()
			return nil, err
		}
		if err := m.Kubelets.Serve(ctx, env.Client, n.spec.Name, n.cpu, n.memory); err != nil {
			m.Close()
			return nil, err
		}
	}
	if err := m.Start(ctx); err != nil {
		m.Close()
		return nil, err
	}
	step("metrics-server serving at %s (network namespace %s) behind the API server; the kubelet endpoints of %s and %s at %s",
		m.Endpoint(), m.Netns.Name, metricsNodes[0].spec.Name, metricsNodes[1].spec.Name, m.Netns.HostIP)
	return m, nil
}

// withoutScenario drops a scenario's pods.
func withoutScenario(pods []demoPod, scenario string) []demoPod {
	var out []demoPod
	for _, p := range pods {
		if p.scenario != scenario {
			out = append(out, p)
		}
	}
	return out
}
