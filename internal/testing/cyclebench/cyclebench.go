// Package cyclebench runs a plugin's Filter and Score the way the scheduler
// does at 5,000 nodes, for the plugins' micro-benchmarks: through the
// framework's parallelizer with its default 16 workers, a fresh CycleState
// per pod, many different pods, and each cycle on the next 500 nodes of a
// node list larger than the CPU caches (the scheduler starts each cycle where
// the last one stopped). A benchmark of one call on one warm node measures
// none of that, and measured a fifth of what the scheduler_perf harness saw.
package cyclebench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const (
	// Parallelism is the scheduler's default (KubeSchedulerConfiguration.parallelism).
	Parallelism = parallelize.DefaultParallelism
	// NodesPerCycle is how many nodes a cycle filters and scores at 5,000
	// nodes: the adaptive percentageOfNodesToScore (10 % there).
	NodesPerCycle = 500
)

// Plugin is what a cycle calls; nil functions are left out. PreFilter and
// PreScore run once per pod, Filter and Score once per node.
type Plugin struct {
	PreFilter func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status
	Filter    func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status
	PreScore  func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status
	Score     func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status)
}

// FilterScorer is a plugin with all four extension points Run calls.
type FilterScorer interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.PreScorePlugin
	fwk.ScorePlugin
}

// PluginOf is the Plugin that calls p's extension points.
func PluginOf(p FilterScorer) Plugin {
	return Plugin{
		PreFilter: func(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
			_, s := p.PreFilter(ctx, state, pod, nodes)
			return s
		},
		Filter:   p.Filter,
		PreScore: p.PreScore,
		Score:    p.Score,
	}
}

// Run runs b.N cycles, pod i%len(pods) in cycle i, and reports per node the
// mean wall time of one Filter and one Score call ("filter-ns/node",
// "score-ns/node": what scheduler_plugin_execution_duration_seconds
// measures, descheduling of the 16 goroutines on the machine's cores
// included) and the wall time of a whole cycle ("us/cycle"). As in the
// scheduler, a PreFilter or PreScore Skip skips Filter or Score, and only
// nodes that pass Filter are scored. A call returning an Error status fails
// the benchmark.
func Run(b *testing.B, p Plugin, nodes []fwk.NodeInfo, pods []*v1.Pod) {
	b.Helper()
	metrics.Register() // the parallelizer counts its goroutines
	ctx := b.Context()
	par := parallelize.NewParallelizer(Parallelism)
	n := min(NodesPerCycle, len(nodes))
	var filterNs, scoreNs, filterCalls, scoreCalls atomic.Int64
	var failed atomic.Pointer[fwk.Status]
	check := func(s *fwk.Status) bool {
		if s.Code() == fwk.Error {
			failed.CompareAndSwap(nil, s)
		}
		return s.IsSuccess()
	}
	passed := make([]bool, n)
	feasible := make([]fwk.NodeInfo, 0, n)
	start := 0
	cycle := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		pod := pods[cycle%len(pods)]
		cycle++
		state := framework.NewCycleState()
		filter := p.Filter != nil
		if p.PreFilter != nil {
			if s := p.PreFilter(ctx, state, pod, nodes); s.IsSkip() {
				filter = false
			} else if !check(s) {
				continue
			}
		}
		offset := start
		start = (start + n) % len(nodes)
		feasible = feasible[:0]
		if filter {
			par.Until(ctx, n, func(i int) {
				ni := nodes[(offset+i)%len(nodes)]
				t := time.Now()
				s := p.Filter(ctx, state, pod, ni)
				filterNs.Add(int64(time.Since(t)))
				passed[i] = check(s)
			}, "filter")
			filterCalls.Add(int64(n))
			for i, ok := range passed {
				if ok {
					feasible = append(feasible, nodes[(offset+i)%len(nodes)])
				}
			}
		} else {
			for i := range n {
				feasible = append(feasible, nodes[(offset+i)%len(nodes)])
			}
		}
		if p.Score == nil {
			continue
		}
		if p.PreScore != nil {
			if s := p.PreScore(ctx, state, pod, feasible); s.IsSkip() || !check(s) {
				continue
			}
		}
		par.Until(ctx, len(feasible), func(i int) {
			t := time.Now()
			_, s := p.Score(ctx, state, pod, feasible[i])
			scoreNs.Add(int64(time.Since(t)))
			check(s)
		}, "score")
		scoreCalls.Add(int64(len(feasible)))
	}
	b.StopTimer()
	if s := failed.Load(); s != nil {
		b.Fatalf("a call failed: %v", s.AsError())
	}
	if c := filterCalls.Load(); c > 0 {
		b.ReportMetric(float64(filterNs.Load())/float64(c), "filter-ns/node")
	}
	if c := scoreCalls.Load(); c > 0 {
		b.ReportMetric(float64(scoreNs.Load())/float64(c), "score-ns/node")
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/cycle")
	b.ReportMetric(0, "ns/op")
}

// NodeInfos wraps nodes in NodeInfos, each with the pods podsOf returns (nil: none).
func NodeInfos(nodes []*v1.Node, podsOf func(i int) []*v1.Pod) []fwk.NodeInfo {
	nis := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		var pods []*v1.Pod
		if podsOf != nil {
			pods = podsOf(i)
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(n)
		nis[i] = ni
	}
	return nis
}

// HarnessNodes are the scheduler_perf benchmark's nodes
// (test/bench/config/templates/node.yaml): 4 CPU, 32Gi, 110 pods; a zone,
// a lifecycle label (every fourth spot), nvidia.com/gpu.present on every
// tenth, and a LoadAware usage annotation varied by index.
func HarnessNodes(count int) []*v1.Node {
	nodes := make([]*v1.Node, count)
	for i := range nodes {
		lifecycle := "on-demand"
		if i%4 == 0 {
			lifecycle = "spot"
		}
		w := st.MakeNode().Name(fmt.Sprintf("berth-perf-%05d", i)).
			Label("topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", i%3)).Label("lifecycle", lifecycle).
			Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "32Gi", "pods": "110"})
		if i%10 == 0 {
			w = w.Label("nvidia.com/gpu.present", "true")
		}
		n := w.Obj()
		n.ResourceVersion = strconv.Itoa(1000 + i)
		n.Annotations = map[string]string{"berth.io/node-usage": fmt.Sprintf(
			`{"cpu":"%dm","memory":"%dGi","timestamp":"2026-01-01T00:00:00Z"}`, (i%7)*400, (i%5)*4)}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		nodes[i] = n
	}
	return nodes
}

// HarnessPods are count distinct pods as the benchmark's template makes them
// (test/bench/config/templates/pod.yaml): 100m CPU, 500Mi, every other one
// labelled tier=batch; each with its own UID and a resourceVersion.
func HarnessPods(count int) []*v1.Pod {
	pods := make([]*v1.Pod, count)
	for i := range pods {
		tier := "service"
		if i%2 == 0 {
			tier = "batch"
		}
		p := st.MakePod().Namespace("bench").Name(fmt.Sprintf("pod-%05d", i)).UID(fmt.Sprintf("uid-%05d", i)).
			Label("tier", tier).Container("registry.k8s.io/pause:3.10.2").
			Req(map[v1.ResourceName]string{"cpu": "100m", "memory": "500Mi"}).
			Lim(map[v1.ResourceName]string{"cpu": "100m", "memory": "500Mi"}).Obj()
		p.ResourceVersion = strconv.Itoa(5000 + i)
		pods[i] = p
	}
	return pods
}
