package admissionfeedback

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
	"k8s.io/utils/ptr"
)

const benchNodes = 5000

// benchPlugin: a plugin (no informers) holding refusals refusals of 1,000
// controllers spread over the 5,000 nodes, plus three of controllers bh-a,
// bh-b and bh-c on node-0, which make it a black hole.
func benchPlugin(b *testing.B, refusals int) (*AdmissionFeedback, []*framework.NodeInfo) {
	b.Helper()
	sh := newSharedState(nil, defaultArgs())
	sh.events = nil // no recorder: take reports false
	sh.now = func() time.Time { return t0 }
	logger := klog.Background()
	refuse := func(rs, node, pod string) {
		sh.record(logger, observed{ctrl: controller{uid: types.UID(rs), kind: "ReplicaSet", namespace: ns, name: rs},
			node: node, reason: "OutOfcpu", message: "Pod was rejected: ...", pod: ns + "/" + pod, podUID: types.UID(pod), at: t0.Add(-time.Minute)}, false)
	}
	for i := range refusals {
		refuse(fmt.Sprintf("rs-%d", i%1000), fmt.Sprintf("node-%d", 1+(i*7)%(benchNodes-1)), fmt.Sprintf("p-%d", i))
	}
	for _, rs := range []string{"bh-a", "bh-b", "bh-c"} {
		refuse(rs, "node-0", rs+"-1")
	}
	nis := make([]*framework.NodeInfo, benchNodes)
	for i := range nis {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
		nis[i] = ni
	}
	return &AdmissionFeedback{shared: sh}, nis
}

func benchPodOf(rs string) *v1.Pod {
	p := st.MakePod().Namespace(ns).Name("incoming").UID("incoming").Obj()
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(rs), Controller: ptr.To(true)}}
	return p
}

// BenchmarkFilter reports one Filter call (one node) for a pod whose
// controller node-0 refused, with 0 or 1,000 other refusals held. (A pod whose
// controller no node refused is skipped at PreFilter: Filter is not called.)
func BenchmarkFilter(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("refusals=%d", n), func(b *testing.B) {
			pl, nis := benchPlugin(b, n)
			pod := benchPodOf("bh-a")
			state := framework.NewCycleState()
			if _, s := pl.PreFilter(b.Context(), state, pod, nil); !s.IsSuccess() {
				b.Fatal(s)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pl.Filter(b.Context(), state, pod, nis[i%benchNodes])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
		})
	}
}

// BenchmarkScore reports one Score call (one node) while node-0 is a black
// hole, with 0 or 1,000 other refusals held.
func BenchmarkScore(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("refusals=%d", n), func(b *testing.B) {
			pl, nis := benchPlugin(b, n)
			pod := benchPodOf("other")
			state := framework.NewCycleState()
			if s := pl.PreScore(b.Context(), state, pod, nil); !s.IsSuccess() {
				b.Skipf("PreScore %v: no black hole", s)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pl.Score(b.Context(), state, pod, nis[i%benchNodes])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/node")
		})
	}
}

// BenchmarkPreFilter reports the per-pod lookup with 1,000 refusals held:
// a pod whose controller no node refused (Skip), and one refused by one node.
func BenchmarkPreFilter(b *testing.B) {
	for _, tc := range []struct{ name, rs string }{{"no-refusals", "other"}, {"refused-by-1", "bh-a"}} {
		b.Run(tc.name, func(b *testing.B) {
			pl, _ := benchPlugin(b, 1000)
			pod := benchPodOf(tc.rs)
			state := framework.NewCycleState()
			b.ReportAllocs()
			for b.Loop() {
				pl.PreFilter(b.Context(), state, pod, nil)
			}
		})
	}
}
