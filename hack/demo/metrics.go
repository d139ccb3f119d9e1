package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// LoadAware's MetricsAPI scenario, the path production runs: each node's
// kubelet (KWOK's) reports its pods' usage, the real metrics-server scrapes it,
// kube-apiserver's aggregation layer serves it as metrics.k8s.io, and the
// scheduler lists NodeMetrics with its own kubeconfig. metrics-server
// listens on loopback behind an ExternalName Service: any user runs it.
const metricsScenario = "loadaware-metrics"

var (
	metricsTaint      = v1.Taint{Key: "berth.io/demo", Value: "metrics", Effect: v1.TaintEffectNoSchedule}
	metricsNodeLabels = map[string]string{"berth.io/demo": "metrics"}
	metricsToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
)

// metricsNodes and what their kubelets report in use (a pod on each that
// requests nothing and burns that much).
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

// prepareMetrics prepares metrics-server (a loopback port and its
// registration with the aggregation layer) without starting it.
func prepareMetrics(ctx context.Context, env *sandbox.ControlPlane, bin string) (*sandbox.MetricsServer, error) {
	step("preparing metrics-server %s, registered as APIService v1beta1.metrics.k8s.io", bin)
	return sandbox.NewMetricsServer(ctx, env, bin)
}

// startMetrics creates the scenario's nodes as KWOK nodes, each with a pod
// that requests nothing and burns what the node reports in use, and starts
// metrics-server, which scrapes KWOK's kubelet endpoints.
func startMetrics(ctx context.Context, m *sandbox.MetricsServer, kwok *sandbox.KWOK) error {
	var names []string
	for _, n := range metricsNodes {
		if _, err := kwok.CreateNode(ctx, n.spec); err != nil {
			return err
		}
		if err := kwok.SetUsage(ctx, n.spec.Name, n.cpu, n.memory); err != nil {
			return err
		}
		names = append(names, n.spec.Name)
	}
	if err := kwok.WaitReady(ctx, time.Minute, names...); err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		return err
	}
	step("metrics-server serving at %s behind the API server (an ExternalName Service), scraping the kubelet endpoints KWOK serves for %s and %s at %s",
		m.Endpoint(), metricsNodes[0].spec.Name, metricsNodes[1].spec.Name, kwok.Endpoint())
	return nil
}
