package elasticquota

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // the plugins' args in the config scheme, as in main
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// A pod group's scheduling cycle (GenericWorkload, schedule_one_podgroup)
// reserves each member to see whether the whole group fits, then reverts
// them all, and reserves the feasible ones again, out of the group's cycle,
// for binding. ElasticQuota counts a simulated member for the group's
// admission (so the group is admitted whole), but status.used must never
// show a reservation that is reverted: a status write between the two
// published it.
func TestAPodGroupCyclesReservationsCountForAdmissionButAreNotReported(t *testing.T) {
	pl, _, _ := newTestPlugin(t, []*v1.Node{node("n1", "16")}, nil, eq("a", rl("cpu", "4"), rl("cpu", "8")))
	m := pl.shared.mgr
	ctx := context.Background()
	reported := func(step string, want string) {
		t.Helper()
		used, _ := m.usedOf("a")
		if got := used[v1.ResourceCPU]; got.Cmp(rl("cpu", want)[v1.ResourceCPU]) != 0 {
			t.Errorf("%s: status.used cpu %s, want %s", step, got.String(), want)
		}
	}
	admitted := func(step string, want int64) {
		t.Helper()
		if got := m.nsUsed["a"][v1.ResourceCPU]; got != want {
			t.Errorf("%s: admission counts %dm, want %dm", step, got, want)
		}
	}
	groupCycle := framework.NewCycleState()
	groupCycle.SetPodGroupSchedulingCycle(framework.NewCycleState())
	member := pod("a", "member", "2", 0, "")

	m.takeDirty()
	if s := pl.Reserve(ctx, groupCycle, member, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	admitted("a member reserved in the group's cycle", 2000)
	reported("a member reserved in the group's cycle", "0")
	if d := m.takeDirty(); len(d) != 0 {
		t.Errorf("namespaces %v marked for a status write by a simulated reservation", d)
	}
	pl.Unreserve(ctx, groupCycle, member, "n1")
	admitted("the group's cycle reverted", 0)

	// The binding cycle reserves it again, out of the group's cycle.
	if s := pl.Reserve(ctx, framework.NewCycleState(), member, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	admitted("reserved for binding", 2000)
	reported("reserved for binding", "2")

	// A simulated reservation that the informer then sees bound is real.
	other := pod("a", "other", "1", 0, "")
	pl.Reserve(ctx, groupCycle, other, "n1")
	reported("another member reserved in the group's cycle", "2")
	bound := other.DeepCopy()
	bound.Spec.NodeName = "n1"
	m.observe(bound)
	admitted("the other member seen bound", 3000)
	reported("the other member seen bound", "3")

	// One reserved again for binding without being reverted first (1.37.2
	// reverts before it binds; a later release might not): the binding
	// reservation is real, and a late revert of the group's try leaves it.
	third := pod("a", "third", "1", 0, "")
	pl.Reserve(ctx, groupCycle, third, "n1")
	pl.Reserve(ctx, framework.NewCycleState(), third, "n1")
	admitted("the third reserved for binding", 4000)
	reported("the third reserved for binding", "4")
	pl.Unreserve(ctx, groupCycle, third, "n1")
	admitted("the group's late revert of the third", 4000)
	reported("the group's late revert of the third", "4")
	// A binding cycle's Unreserve (the bind failed) does drop it.
	pl.Unreserve(ctx, framework.NewCycleState(), third, "n1")
	admitted("the third's binding failed", 3000)
	reported("the third's binding failed", "3")
}

// quotaState is the manager's accounting, copied for comparison.
type quotaState struct {
	NSUsed, NSSimulated, NSLeaving map[string]vec
	TotalUsed                      vec
	Pods, Nominated, Preempted     []string
}

func stateOf(m *manager) quotaState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	// A resource at 0 is one the namespace does not use.
	nonZero := func(v vec) vec {
		out := vec{}
		for name, x := range v {
			if x != 0 {
				out[name] = x
			}
		}
		return out
	}
	cp := func(in map[string]vec) map[string]vec {
		out := map[string]vec{}
		for ns, v := range in {
			out[ns] = nonZero(v)
		}
		return out
	}
	uids := func(keys []types.UID) []string {
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			out = append(out, string(k))
		}
		slices.Sort(out)
		return out
	}
	return quotaState{
		NSUsed: cp(m.nsUsed), NSSimulated: cp(m.nsSimulated), NSLeaving: cp(m.nsLeaving),
		TotalUsed: nonZero(m.totalUsed),
		Pods:      uids(slices.Collect(maps.Keys(m.pods))), Nominated: uids(slices.Collect(maps.Keys(m.nominated))),
		Preempted: uids(m.preempted.UnsortedList()),
	}
}

// Kubernetes' PodGroup cycle reserves each member to try the group and
// reverts them all when the group does not fit; so does the group
// preemption's own scheduling of the group (PodGroupPostFilter). Run through
// the real cycle (scheduler.New with the GenericWorkload gate), ElasticQuota's
// accounting must come out as it went in.
func TestARevertedPodGroupCycleLeavesTheQuotaAsItWas(t *testing.T) {
	for _, tc := range []struct {
		name string
		// node's CPUs, the quotas, pods already bound
		cpu    string
		quotas []*schedv1alpha1.ElasticQuota
		bound  []*v1.Pod
		// the message a member's status must show: the cycle got that far
		want string
	}{{
		name:   "the quota refuses the third member",
		cpu:    "8",
		quotas: []*schedv1alpha1.ElasticQuota{eq("a", rl("cpu", "2"), rl("cpu", "2"))},
		want:   "cpu used 2 + request 1 exceeds max 2",
	}, {
		name:   "the node has room for one member, and the group preemption's own try fails too",
		cpu:    "2",
		quotas: []*schedv1alpha1.ElasticQuota{eq("a", rl("cpu", "4"), rl("cpu", "4")), eq("b", rl("cpu", "0"), rl("cpu", "4"))},
		// b borrows a's min: a victim the group preemption removes and
		// schedules the group without, in vain.
		bound: []*v1.Pod{pod("b", "borrower", "1", 0, "n1")},
		want:  "does not fit even without the 1 pods it may preempt",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var pl *ElasticQuota
			reg := podgroupcycle.Capture(Name, NewWithClient(fakeEQClient(tc.quotas...)), &pl)
			objs := []runtime.Object{node("n1", tc.cpu)}
			for _, p := range tc.bound {
				objs = append(objs, p)
			}
			c := podgroupcycle.New(t, gangsConfig, reg, objs...)
			if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return pl.shared.podsSynced() && len(stateOf(pl.shared.mgr).Pods) == len(tc.bound), nil
			}); err != nil {
				t.Fatal("the quota never counted the bound pods")
			}
			before := stateOf(pl.shared.mgr)
			members := c.Gang(t, "a", "g", 3, 3, podgroupcycle.Member("1"))
			if got := c.Attempted(t, "a", "g"); got != "False" {
				t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False", got)
			}
			if diff := cmp.Diff(before, stateOf(pl.shared.mgr)); diff != "" {
				t.Errorf("accounting after the reverted cycle (-before +after):\n%s", diff)
			}
			if !c.Unschedulable(t, members, tc.want) {
				t.Errorf("no member's status says %q: the cycle did not get as far as the test needs", tc.want)
			}
			for _, p := range tc.bound {
				if _, err := c.Client.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{}); err != nil {
					t.Errorf("%s/%s: %v (preempted in vain?)", p.Namespace, p.Name, err)
				}
			}
		})
	}
}

// gangsConfig is the profile of the tests that run Kubernetes' PodGroup
// cycle: GangScheduling and ElasticQuota, DefaultPreemption off.
const gangsConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: ElasticQuota
      disabled:
      - name: DefaultPreemption
`

// gangCluster runs the PodGroup cycle (gangsConfig) over objs with the
// quotas, and waits until ElasticQuota counts the bound pods among objs.
func gangCluster(t *testing.T, quotas []*schedv1alpha1.ElasticQuota, objs ...runtime.Object) *podgroupcycle.Cluster {
	t.Helper()
	var pl *ElasticQuota
	reg := podgroupcycle.Capture(Name, NewWithClient(fakeEQClient(quotas...)), &pl)
	c := podgroupcycle.New(t, gangsConfig, reg, objs...)
	bound := 0
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			bound++
		}
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.shared.podsSynced() && len(stateOf(pl.shared.mgr).Pods) == bound, nil
	}); err != nil {
		t.Fatal("the quota never counted the bound pods")
	}
	return c
}

// A native gang within its namespace's min reclaims through the real
// PodGroup cycle (PodGroupPostFilter): a borrower's scheduler-plugins gang
// is one victim, taken whole, and the borrower's single pod that the gang
// does not need stays.
func TestAGangReclaimsAndTakesAnotherGangWhole(t *testing.T) {
	quotas := []*schedv1alpha1.ElasticQuota{eq("a", rl("cpu", "2"), rl("cpu", "4")), eq("b", rl("cpu", "0"), rl("cpu", "4"))}
	// b borrows all 3 CPUs of the node: an SP gang of two pods of priority
	// 10, one pod of priority 0 alone (borrowers' pods go whatever their
	// priority). The gang is reprieved first, in vain: a's two members need
	// two CPUs. Were the gang's pods victims one by one, one of them would
	// be kept and the other preempted with the single pod.
	single := pod("b", "single", "1", 0, "n1")
	gang0, gang1 := pod("b", "sp-0", "1", 10, "n1"), pod("b", "sp-1", "1", 10, "n1")
	for _, p := range []*v1.Pod{gang0, gang1} {
		p.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "sp"}
	}
	c := gangCluster(t, quotas, node("n1", "3"), single, gang0, gang1)
	members := c.Gang(t, "a", "g", 2, 2, podgroupcycle.Member("1"))
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False (waiting for its victims)", got)
	}
	left, err := c.Client.CoreV1().Pods("b").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"single"}) {
		t.Errorf("b's pods left: %v, want [single]: the SP gang is the unit that makes room, taken whole", names)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, m := range members {
			p, err := c.Client.CoreV1().Pods("a").Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil || p.Status.NominatedNodeName != "n1" {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("a's members are not nominated to n1: %v", err)
	}
}

// A group's preemption policy is resolved as upstream's pod-group
// preemption resolves it: the PodGroup's own field only with the
// scheduler's PodGroupPreemptionPolicy gate (an API server with the gate
// defaults it to PreemptLowerPriority), else Never if any member says so.
func TestNeverPreemptsResolvesThePolicyAsUpstream(t *testing.T) {
	never, lower := schedulingv1beta1.PreemptNever, schedulingv1beta1.PreemptLowerPriority
	podNever := v1.PreemptNever
	plain := st.MakePod().Obj()
	neverPod := st.MakePod().Obj()
	neverPod.Spec.PreemptionPolicy = &podNever
	group := func(p *schedulingv1beta1.PreemptionPolicy) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{PreemptionPolicy: p}}
	}
	for _, tc := range []struct {
		name    string
		gate    bool
		pg      *schedulingv1beta1.PodGroup
		members []*v1.Pod
		want    bool
	}{
		{"gate off: a member's Never", false, group(&lower), []*v1.Pod{plain, neverPod}, true},
		{"gate off: the group's field is not read", false, group(&never), []*v1.Pod{plain}, false},
		{"gate on: the group's Never", true, group(&never), []*v1.Pod{plain}, true},
		{"gate on: the group's default, whatever the members", true, group(&lower), []*v1.Pod{neverPod}, false},
		{"gate on: no field (created without the gate)", true, group(nil), []*v1.Pod{neverPod}, false},
	} {
		if got := neverPreempts(tc.pg, tc.members, tc.gate); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A native gang's reclaim takes the borrower's pods where the gang can go
// (issue 51, item 2). a (min 2) runs two older pods on y and two younger on
// x; b's gang of 2 x 1 CPU may go to y only. Capping a at its min before the
// gang was placed took the two least important, on x, where they are of no
// use: the gang never fitted. As upstream's pod-group preemption does, every
// eligible pod is removed, the gang is placed, and the min floor applies
// while victims are reprieved: a-y0 and a-y1 go, a keeps its min on x.
func TestAGangReclaimsOnTheNodesItCanUse(t *testing.T) {
	quotas := []*schedv1alpha1.ElasticQuota{eq("a", rl("cpu", "2"), rl("cpu", "4")), eq("b", rl("cpu", "2"), rl("cpu", "4"))}
	hourAgo, tenMinutesAgo := metav1.NewTime(time.Now().Add(-time.Hour)), metav1.NewTime(time.Now().Add(-10*time.Minute))
	objs := []runtime.Object{}
	for _, pool := range []string{"x", "y"} {
		n := node(pool, "2")
		n.Labels = map[string]string{"pool": pool}
		objs = append(objs, n)
	}
	for _, p := range []struct {
		name, node string
		started    metav1.Time
	}{{"a-y0", "y", hourAgo}, {"a-y1", "y", hourAgo}, {"a-x0", "x", tenMinutesAgo}, {"a-x1", "x", tenMinutesAgo}} {
		bound := pod("a", p.name, "1", 0, p.node)
		bound.Status.StartTime = &p.started
		objs = append(objs, bound)
	}
	c := gangCluster(t, quotas, objs...)
	c.Gang(t, "b", "g", 2, 2, func(i int) *v1.Pod {
		p := podgroupcycle.Member("1")(i)
		p.Spec.NodeSelector = map[string]string{"pool": "y"}
		return p
	})
	if got := c.Attempted(t, "b", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False (waiting for its victims)", got)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		left, err := c.Client.CoreV1().Pods("a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var names []string
		for _, p := range left.Items {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"a-x0", "a-x1"}), nil
	}); err != nil {
		left, _ := c.Client.CoreV1().Pods("a").List(t.Context(), metav1.ListOptions{})
		var names []string
		for _, p := range left.Items {
			names = append(names, p.Name)
		}
		t.Errorf("a's pods left: %v, want [a-x0 a-x1]: the victims are the pods on y, where the gang can go", names)
	}
}

// The min floor keeps a victim the group's first placement needs: the
// placement is tried again with it in place (review of issue 51, item 2).
// a (min 1) runs two pods on x, c (min 0) two on z; b's gang of 2 x 1 CPU
// prefers x. With every borrower's pod removed both members go to x, which
// would take a below its min; the second try leaves a-x1 there and places
// one member on x and one on z.
func TestAGangPlacementTheFloorRefusesIsTriedAgain(t *testing.T) {
	quotas := []*schedv1alpha1.ElasticQuota{eq("a", rl("cpu", "1"), rl("cpu", "4")), eq("b", rl("cpu", "2"), rl("cpu", "4")), eq("c", rl("cpu", "0"), rl("cpu", "4"))}
	objs := []runtime.Object{}
	for _, name := range []string{"x", "z"} {
		n := node(name, "2")
		n.Labels = map[string]string{"pool": name}
		objs = append(objs, n)
	}
	for _, p := range []*v1.Pod{pod("a", "a-x0", "1", 0, "x"), pod("a", "a-x1", "1", 0, "x"), pod("c", "c-z0", "1", 0, "z"), pod("c", "c-z1", "1", 0, "z")} {
		objs = append(objs, p)
	}
	c := gangCluster(t, quotas, objs...)
	c.Gang(t, "b", "g", 2, 2, func(i int) *v1.Pod {
		p := podgroupcycle.Member("1")(i)
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
			Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "pool", Operator: v1.NodeSelectorOpIn, Values: []string{"x"}}}},
		}}}}
		return p
	})
	if got := c.Attempted(t, "b", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False (waiting for its victims)", got)
	}
	count := func(ns string) int {
		l, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return count("a") == 1 && count("c") == 1, nil
	}); err != nil {
		t.Errorf("a has %d pods left, c %d: want 1 each (a at its min, one of c's taken for the member on z)", count("a"), count("c"))
	}
}
