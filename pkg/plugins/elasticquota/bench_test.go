package elasticquota

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkPreFilter measures admission with many quotas: PreFilter reads its
// own namespace's quota and the incrementally kept totals, so its cost should
// not grow with the number of quotas.
func BenchmarkPreFilter(b *testing.B) {
	for _, quotas := range []int{1, 1000} {
		b.Run(fmt.Sprintf("quotas=%d", quotas), func(b *testing.B) {
			m := newManager()
			for i := range quotas {
				ns := fmt.Sprintf("ns-%d", i)
				m.setQuota(ns, newQuota(eq(ns, rl("cpu", "4", "memory", "8Gi"), rl("cpu", "8", "memory", "16Gi")), nil))
				for j := range 10 {
					p := pod(ns, fmt.Sprintf("p-%d", j), "100m", 0, "n")
					p.UID = types.UID(fmt.Sprintf("%s-%d", ns, j))
					m.observe(p)
				}
			}
			pl := &ElasticQuota{shared: &shared{mgr: m, podsSynced: func() bool { return true }}}
			pl.shared.active.Store(true)
			p := pod("ns-0", "incoming", "500m", 0, "")
			p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = rl("memory", "1Gi")[v1.ResourceMemory]
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, st := pl.PreFilter(ctx, framework.NewCycleState(), p, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
