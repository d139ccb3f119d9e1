package elasticquota

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/gang"
)

// members stands for Coscheduling: the gang's members still to place.
type members struct{ pods []*v1.Pod }

func (m members) ToPlace(pod *v1.Pod) (string, []*v1.Pod, bool) {
	if pod.Labels[schedv1alpha1.PodGroupLabel] == "" {
		return "", nil, false
	}
	return pod.Namespace + "/" + pod.Labels[schedv1alpha1.PodGroupLabel], m.pods, len(m.pods) > 1
}

// A gang is admitted only if all the members it still needs fit its
// namespace's quota together; pod by pod each would fit.
func TestGangMustFitTheQuotaWhole(t *testing.T) {
	gangPod := func(name string) *v1.Pod {
		return st.MakePod().Namespace("a").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "train").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	}
	three := []*v1.Pod{gangPod("m0"), gangPod("m1"), gangPod("m2")}
	for _, tc := range []struct {
		name     string
		members  []*v1.Pod
		wantCode fwk.Code
		wantMsg  string
	}{
		// The gang alone exceeds max: no preemption can help.
		{"three members needed, max 2", three, fwk.UnschedulableAndUnresolvable,
			"pod group a/train needs 3 more members placed, and together they do not fit: cpu request 3 exceeds the max 2 of ElasticQuota a/quota"},
		{"two members needed", three[:2], fwk.Success, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, f, _ := newTestPlugin(t, []*v1.Node{node("n1", "8")}, nil, eq("a", rl("cpu", "2"), rl("cpu", "2")))
			_, ctx := ktesting.NewTestContext(t)
			if err := gang.Provide(ctx, f.ClientSet(), members{pods: tc.members}); err != nil {
				t.Fatal(err)
			}
			_, st := pl.PreFilter(ctx, framework.NewCycleState(), three[0], nil)
			if tc.wantMsg == "" {
				if !st.IsSuccess() {
					t.Fatalf("PreFilter: %v, want success", st)
				}
				return
			}
			if st.Code() != tc.wantCode || !strings.Contains(st.Message(), tc.wantMsg) {
				t.Fatalf("PreFilter: %v\nwant %v with %q", st, tc.wantCode, tc.wantMsg)
			}
		})
	}
}
