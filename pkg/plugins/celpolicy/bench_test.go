package celpolicy

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/testing/cyclebench"
)

const benchNodes = 5000

// typicalRules are three rules of the kinds the README's cookbook shows: a
// label filter, a label score, and a filter on the scheduler's view of free
// resources. None reads the pod beyond match, so results are cached per node.
var typicalRules = []config.CELPolicyRule{
	{Name: "gpu-nodes-for-gpu-pods", Match: "!pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))",
		Filter: "!('nvidia.com/gpu.present' in node.metadata.labels)"},
	{Name: "batch-prefers-spot", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'",
		Score: "node.metadata.?labels.?lifecycle.orValue('') == 'spot' ? 100 : 0", Weight: 3},
	{Name: "keep-headroom", Filter: "nodeInfo.free['cpu'].isGreaterThan(quantity('500m'))"},
}

// podReadingRule must be evaluated for every pod and node.
var podReadingRule = config.CELPolicyRule{Name: "same-zone", Filter: "node.metadata.?labels.?zone.orValue('') == pod.metadata.?labels.?zone.orValue('')"}

func benchNodeInfos() []*framework.NodeInfo {
	nis := make([]*framework.NodeInfo, benchNodes)
	for i := range nis {
		w := st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Label("zone", fmt.Sprintf("zone-%d", i%3)).
			Capacity(map[v1.ResourceName]string{"cpu": "32", "memory": "128Gi", "pods": "110"})
		switch i % 10 {
		case 0:
			w = w.Label("nvidia.com/gpu.present", "true")
		case 1, 2, 3:
			w = w.Label("lifecycle", "spot")
		}
		nis[i] = nodeInfo(w.Obj(), st.MakePod().Name(fmt.Sprintf("p-%d", i)).Container("c").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj())
	}
	return nis
}

var benchPod = st.MakePod().Namespace("ml").Name("batch").Label("tier", "batch").Label("zone", "zone-1").Container("c").
	Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj()

func benchPlugin(b *testing.B, rules ...config.CELPolicyRule) *CELPolicy {
	for i := range rules {
		rules[i].FailurePolicy = config.CELFailurePolicyFail
	}
	_, ctx := ktesting.NewTestContext(b)
	p, err := New(klog.NewContext(ctx, klog.Background()), &config.CELPolicyArgs{Rules: rules}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p.(*CELPolicy)
}

// BenchmarkFilter reports the cost of one Filter call (one node) on a
// steady cluster: every node's state is cached.
func BenchmarkFilter(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules []config.CELPolicyRule
	}{
		{"typical-3-rules", typicalRules},
		{"pod-reading-rule", []config.CELPolicyRule{podReadingRule}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl := benchPlugin(b, bc.rules...)
			nis := benchNodeInfos()
			ctx := klog.NewContext(b.Context(), klog.Background())
			state := framework.NewCycleState()
			if _, s := pl.PreFilter(ctx, state, benchPod, nil); !s.IsSuccess() {
				b.Fatal(s)
			}
			for _, ni := range nis { // warm the node cache, as earlier pods would have
				pl.Filter(ctx, state, benchPod, ni)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pl.Filter(ctx, state, benchPod, nis[i%benchNodes])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
		})
	}
}

// BenchmarkScore reports one Score call (one node) on a steady cluster.
func BenchmarkScore(b *testing.B) {
	pl := benchPlugin(b, typicalRules...)
	nis := benchNodeInfos()
	ctx := klog.NewContext(b.Context(), klog.Background())
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, benchPod, nil)
	if s := pl.PreScore(ctx, state, benchPod, nil); !s.IsSuccess() {
		b.Fatal(s)
	}
	for _, ni := range nis {
		pl.Score(ctx, state, benchPod, ni)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pl.Score(ctx, state, benchPod, nis[i%benchNodes])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
}

// BenchmarkPreFilter reports the per-pod cost of the match expressions.
func BenchmarkPreFilter(b *testing.B) {
	pl := benchPlugin(b, typicalRules[:2]...)
	ctx := klog.NewContext(b.Context(), klog.Background())
	for _, bc := range []struct {
		name string
		pod  *v1.Pod
	}{
		{"non-matching-pod", st.MakePod().Namespace("web").Name("web").Container("c").Req(map[v1.ResourceName]string{"cpu": "1", "nvidia.com/gpu": "1"}).Obj()},
		{"matching-pod", benchPod},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pl.PreFilter(ctx, framework.NewCycleState(), bc.pod, nil)
			}
		})
	}
}

// BenchmarkNodeStateRebuild reports what a node costs when its generation
// moved (a pod landed on it): conversion and re-evaluation of cached rules.
func BenchmarkNodeStateRebuild(b *testing.B) {
	pl := benchPlugin(b, typicalRules...)
	nis := benchNodeInfos()
	ctx := klog.NewContext(context.Background(), klog.Background())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ni := nis[i%benchNodes]
		pl.cache.remove(ni.Node().Name)
		pl.nodeStateFor(ctx, framework.NewCycleState(), ni)
		i++
	}
}

// harnessRules are the rules of the scheduler_perf benchmark's all-plugins
// profile (test/bench/config/profiles/all.yaml).
var harnessRules = []config.CELPolicyRule{
	{Name: "gpu-nodes-for-gpu-pods", Match: "!pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))",
		Filter: "!('nvidia.com/gpu.present' in node.metadata.labels)"},
	{Name: "avoid-draining-nodes", Filter: "node.metadata.?labels['node.example.com/draining'].orValue('false') != 'true'"},
	{Name: "batch-prefers-spot", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'",
		Score: "node.metadata.?labels.?lifecycle.orValue('') == 'spot' ? 100 : 0", Weight: 1},
}

// BenchmarkCycle runs Filter and Score as the scheduler does at 5,000 nodes
// (cyclebench: 16 goroutines, 500 nodes a cycle, 1,000 different pods) on
// the benchmark harness's nodes, pods and rules; and with a rule whose
// filter reads the pod.
func BenchmarkCycle(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules []config.CELPolicyRule
	}{
		{"harness-rules", harnessRules},
		{"pod-reading-rule", []config.CELPolicyRule{{Name: "same-zone",
			Filter: "node.metadata.labels[?'topology.kubernetes.io/zone'].orValue('') != pod.metadata.?labels.?zone.orValue('x')"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl := benchPlugin(b, bc.rules...)
			nodes := cyclebench.NodeInfos(cyclebench.HarnessNodes(benchNodes), nil)
			cyclebench.Run(b, cyclebench.PluginOf(pl), nodes, cyclebench.HarnessPods(1000))
		})
	}
}

// apiServerPod is a pod as the scheduler's informer holds it: the fields the
// API server sets (managedFields, status conditions) beside the spec.
func apiServerPod() *v1.Pod {
	p := cyclebench.HarnessPods(1)[0]
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "scheduler_perf", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:tier":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"pause\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{},"f:resources":{}}}}}`)}}
	p.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSGuaranteed, Conditions: []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/5000 nodes are available"}}}
	return p
}

// BenchmarkPodValue reports the conversion of a pod for the harness's match
// expressions: the whole pod, and the projection the rules need.
func BenchmarkPodValue(b *testing.B) {
	pl := benchPlugin(b, harnessRules...)
	pod := apiServerPod()
	for _, bc := range []struct {
		name string
		proj *projection
	}{{"whole", wholeProjection()}, {"projected", pl.podProj}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pl.env.podVal(pod, bc.proj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLabelIndexPreFilter reports PreFilter for a pod whose rule is a
// label-only filter, at 5,000 nodes of which 5 % carry the label: the
// snapshot check (a pointer per node) and the cached answer.
func BenchmarkLabelIndexPreFilter(b *testing.B) {
	pl := benchPlugin(b, config.CELPolicyRule{Name: "gpu-only", Filter: "node.metadata.labels.?gpu.orValue('') == 'true'"})
	nodes := cyclebench.HarnessNodes(benchNodes)
	for i := 0; i < len(nodes); i += 20 {
		nodes[i].Labels["gpu"] = "true"
	}
	list := cyclebench.NodeInfos(nodes, nil)
	ctx := klog.NewContext(b.Context(), klog.Background())
	pod := cyclebench.HarnessPods(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		res, s := pl.PreFilter(ctx, framework.NewCycleState(), pod, list)
		if !s.IsSuccess() || res.NodeNames.Len() != benchNodes/20 {
			b.Fatalf("PreFilter: %v, %d nodes", s, res.NodeNames.Len())
		}
	}
}
