package loadaware

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
	"github.com/berth-scheduler/berth/internal/testing/cyclebench"
)

const benchNodes = 5000

// benchCluster: 5,000 nodes with samples (mixed usage) and, on every tenth
// node, two pods placed since the sample.
func benchCluster(b *testing.B) (*LoadAware, []*framework.NodeInfo) {
	src := fakeSource{}
	nis := make([]*framework.NodeInfo, benchNodes)
	for i := range nis {
		name := fmt.Sprintf("node-%d", i)
		ni := framework.NewNodeInfo(st.MakePod().Name("p-" + name).Container("c").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj())
		ni.SetNode(st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": "32", "memory": "128Gi", "pods": "110"}).Obj())
		nis[i] = ni
		src[name] = sample{cpuMilli: int64(1000 + i%20000), memBytes: int64(i%64+1) << 30, timestamp: now.Add(-10 * time.Second)}
	}
	pl, _ := testPlugin(b, src, nil)
	for i := 0; i < benchNodes; i += 10 {
		for j := range 2 {
			pl.tracker.add(types.UID(fmt.Sprintf("recent-%d-%d", i, j)), assignedPod{node: nis[i].Node().Name, est: estimate{cpuMilli: 500, memBytes: 1 << 30}, at: now})
		}
	}
	return pl, nis
}

var benchPod = st.MakePod().Namespace("ns").Name("incoming").UID("incoming").Container("c").Req(map[v1.ResourceName]string{"cpu": "500m", "memory": "512Mi"}).Obj()

// BenchmarkFilter reports one Filter call (one node).
func BenchmarkFilter(b *testing.B) {
	pl, nis := benchCluster(b)
	ctx := klog.NewContext(b.Context(), klog.Background())
	state := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, benchPod, nil); !s.IsSuccess() {
		b.Fatal(s)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pl.Filter(ctx, state, benchPod, nis[i%benchNodes])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
}

// BenchmarkScore reports one Score call (one node).
func BenchmarkScore(b *testing.B) {
	pl, nis := benchCluster(b)
	ctx := klog.NewContext(b.Context(), klog.Background())
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, benchPod, nil)
	pl.PreScore(ctx, state, benchPod, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pl.Score(ctx, state, benchPod, nis[i%benchNodes])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
}

// BenchmarkPreFilter reports the per-pod estimate.
func BenchmarkPreFilter(b *testing.B) {
	pl, _ := benchCluster(b)
	ctx := klog.NewContext(b.Context(), klog.Background())
	b.ReportAllocs()
	for b.Loop() {
		pl.PreFilter(ctx, framework.NewCycleState(), benchPod, nil)
	}
}

// BenchmarkCycle runs Filter and Score as the scheduler does at 5,000 nodes
// (cyclebench: 16 goroutines, 500 nodes a cycle, 1,000 different pods) with
// the scheduler_perf harness's setup: the NodeAnnotations source on the
// harness's annotated nodes, and two pods placed on every node since its
// sample.
func BenchmarkCycle(b *testing.B) {
	registerMetrics()
	pl := newPlugin(defaultArgs(b, func(a *configv1.LoadAwareArgs) {
		a.Source = configv1.LoadAwareSourceNodeAnnotations
		a.MetricsExpiration = &metav1.Duration{Duration: 87600 * time.Hour}
	}), &activator{})
	pl.source = newAnnotationSource(configv1.DefaultLoadAwareAnnotationKey)
	nodes := cyclebench.HarnessNodes(benchNodes)
	for i, n := range nodes {
		for j := range 2 {
			pl.tracker.add(types.UID(fmt.Sprintf("placed-%d-%d", i, j)), assignedPod{node: n.Name, est: estimate{cpuMilli: 100, memBytes: 500 << 20}, at: time.Now()})
		}
	}
	cyclebench.Run(b, cyclebench.PluginOf(pl), cyclebench.NodeInfos(nodes, nil), cyclebench.HarnessPods(1000))
}
