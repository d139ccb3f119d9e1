package elasticquota

import (
	"fmt"
	"slices"
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

// A member a reclaim already nominated is one of the members still to place:
// the gang's sum counts it, and it is not counted again as a nominated pod
// (issue 51, item 1: "used 1 + request 4 exceeds max 4" at min = max = 4).
func TestGangCountsANominatedMemberOnce(t *testing.T) {
	var gangPods []*v1.Pod
	for i := range 4 {
		gangPods = append(gangPods, st.MakePod().Namespace("b").Name(fmt.Sprintf("m%d", i)).UID(fmt.Sprintf("m%d", i)).
			Label(schedv1alpha1.PodGroupLabel, "train").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj())
	}
	pl, f, _ := newTestPlugin(t, []*v1.Node{node("n1", "8")}, nil, eq("b", rl("cpu", "4"), rl("cpu", "4")))
	_, ctx := ktesting.NewTestContext(t)
	for _, name := range []string{"m0", "m2"} {
		nominated := gangPods[slices.IndexFunc(gangPods, func(p *v1.Pod) bool { return p.Name == name })].DeepCopy()
		nominated.Status.NominatedNodeName = "n1"
		pl.shared.mgr.observe(nominated)
	}
	// m1 is scheduled now; m0 and m2 wait on their nominated node.
	toPlace := []*v1.Pod{gangPods[1], gangPods[0], gangPods[2], gangPods[3]}
	if err := gang.Provide(ctx, f.ClientSet(), members{pods: toPlace}); err != nil {
		t.Fatal(err)
	}
	if _, st := pl.PreFilter(ctx, framework.NewCycleState(), gangPods[1], nil); !st.IsSuccess() {
		t.Fatalf("PreFilter of a gang of 4 x 1 CPU at min = max = 4 with two members nominated: %v, want success", st)
	}
	// The nominated members still count for a pod of b outside the gang:
	// 2 CPU nominated + 3 exceeds max 4.
	other := st.MakePod().Namespace("b").Name("solo").UID("solo").Req(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).Obj()
	if _, st := pl.PreFilter(ctx, framework.NewCycleState(), other, nil); st.IsSuccess() {
		t.Fatal("a 3-CPU pod of b outside the gang was admitted beside two nominated members at max 4: nominated members no longer count")
	}
}

// A gang over its quota as a whole evicts nothing, even where one member
// alone would be admitted once a victim is gone (issue 51, item 3): the
// victims are chosen for the gang's sum, as CapacityScheduling re-checks the
// preemptor's quota with its victims removed. a (min 4, max 6) uses 4.5;
// its gang of 2 x 1.5 CPU needs 3, and taking a-lo (1 CPU) leaves 3.5 + 3 > 6.
func TestAGangOverItsQuotaEvictsNothing(t *testing.T) {
	nodes := []*v1.Node{node("n1", "3"), node("n2", "8")}
	pods := []*v1.Pod{pod("a", "a-lo", "1", 0, "n1"), pod("free", "no-quota", "1500m", 1000, "n1"), pod("a", "a-hi", "3500m", 1000, "n2")}
	pl, f, infos := newTestPlugin(t, nodes, pods, eq("a", rl("cpu", "4"), rl("cpu", "6")), eq("c", rl("cpu", "10"), rl("cpu", "10")))
	var gm []*v1.Pod
	for i := range 2 {
		m := pod("a", fmt.Sprintf("g%d", i), "1500m", 100, "")
		m.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
		gm = append(gm, m)
	}
	_, ctx := ktesting.NewTestContext(t)
	if err := gang.Provide(ctx, f.ClientSet(), members{pods: gm}); err != nil {
		t.Fatal(err)
	}
	if n, v := dryRun(t, pl, f, infos, gm[0], nil); n != "" {
		t.Errorf("got victims %v on %s, want none: the gang needs 3 of a's max 6 with 3.5 used without them", v, n)
	}
	// With max 7 the gang fits once a-lo is gone (3.5 + 3): the same path
	// does preempt.
	pl, f, infos = newTestPlugin(t, nodes, pods, eq("a", rl("cpu", "4"), rl("cpu", "7")), eq("c", rl("cpu", "10"), rl("cpu", "10")))
	if err := gang.Provide(ctx, f.ClientSet(), members{pods: gm}); err != nil {
		t.Fatal(err)
	}
	if n, v := dryRun(t, pl, f, infos, gm[0], nil); n != "n1" || !slices.Equal(v, []string{"a-lo"}) {
		t.Errorf("with max 7: got victims %v on %q, want [a-lo] on n1", v, n)
	}
}

// A gang that fits its quota only once its own lower-priority pods on
// several nodes are gone makes room member by member: each member's
// preemption frees its own node, and the gang's sum is checked against every
// pod it may take in the cluster, not the one node's (review of item 3).
func TestAGangMakesRoomOnSeveralNodes(t *testing.T) {
	nodes := []*v1.Node{node("n1", "1"), node("n2", "1")}
	pods := []*v1.Pod{pod("a", "a-lo1", "1", 0, "n1"), pod("a", "a-lo2", "1", 0, "n2")}
	pl, f, infos := newTestPlugin(t, nodes, pods, eq("a", rl("cpu", "2"), rl("cpu", "2")))
	var gm []*v1.Pod
	for i := range 2 {
		m := pod("a", fmt.Sprintf("g%d", i), "1", 100, "")
		m.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
		gm = append(gm, m)
	}
	_, ctx := ktesting.NewTestContext(t)
	if err := gang.Provide(ctx, f.ClientSet(), members{pods: gm}); err != nil {
		t.Fatal(err)
	}
	if n, v := dryRun(t, pl, f, infos, gm[0], nil); n == "" || len(v) != 1 {
		t.Errorf("got victims %v on %q, want one of a's low-priority pods on its node: the gang fits max 2 once both are gone", v, n)
	}
}
