package coscheduling

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/apis/config"
)

func queued(t *testing.T, pod *v1.Pod, ts time.Time) *framework.QueuedPodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: ts}}
}

// Kubernetes' own pod groups (GenericWorkload: the queue holds a native
// PodGroup as one entity) are queued exactly as under PrioritySort when
// Coscheduling's queue sort replaces it: pair by pair among native groups and
// pods of no group, in a queue that also holds scheduler-plugins gangs.
func TestLessEqualsPrioritySortForNativePodGroups(t *testing.T) {
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, nil)
	ps := &queuesort.PrioritySort{}
	t0 := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewSource(2))
	var native, spGang []fwk.QueuedEntityInfo
	for i := range 40 {
		ts := t0.Add(time.Duration(rng.Intn(5)) * time.Second)
		prio := int32(rng.Intn(3) * 100)
		switch i % 3 {
		case 0: // a native PodGroup entity
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: fmt.Sprintf("native-%d", i)},
				Spec: schedulingv1beta1.PodGroupSpec{Priority: ptr.To(prio)}}
			native = append(native, &framework.QueuedPodGroupInfo{
				PodGroupInfo:   &framework.PodGroupInfo{Namespace: testNS, Name: pg.Name, Type: fwk.PodGroupKeyType, PodGroup: pg},
				QueueingParams: framework.QueueingParams{Timestamp: ts},
			})
		case 1: // a pod of no group
			native = append(native, queued(t, st.MakePod().Namespace(testNS).Name(fmt.Sprintf("p-%d", i)).Priority(prio).Obj(), ts))
		default: // a member of the scheduler-plugins gang g
			p := st.MakePod().Namespace(testNS).Name(fmt.Sprintf("g-%d", i)).Priority(prio).Label(schedv1alpha1.PodGroupLabel, "g").Obj()
			spGang = append(spGang, queued(t, p, ts))
		}
	}
	key := func(e fwk.QueuedEntityInfo) string {
		switch e := e.(type) {
		case *framework.QueuedPodGroupInfo:
			return "PodGroup " + e.Name
		case *framework.QueuedPodInfo:
			return "Pod " + e.Pod.Name
		}
		return fmt.Sprintf("%T", e)
	}
	for _, a := range native {
		for _, b := range native {
			if got, want := s.pl.Less(a, b), ps.Less(a, b); got != want {
				t.Fatalf("Less(%s prio %d at %s, %s prio %d at %s) = %v, PrioritySort says %v",
					key(a), a.GetPriority(), a.GetTimestamp(), key(b), b.GetPriority(), b.GetTimestamp(), got, want)
			}
		}
	}
	// Beside them, the gang's members are still ordered by priority first,
	// and the order stays a strict weak ordering over the whole queue.
	all := append(append([]fwk.QueuedEntityInfo(nil), native...), spGang...)
	for _, a := range all {
		if s.pl.Less(a, a) {
			t.Fatalf("Less(%s, itself) = true", key(a))
		}
		for _, b := range all {
			if a.GetPriority() != b.GetPriority() && s.pl.Less(a, b) != (a.GetPriority() > b.GetPriority()) {
				t.Fatalf("Less(%s prio %d, %s prio %d) does not order by priority first", key(a), a.GetPriority(), key(b), b.GetPriority())
			}
			if s.pl.Less(a, b) && s.pl.Less(b, a) {
				t.Fatalf("Less(%s, %s) and Less(%s, %s) both true", key(a), key(b), key(b), key(a))
			}
		}
	}
}

// For pods of no group, Less must be PrioritySort's Less, pair by pair.
func TestLessEqualsPrioritySortForPodsOfNoGroup(t *testing.T) {
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, nil)
	ps := &queuesort.PrioritySort{}
	t0 := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewSource(1))
	var infos []*framework.QueuedPodInfo
	for i := range 60 {
		p := st.MakePod().Namespace(testNS).Name("p" + string(rune('a'+i%26)) + string(rune('a'+i/26))).Priority(int32(rng.Intn(3) * 100)).Obj()
		if i%7 == 0 {
			p.Labels = map[string]string{"app": "x"} // labels that are not a group change nothing
		}
		infos = append(infos, queued(t, p, t0.Add(time.Duration(rng.Intn(5))*time.Second)))
	}
	for _, a := range infos {
		for _, b := range infos {
			if got, want := s.pl.Less(a, b), ps.Less(a, b); got != want {
				t.Fatalf("Less(%s prio %d at %s, %s prio %d at %s) = %v, PrioritySort says %v",
					a.Pod.Name, a.GetPriority(), a.Timestamp, b.Pod.Name, b.GetPriority(), b.Timestamp, got, want)
			}
		}
	}
	// The table upstream's own test uses.
	low, high := int32(10), int32(100)
	for _, tc := range []struct {
		name   string
		p1, p2 *framework.QueuedPodInfo
		want   bool
	}{
		{"p1 lower priority", queued(t, st.MakePod().Priority(low).Obj(), t0), queued(t, st.MakePod().Priority(high).Obj(), t0), false},
		{"p1 higher priority", queued(t, st.MakePod().Priority(high).Obj(), t0), queued(t, st.MakePod().Priority(low).Obj(), t0), true},
		{"equal priority, p1 earlier", queued(t, st.MakePod().Priority(high).Obj(), t0), queued(t, st.MakePod().Priority(high).Obj(), t0.Add(time.Second)), true},
		{"equal priority, p2 earlier", queued(t, st.MakePod().Priority(high).Obj(), t0.Add(time.Second)), queued(t, st.MakePod().Priority(high).Obj(), t0), false},
		{"equal priority and time", queued(t, st.MakePod().Priority(high).Obj(), t0), queued(t, st.MakePod().Priority(high).Obj(), t0), false},
	} {
		if got := s.pl.Less(tc.p1, tc.p2); got != tc.want || got != ps.Less(tc.p1, tc.p2) {
			t.Errorf("%s: Less = %v, want %v (PrioritySort: %v)", tc.name, got, tc.want, ps.Less(tc.p1, tc.p2))
		}
	}
}

// upstreamGroup stands for an entity of upstream's own pod-group queueing.
type upstreamGroup struct {
	framework.QueueingParams
	priority int32
}

func (u *upstreamGroup) Type() fwk.EntityKeyType { return fwk.PodGroupKeyType }
func (u *upstreamGroup) GetPriority() int32      { return u.priority }

func TestLessKeepsGroupsAdjacent(t *testing.T) {
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("old", 3, 0), podGroup("new", 3, 50)}, nil)
	t0 := time.Unix(1_700_000_100, 0)
	var infos []fwk.QueuedEntityInfo
	// Members arrive interleaved with each other and with pods of no group.
	for i := range 3 {
		infos = append(infos,
			queued(t, memberPod("new", i), t0.Add(time.Duration(3*i)*time.Second)),
			queued(t, memberPod("old", i), t0.Add(time.Duration(3*i+1)*time.Second)),
			queued(t, st.MakePod().Namespace(testNS).Name("solo-"+string(rune('a'+i))).Obj(), t0.Add(time.Duration(3*i+2)*time.Second-time.Duration(100+i)*time.Second)))
	}
	infos = append(infos,
		queued(t, st.MakePod().Namespace(testNS).Name("urgent").Priority(1000).Obj(), t0.Add(time.Hour)),
		&upstreamGroup{QueueingParams: framework.QueueingParams{Timestamp: t0.Add(-time.Hour)}},
	)
	rand.New(rand.NewSource(2)).Shuffle(len(infos), func(i, j int) { infos[i], infos[j] = infos[j], infos[i] })
	slices.SortStableFunc(infos, func(a, b fwk.QueuedEntityInfo) int {
		switch {
		case s.pl.Less(a, b):
			return -1
		case s.pl.Less(b, a):
			return 1
		}
		return 0
	})
	var got []string
	for _, e := range infos {
		if q, ok := e.(*framework.QueuedPodInfo); ok {
			got = append(got, q.Pod.Name)
		} else {
			got = append(got, "upstream-group")
		}
	}
	// Priority first; then by time: the group's creation (old at t0-100s,
	// new at t0-50s) or a solo pod's queue time (t0-98s, t0-96s, t0-94s);
	// members adjacent, in queue order.
	want := []string{"urgent", "upstream-group", "old-0", "old-1", "old-2", "solo-a", "solo-b", "solo-c", "new-0", "new-1", "new-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue order (-want,+got):\n%s", diff)
	}
}

func TestPreEnqueueQuorum(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
	gated := memberPod("g", 2)
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}}
	pods = append(pods, gated)
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	ctx := s.ctx

	if st := s.pl.PreEnqueue(ctx, st.MakePod().Name("solo").Obj()); !st.IsSuccess() {
		t.Errorf("pod of no group: %v, want success", st)
	}
	orphan := memberPod("missing", 0)
	if st := s.pl.PreEnqueue(ctx, orphan); st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != `pod group "jobs/missing" does not exist` {
		t.Errorf("pod of a missing group: %v", st)
	}
	// Two members can run; the gated one does not count.
	st := s.pl.PreEnqueue(ctx, pods[0])
	if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != "GangWaiting: 2/3 members, waiting for quorum" {
		t.Errorf("below quorum: %v", st)
	}
	// A third member appears: quorum; the waiting members are activated.
	s.createPod(memberPod("g", 3))
	s.waitFor("quorum", func() bool { return s.pl.PreEnqueue(ctx, pods[0]).IsSuccess() })
	s.waitFor("activation", func() bool {
		got := sets.New(s.rec.Activated()...)
		return got.Equal(sets.New("jobs/g-0", "jobs/g-1", "jobs/g-3"))
	})
	// The group appears: its members are activated.
	if _, err := s.pgc.SchedulingV1alpha1().PodGroups(testNS).Create(ctx, podGroup("missing", 1, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createPod(orphan)
	s.waitFor("the group", func() bool { return s.pl.PreEnqueue(ctx, orphan).IsSuccess() })
}

func TestGangReleasedTogether(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	s := newSim(t, []*v1.Node{node("n1", "2"), node("n2", "2")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	for i, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatalf("member %d: %v, want Wait", i, st)
		}
	}
	if got := s.waiting(); len(got) != 2 || len(s.boundPods()) != 0 {
		t.Fatalf("before the last member: waiting %v, bound %v", got, s.boundPods())
	}
	if st := s.schedule(pods[2]); !st.IsSuccess() {
		t.Fatalf("last member: %v, want success", st)
	}
	s.settle()
	if got := s.boundPods(); len(got) != 3 {
		t.Fatalf("bound %v, want all three", got)
	}
	s.waitFor("the latency", func() bool {
		s.pl.shared.mgr.mu.RLock()
		defer s.pl.shared.mgr.mu.RUnlock()
		return s.pl.shared.mgr.groups["jobs/g"].completed
	})
}

// A member that fits nowhere releases the members held at Permit at once,
// declines preemption, and the group waits for an event that may help.
func TestMemberThatFitsNowhereReleasesTheGang(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2), memberPod("g", 3), memberPod("g", 4)}
	s := newSim(t, []*v1.Node{node("n1", "3")}, []*schedv1alpha1.PodGroup{podGroup("g", 5, 0)}, pods)
	for _, p := range pods[:3] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatalf("%s: %v, want Wait", p.Name, st)
		}
	}
	st := s.schedule(pods[3])
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "preemption declined") {
		t.Fatalf("the fourth member: %v, want preemption declined", st)
	}
	s.waitDone("g-0", "g-1", "g-2")
	if w, b := s.waiting(), s.boundPods(); len(w) != 0 || len(b) != 0 {
		t.Fatalf("after the release: waiting %v, bound %v; want nothing held or bound", w, b)
	}
	ni, _ := s.snapshot.NodeInfos().Get("n1")
	if n := len(ni.GetPods()); n != 0 {
		t.Errorf("%d pods still assumed on n1, want 0", n)
	}
	// Until something changes, the group is refused in PreFilter, cheaply.
	_, pst, _ := s.f.RunPreFilterPlugins(s.ctx, framework.NewCycleState(), pods[0])
	if pst.Code() != fwk.Unschedulable || !strings.Contains(pst.Message(), "could not be placed") {
		t.Errorf("PreFilter after the failure: %v", pst)
	}
	// A node is added: the hint queues the member and lets the group try.
	hint, err := s.pl.isSchedulableAfterClusterChange(ktesting.NewLogger(t, ktesting.NewConfig()), pods[0], nil, node("n2", "4"))
	if err != nil || hint != fwk.Queue {
		t.Fatalf("node-add hint: %v, %v", hint, err)
	}
	if _, pst, _ := s.f.RunPreFilterPlugins(s.ctx, framework.NewCycleState(), pods[0]); !pst.IsSuccess() {
		t.Errorf("PreFilter after the hint: %v", pst)
	}
	if ev := strings.Join(s.rec.Events(), "\n"); !strings.Contains(ev, "Warning GangReleased g:") {
		t.Errorf("events %s; want GangReleased on the PodGroup", ev)
	}
}

// The last member a gang needs may preempt when evicting lower-priority
// pods could make room: the status lets DefaultPreemption run. When nothing
// could, the gang lets go of what it holds. (Gangs that need room for
// several members: TestGangNeedingPreemptionForSeveralMembers.)
func TestLastMember(t *testing.T) {
	for _, tc := range []struct {
		name         string
		victimPrio   int32
		wantCode     fwk.Code
		wantMsg      string
		wantHeldLeft int
	}{
		{"a lower-priority pod could make room", 0, fwk.Unschedulable, "the gang would complete (a dry run fits all 1 more needed): preemption may make room", 1},
		{"only pods of equal priority", 100, fwk.UnschedulableAndUnresolvable, "preemption declined: with every lower-priority pod evicted a dry run fits 0 of the 1 more needed", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
			for _, p := range pods {
				p.Spec.Priority = ptr.To[int32](100)
			}
			s := newSim(t, []*v1.Node{node("n1", "2")}, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, pods)
			other := st.MakePod().Namespace(testNS).Name("other").UID("other").Priority(tc.victimPrio).Node("n1").
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
			ni, _ := s.snapshot.NodeInfos().Get("n1")
			s.assume(other, ni)
			if st := s.schedule(pods[0]); !st.IsWait() {
				t.Fatal(st)
			}
			st := s.schedule(pods[1])
			if st.Code() != tc.wantCode || !strings.Contains(st.Message(), tc.wantMsg) {
				t.Fatalf("last member: %v, want %v %q", st, tc.wantCode, tc.wantMsg)
			}
			if tc.wantHeldLeft == 0 {
				s.waitDone("g-0")
			}
			if w := s.waiting(); len(w) != tc.wantHeldLeft {
				t.Errorf("waiting %v, want %d held", w, tc.wantHeldLeft)
			}
		})
	}
}

// Two gangs that each fit alone but not together, scheduled interleaved,
// with DefaultPreemption after Coscheduling as the documented profile has
// it: the older gang completes, the younger holds nothing while it cannot
// complete, and completes once the older one is gone (its requeue comes from
// the deletion's queueing hint, not from a test).
func TestTwoGangsNeverBothHalfHeld(t *testing.T) {
	a := []*v1.Pod{memberPod("a", 0), memberPod("a", 1), memberPod("a", 2)}
	b := []*v1.Pod{memberPod("b", 0), memberPod("b", 1), memberPod("b", 2)}
	s := newSimWith(t, withDefaultPreemption(), []*v1.Node{node("n1", "2"), node("n2", "2")},
		[]*schedv1alpha1.PodGroup{podGroup("a", 3, 0), podGroup("b", 3, 10)}, append(slices.Clone(a), b...))
	for i := range 2 { // a0 b0 a1 b1: four slots taken, both gangs half held
		for _, p := range []*v1.Pod{a[i], b[i]} {
			if st := s.schedule(p); !st.IsWait() {
				t.Fatalf("%s: %v, want Wait", p.Name, st)
			}
		}
	}
	// a2 fits nowhere; b (younger) yields its held members, and the
	// PostFilter chain ends there.
	st := s.schedule(a[2])
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "lower-ranked pod groups jobs/b") {
		t.Fatalf("a2: %v, want b released", st)
	}
	s.waitDone("b-0", "b-1")
	if st := s.schedule(a[2]); !st.IsSuccess() {
		t.Fatalf("a2 after b yielded: %v", st)
	}
	s.waitDone("a-0", "a-1", "a-2")
	// b tries again: it was marked failed when it yielded and is refused
	// until an event; or, with one slot left, its second member releases
	// the first. Either way it holds nothing.
	for _, p := range b {
		s.schedule(p)
	}
	s.settle()
	bound := s.boundPods()
	want := map[string]string{"a-0": bound["a-0"], "a-1": bound["a-1"], "a-2": bound["a-2"]}
	if diff := cmp.Diff(want, bound); diff != "" || bound["a-0"] == "" {
		t.Fatalf("bound (-want,+got):\n%s", diff)
	}
	if w := s.waiting(); len(w) != 0 {
		t.Fatalf("waiting %v: gang b must hold nothing", w)
	}
	// Gang a finishes: its pods leave the nodes. The deletion's hint lets b
	// try again (as the queue does), and b completes.
	logger := klog.FromContext(s.ctx)
	for _, p := range a {
		ni, err := s.snapshot.NodeInfos().Get(bound[p.Name])
		if err != nil {
			t.Fatal(err)
		}
		gone := p.DeepCopy()
		gone.Spec.NodeName = bound[p.Name]
		s.forget(gone, ni)
		for _, m := range b {
			if h, err := s.pl.isSchedulableAfterClusterChange(logger, m, gone, nil); err != nil || h != fwk.Queue {
				t.Fatalf("hint for %s on %s's deletion: %v, %v; want Queue", m.Name, p.Name, h, err)
			}
		}
	}
	for _, p := range b {
		s.schedule(p)
	}
	s.settle()
	if bound := s.boundPods(); bound["b-0"] == "" || bound["b-1"] == "" || bound["b-2"] == "" {
		t.Errorf("bound %v after a left, want gang b whole", bound)
	}
}

func TestTimeoutReleasesTheGang(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	pg := podGroup("g", 3, 0)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](1)
	s := newSim(t, []*v1.Node{node("n1", "4")}, []*schedv1alpha1.PodGroup{pg}, pods)
	for _, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatal(st)
		}
	}
	s.waitDone("g-0", "g-1")
	if w, b := s.waiting(), s.boundPods(); len(w) != 0 || len(b) != 0 {
		t.Fatalf("after the timeout: waiting %v, bound %v", w, b)
	}
	s.waitFor("the timeout event", func() bool {
		return strings.Contains(strings.Join(s.rec.Events(), "\n"), "Warning GangTimeout g: pod group jobs/g: members waited 1s at Permit")
	})
}

func TestTimeoutAboveTheFrameworkCapIsClampedWithAnEvent(t *testing.T) {
	pg := podGroup("g", 2, 0)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](3600)
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{pg}, nil)
	if got := s.pl.shared.mgr.spec("jobs/g").timeout; got != 15*time.Minute {
		t.Errorf("timeout %s, want 15m", got)
	}
	s.pl.shared.podGroupChanged(s.ctx, pg, false) // again, now with the test's recorder
	if ev := strings.Join(s.rec.Events(), "\n"); !strings.Contains(ev, "Warning GangTimeoutClamped g: scheduleTimeoutSeconds 3600 exceeds") {
		t.Errorf("events %q; want GangTimeoutClamped", ev)
	}
}

func TestMemberDeletedWhileOthersWait(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	s := newSim(t, []*v1.Node{node("n1", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	for _, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatal(st)
		}
	}
	// The scheduler rejects a waiting pod that is deleted; its Unreserve
	// releases the rest of the gang.
	if err := s.cs.CoreV1().Pods(testNS).Delete(s.ctx, "g-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.f.RejectWaitingPod("g-1")
	s.waitDone("g-0", "g-1")
	if w := s.waiting(); len(w) != 0 {
		t.Fatalf("waiting %v", w)
	}
	s.waitFor("the deletion", func() bool { return s.pl.PreEnqueue(s.ctx, pods[0]).Code() == fwk.UnschedulableAndUnresolvable })
}

func TestGroupDeletedWhileMembersWait(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	s := newSim(t, []*v1.Node{node("n1", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	for _, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatal(st)
		}
	}
	if err := s.pgc.SchedulingV1alpha1().PodGroups(testNS).Delete(s.ctx, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitDone("g-0", "g-1")
	if w, b := s.waiting(), s.boundPods(); len(w) != 0 || len(b) != 0 {
		t.Fatalf("waiting %v, bound %v", w, b)
	}
	if st := s.pl.PreEnqueue(s.ctx, pods[0]); st.IsSuccess() {
		t.Errorf("PreEnqueue without the group: %v", st)
	}
}

// A member whose binding fails after its gang was released is retried at
// once and the gang stands.
func TestBindFailureAfterReleaseKeepsTheGang(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
	s := newSim(t, []*v1.Node{node("n1", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, pods)
	if st := s.schedule(pods[0]); !st.IsWait() {
		t.Fatal(st)
	}
	// The second member releases the gang; then its binding fails (as when
	// ConfirmBinder refuses it): the framework unreserves it.
	state := framework.NewCycleState()
	p1 := pods[1].DeepCopy()
	p1.Spec.NodeName = "n1"
	if st := s.f.RunReservePluginsReserve(s.ctx, state, p1, "n1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st, _ := s.pl.Permit(s.ctx, state, p1, "n1"); !st.IsSuccess() {
		t.Fatalf("Permit of the last member: %v", st)
	}
	s.waitDone("g-0")
	s.f.RunReservePluginsUnreserve(s.ctx, state, p1, "n1")
	if b := s.boundPods(); b["g-0"] != "n1" {
		t.Fatalf("bound %v: the released member must stay bound", b)
	}
	activated := slices.Contains(s.rec.Activated(), "jobs/g-1")
	if !activated {
		t.Error("the member whose binding failed was not activated for an immediate retry")
	}
	// Its retry passes Permit at once: the bound member still counts.
	s.waitFor("g-0 bound in the informer", func() bool { c, _, _, _ := s.pl.shared.mgr.snapshot("jobs/g"); return c.bound == 1 })
	if st := s.schedule(pods[1]); !st.IsSuccess() {
		t.Fatalf("retry: %v, want success", st)
	}
	if ev := strings.Join(s.rec.Events(), "\n"); !strings.Contains(ev, "GangMemberBindFailed") {
		t.Errorf("events %q; want GangMemberBindFailed", ev)
	}
}

func TestMinResources(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
	pg := podGroup("g", 2, 0)
	pg.Spec.MinResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("6")}
	s := newSim(t, []*v1.Node{node("n1", "2"), node("n2", "3")}, []*schedv1alpha1.PodGroup{pg}, pods)
	_, st, _ := s.f.RunPreFilterPlugins(s.ctx, framework.NewCycleState(), pods[0])
	want := "pod group jobs/g: minResources do not fit the cluster's free capacity: needs cpu 6 (free 5)"
	if st.Code() != fwk.Unschedulable || st.Message() != want {
		t.Fatalf("PreFilter: %v\nwant %q", st, want)
	}
	// What the group already holds counts as its own.
	pg.Spec.MinResources[v1.ResourceCPU] = resource.MustParse("5")
	s.pl.shared.podGroupChanged(s.ctx, pg, false)
	if _, st, _ := s.f.RunPreFilterPlugins(s.ctx, framework.NewCycleState(), pods[0]); !st.IsSuccess() {
		t.Fatalf("5 cpu on 5 free: %v", st)
	}
	if st := s.schedule(pods[0]); !st.IsWait() {
		t.Fatal(st)
	}
	if _, st, _ := s.f.RunPreFilterPlugins(s.ctx, framework.NewCycleState(), pods[1]); !st.IsSuccess() {
		t.Fatalf("with one member held: %v", st)
	}
	if ev := strings.Join(s.rec.Events(), "\n"); !strings.Contains(ev, "Warning GangUnschedulable g: "+want) {
		t.Errorf("events %q; want GangUnschedulable on the PodGroup", ev)
	}
}

func TestStatusPhases(t *testing.T) {
	run := func(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
		p = p.DeepCopy()
		p.Status.Phase = phase
		if phase != v1.PodPending {
			p.Spec.NodeName = "n1"
		}
		p.OwnerReferences = []metav1.OwnerReference{{Name: "job-a", Kind: "Job", APIVersion: "batch/v1", UID: "j"}}
		return p
	}
	m := func(i int) *v1.Pod { return memberPod("g", i) }
	for _, tc := range []struct {
		name   string
		pods   []*v1.Pod
		cur    schedv1alpha1.PodGroupPhase
		want   schedv1alpha1.PodGroupPhase
		counts [3]int32
	}{
		{"fewer than minMember", []*v1.Pod{run(m(0), v1.PodPending)}, "", schedv1alpha1.PodGroupPending, [3]int32{}},
		{"quorum, none running", []*v1.Pod{run(m(0), v1.PodPending), run(m(1), v1.PodPending)}, schedv1alpha1.PodGroupPending, schedv1alpha1.PodGroupScheduling, [3]int32{}},
		{"one running", []*v1.Pod{run(m(0), v1.PodRunning), run(m(1), v1.PodPending)}, "", schedv1alpha1.PodGroupScheduling, [3]int32{1, 0, 0}},
		{"all running", []*v1.Pod{run(m(0), v1.PodRunning), run(m(1), v1.PodRunning)}, "", schedv1alpha1.PodGroupRunning, [3]int32{2, 0, 0}},
		{"one failed", []*v1.Pod{run(m(0), v1.PodRunning), run(m(1), v1.PodFailed)}, "", schedv1alpha1.PodGroupFailed, [3]int32{1, 0, 1}},
		{"all succeeded", []*v1.Pod{run(m(0), v1.PodSucceeded), run(m(1), v1.PodSucceeded)}, "", schedv1alpha1.PodGroupFinished, [3]int32{0, 2, 0}},
		{"finished is final", []*v1.Pod{run(m(0), v1.PodPending)}, schedv1alpha1.PodGroupFinished, schedv1alpha1.PodGroupFinished, [3]int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr := newManager()
			mgr.setSpec("jobs/g", &spec{name: "g", namespace: testNS, minMember: 2})
			for _, p := range tc.pods {
				mgr.observe("jobs/g", p)
			}
			got := mgr.statusOf("jobs/g", schedv1alpha1.PodGroupStatus{Phase: tc.cur})
			if got.Phase != tc.want || [3]int32{got.Running, got.Succeeded, got.Failed} != tc.counts {
				t.Errorf("phase %s counts %d/%d/%d, want %s %v", got.Phase, got.Running, got.Succeeded, got.Failed, tc.want, tc.counts)
			}
			if tc.cur != schedv1alpha1.PodGroupFinished && got.Phase != schedv1alpha1.PodGroupPending {
				if got.OccupiedBy != "jobs/job-a" || got.ScheduleStartTime.IsZero() {
					t.Errorf("occupiedBy %q, scheduleStartTime %v", got.OccupiedBy, got.ScheduleStartTime)
				}
			}
		})
	}
}

func TestStatusWriter(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	s.pl.shared.writeStatus(s.ctx)
	pg, err := s.pgc.SchedulingV1alpha1().PodGroups(testNS).Get(s.ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Status.Phase != schedv1alpha1.PodGroupPending {
		t.Errorf("phase %q, want Pending", pg.Status.Phase)
	}
	if ev := strings.Join(s.rec.Events(), "\n"); !strings.Contains(ev, "Normal GangWaiting g: 2/3 members, waiting for quorum") {
		t.Errorf("events %q; want GangWaiting", ev)
	}
}

func TestSignPod(t *testing.T) {
	s := newSim(t, nil, nil, nil)
	if f, st := s.pl.SignPod(context.Background(), st.MakePod().Obj()); f != nil || !st.IsSuccess() {
		t.Errorf("pod of no group: %v %v", f, st)
	}
	f, st := s.pl.SignPod(context.Background(), memberPod("g", 0))
	if !st.IsSuccess() || len(f) != 1 || f[0].Value != "jobs/g" {
		t.Errorf("member: %v %v, want signed with its group", f, st)
	}
}

func TestHints(t *testing.T) {
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, nil)
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	pod := memberPod("g", 0)
	pg := podGroup("g", 2, 0)
	toUnstructured := func(o runtime.Object) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	statusOnly := pg.DeepCopy()
	statusOnly.Status.Phase = schedv1alpha1.PodGroupScheduling
	bigger := pg.DeepCopy()
	bigger.Spec.MinMember = 1
	other := podGroup("other", 2, 0)
	for _, tc := range []struct {
		name     string
		fn       fwk.QueueingHintFn
		pod      *v1.Pod
		old, new any
		want     fwk.QueueingHint
	}{
		{"group created", s.pl.isSchedulableAfterPodGroupChange, pod, nil, toUnstructured(pg), fwk.Queue},
		{"spec changed", s.pl.isSchedulableAfterPodGroupChange, pod, toUnstructured(pg), toUnstructured(bigger), fwk.Queue},
		{"status only", s.pl.isSchedulableAfterPodGroupChange, pod, toUnstructured(pg), toUnstructured(statusOnly), fwk.QueueSkip},
		{"another group", s.pl.isSchedulableAfterPodGroupChange, pod, nil, toUnstructured(other), fwk.QueueSkip},
		{"pod of no group", s.pl.isSchedulableAfterPodGroupChange, st.MakePod().Obj(), nil, pg, fwk.QueueSkip},
		{"sibling added", s.pl.isSchedulableAfterMemberAdded, pod, nil, memberPod("g", 1), fwk.Queue},
		{"stranger added", s.pl.isSchedulableAfterMemberAdded, pod, nil, memberPod("other", 1), fwk.QueueSkip},
		{"node added", s.pl.isSchedulableAfterClusterChange, pod, nil, node("n", "1"), fwk.Queue},
		{"node added, no group", s.pl.isSchedulableAfterClusterChange, st.MakePod().Obj(), nil, node("n", "1"), fwk.QueueSkip},
		{"another pod deleted", s.pl.isSchedulableAfterClusterChange, pod, st.MakePod().Name("x").Node("n").Obj(), nil, fwk.Queue},
		// A released gang's own members leave the cache as assigned pods:
		// that room is its own, and taking it back would loop.
		{"own member deleted", s.pl.isSchedulableAfterClusterChange, pod, memberPod("g", 1), nil, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(logger, tc.pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestArgsDifferBetweenProfiles(t *testing.T) {
	s := newSim(t, nil, nil, nil)
	args := defaultArgs()
	args.WriteStatus = true
	_, err := NewWithClient(s.pgc)(s.ctx, args, s.f)
	if err == nil || !strings.Contains(err.Error(), "Coscheduling args differ between profiles") {
		t.Errorf("got %v", err)
	}
	_, err = NewWithClient(s.pgc)(s.ctx, &config.CoschedulingArgs{}, s.f)
	if err == nil || !strings.Contains(err.Error(), "scheduleTimeout") {
		t.Errorf("invalid args: got %v", err)
	}
}

func TestMissingCRDStopsStartUp(t *testing.T) {
	s := newSim(t, nil, nil, nil)
	c := fakePGClient()
	c.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: schedv1alpha1.SchemeGroupVersion.String()}}
	_, err := newShared(s.ctx, s.f, c, defaultArgs())
	const want = "Coscheduling: the API server does not serve podgroups.scheduling.x-k8s.io/v1alpha1; install the CRD from manifests/crds/scheduling.x-k8s.io_podgroups.yaml"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestToPlace(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2), memberPod("g", 3)}
	s := newSim(t, []*v1.Node{node("n1", "8")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	names := func(ps []*v1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	key, got, ok := s.pl.shared.ToPlace(pods[3])
	if diff := cmp.Diff([]string{"g-3", "g-0", "g-1"}, names(got)); !ok || key != "jobs/g" || diff != "" {
		t.Errorf("before anything is placed: %s %v (-want,+got):\n%s", key, ok, diff)
	}
	if st := s.schedule(pods[0]); !st.IsWait() {
		t.Fatal(st)
	}
	if _, got, _ := s.pl.shared.ToPlace(pods[3]); !cmp.Equal([]string{"g-3", "g-1"}, names(got)) {
		t.Errorf("one member held: %v, want g-3 and g-1", names(got))
	}
	if _, _, ok := s.pl.shared.ToPlace(st.MakePod().Name("solo").Obj()); ok {
		t.Error("a pod of no group has members to place")
	}
}

// The scheduler gives the handle its activator (the queue) only after the
// profiles are built, while Coscheduling's informers already deliver the
// PodGroups and pods that exist: activating then must not crash the
// scheduler (it did, found by the restart spec).
func TestNoActivationBeforeTheQueueExists(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1)}
	var nilActivator fwk.PodActivator
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, pods, frameworkruntime.WithPodActivator(nilActivator))
	// The informers delivered the group and its quorum without a panic; a
	// PodGroup change now must not activate either.
	bigger := podGroup("g", 1, 0)
	s.pl.shared.podGroupChanged(s.ctx, bigger, false)
	if st := s.pl.PreEnqueue(s.ctx, pods[0]); !st.IsSuccess() {
		t.Errorf("PreEnqueue: %v", st)
	}
}

// Lowering minMember completes a gang whose members wait at Permit.
func TestLoweredMinMemberReleasesTheWaitingGang(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	s := newSim(t, []*v1.Node{node("n1", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	for _, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatal(st)
		}
	}
	s.pl.shared.podGroupChanged(s.ctx, podGroup("g", 2, 0), false)
	s.waitDone("g-0", "g-1")
	if b := s.boundPods(); len(b) != 2 {
		t.Errorf("bound %v, want the two waiting members", b)
	}
}

// A process that may not write (waiting for the lease, or before the
// scheduler's caches synced) writes no status and records no event; once it
// may, it writes every group.
func TestWritesNothingUntilItMayWrite(t *testing.T) {
	pods := []*v1.Pod{memberPod("g", 0)}
	s := newSim(t, nil, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	sh := s.pl.shared
	sh.writer.SetSynced(time.Time{})
	sh.writeStatus(s.ctx)
	sh.mgr.markDirty("jobs/g")
	sh.writeStatus(s.ctx)
	pg, err := s.pgc.SchedulingV1alpha1().PodGroups(testNS).Get(s.ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Status.Phase != "" || len(s.rec.Events()) != 0 {
		t.Fatalf("wrote phase %q and events %v while it may not write", pg.Status.Phase, s.rec.Events())
	}
	sh.writer.SetSynced(time.Now())
	sh.mgr.takeDirty() // nothing marked: becoming the writer marks every group
	sh.writeStatus(s.ctx)
	if pg, _ = s.pgc.SchedulingV1alpha1().PodGroups(testNS).Get(s.ctx, "g", metav1.GetOptions{}); pg.Status.Phase != schedv1alpha1.PodGroupPending {
		t.Errorf("phase %q once it may write, want Pending", pg.Status.Phase)
	}
}
