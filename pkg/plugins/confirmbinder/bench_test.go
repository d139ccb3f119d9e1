package confirmbinder

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

// BenchmarkBind reports the API reads (node GET + pod LIST) a binding costs
// on top of the Binding itself, in WhenTight mode on a roomy node (goal 0)
// and on a tight one, and in Always mode.
func BenchmarkBind(b *testing.B) {
	for _, bc := range []struct {
		name   string
		podCPU string
		mutate func(*configv1.ConfirmBinderArgs)
	}{
		{"WhenTight/roomy-node", "100m", nil},
		{"WhenTight/tight-node", "3800m", nil},
		{"Always/roomy-node", "100m", always},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pods := make([]*v1.Pod, b.N)
			objs := make([]runtime.Object, 0, b.N+1)
			for i := range pods {
				pods[i] = st.MakePod().Namespace("ns").Name(fmt.Sprintf("p-%d", i)).UID(fmt.Sprintf("p-%d", i)).Container("c").
					Req(map[v1.ResourceName]string{"cpu": bc.podCPU}).Obj()
				objs = append(objs, pods[i])
			}
			objs = append(objs, liveNode())
			pl, client, _ := newTestPlugin(b, bc.mutate, objs...)
			ctx := klog.NewContext(b.Context(), klog.Background())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				state := framework.NewCycleState()
				pl.Reserve(ctx, state, pods[i], "n1")
				if s := pl.Bind(ctx, state, pods[i], "n1"); !s.IsSuccess() {
					pl.Unreserve(ctx, state, pods[i], "n1")
				}
			}
			b.StopTimer()
			reads := countActions(client, "get", "nodes") + countActions(client, "list", "pods")
			b.ReportMetric(float64(reads)/float64(b.N), "reads/bind")
		})
	}
}
