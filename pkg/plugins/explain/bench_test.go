package explain

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const benchNodes = 5000

// benchSim: 5,000 nodes (every tenth one too small for the pod) on the
// test's framework (NodeResourcesFit, BalancedAllocation, TaintToleration).
func benchSim(b *testing.B, podCPU string) (*sim, *v1.Pod) {
	nodes := make([]*v1.Node, benchNodes)
	for i := range nodes {
		cpu := "16"
		if i%10 == 0 {
			cpu = "1"
		}
		nodes[i] = mkNode(fmt.Sprintf("node-%04d", i), cpu, "64Gi")
	}
	pod := asking("web", podCPU)
	return newSim(b, nil, nodes, nil, pod), pod
}

// BenchmarkExplainPlaced reports one explanation of a placement at 5,000
// nodes: Filter re-run on every node, PreScore/Score over the 500 nodes a
// cycle at this size scores (percentageOfNodesToScore's default gives 10 %).
func BenchmarkExplainPlaced(b *testing.B) {
	s, pod := benchSim(b, "2")
	state := framework.NewCycleState()
	if _, st, _ := s.f.RunPreFilterPlugins(s.ctx, state, pod); !st.IsSuccess() {
		b.Fatal(st)
	}
	nodes, _ := s.snapshot.NodeInfos().List()
	var scored []fwk.NodeInfo
	for _, ni := range nodes {
		if len(scored) < benchNodes/10 && s.f.RunFilterPluginsWithNominatedPods(s.ctx, state, pod, ni).IsSuccess() {
			scored = append(scored, ni)
		}
	}
	if st := s.f.RunPreScorePlugins(s.ctx, state, pod, scored); !st.IsSuccess() {
		b.Fatal(st)
	}
	cs := explaining(state)
	chosen := cs.scored[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.pl.explainPlaced(s.ctx, state, assumed(pod, chosen), chosen, cs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/explanation")
}

// BenchmarkExplainPending reports one explanation of a pod that fits none
// of 5,000 nodes (all rejected for CPU: the nearest-node search runs on each).
func BenchmarkExplainPending(b *testing.B) {
	s, pod := benchSim(b, "64")
	state := framework.NewCycleState()
	s.f.RunPreFilterPlugins(s.ctx, state, pod)
	nodes, _ := s.snapshot.NodeInfos().List()
	m := framework.NewDefaultNodeToStatus()
	for _, ni := range nodes {
		m.Set(ni.Node().Name, s.f.RunFilterPluginsWithNominatedPods(s.ctx, state, pod, ni))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.pl.explainPending(pod, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/explanation")
}

// BenchmarkPodThatDoesNotAsk reports what Explain costs a pod that does not
// ask: PreFilter (an annotation lookup, Skip), PreScore, Reserve, SignPod.
func BenchmarkPodThatDoesNotAsk(b *testing.B) {
	s, _ := benchSim(b, "2")
	pod := st.MakePod().Namespace("default").Name("plain").UID("plain").Obj()
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		s.pl.PreFilter(s.ctx, state, pod, nil)
		s.pl.PreScore(s.ctx, state, pod, nil)
		s.pl.Reserve(s.ctx, state, pod, "node-0001")
		s.pl.SignPod(s.ctx, pod)
	}
}
