package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// churnGroups creates and deletes n PodGroups with a member each through
// the plugin's informer handlers, as the informers deliver them.
func churnGroups(s *sim, n int) {
	sh := s.pl.shared
	logger := klog.FromContext(s.ctx)
	for i := range n {
		name := fmt.Sprintf("churn-%d", i)
		pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("pg-" + name)},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: 1}}
		pod := st.MakePod().Namespace(testNS).Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, name).Obj()
		sh.podGroupChanged(s.ctx, pg, false)
		sh.podChanged(logger, pod)
		sh.podDeleted(pod)
		sh.podGroupChanged(s.ctx, pg, true)
	}
}

func dirtyLen(sh *shared) int {
	sh.mgr.mu.RLock()
	defer sh.mgr.mu.RUnlock()
	return sh.mgr.dirty.Len()
}

// Item 6 of issue #26: the set of groups whose status may be stale is
// emptied only by the status writer, so it must not grow where no writer
// takes from it: with writeStatus off, and on a replica that does not write.
func TestDirtyIsBoundedWithoutAWriter(t *testing.T) {
	t.Run("writeStatus off", func(t *testing.T) {
		s := newSim(t, nil, nil, nil)
		churnGroups(s, 10_000)
		if n := dirtyLen(s.pl.shared); n != 0 {
			t.Errorf("%d groups marked for a status write with writeStatus off, want 0", n)
		}
	})
	t.Run("a replica that does not write", func(t *testing.T) {
		s := newSim(t, nil, nil, nil)
		sh := s.pl.shared
		sh.args.WriteStatus = true
		sh.mgr.trackDirty = true
		sh.writer.SetSynced(time.Time{}) // not the leader
		churnGroups(s, 10_000)
		sh.writeStatus(s.ctx) // the status loop's round on a follower
		if n := dirtyLen(sh); n != 0 {
			t.Errorf("%d groups marked for a status write on a replica that does not write, after its status round, want 0", n)
		}
	})
}

// failReserve is a Reserve plugin that fails once for one pod, as
// VolumeBinding or DynamicResources can.
type failReserve struct {
	pod    string
	failed *atomic.Bool
}

func (f failReserve) Name() string { return "FailReserve" }
func (f failReserve) Reserve(_ context.Context, _ fwk.CycleState, p *v1.Pod, _ string) *fwk.Status {
	if p.Name == f.pod && f.failed.CompareAndSwap(false, true) {
		return fwk.NewStatus(fwk.Unschedulable, "volume binding failed")
	}
	return nil
}
func (f failReserve) Unreserve(context.Context, fwk.CycleState, *v1.Pod, string) {}

// Item 4 of issue #26: the framework runs every Reserve plugin's Unreserve
// after a Reserve failure, also of plugins whose Reserve never ran. A member
// that an earlier plugin refused at Reserve was never Coscheduling's: its
// held siblings stay held, and the member's retry completes the gang.
func TestReserveFailureOfAnEarlierPluginKeepsTheGangHeld(t *testing.T) {
	fail := failReserve{pod: "g-2", failed: &atomic.Bool{}}
	before := []tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(fail.Name(), func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return fail, nil
	}, "Reserve")}
	pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
	s := newSimWith(t, extraPlugins{before: before}, []*v1.Node{node("n1", "8")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
	for _, p := range pods[:2] {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatalf("%s: %v, want Wait", p.Name, st)
		}
	}
	if st := s.schedule(pods[2]); st.IsSuccess() || st.IsWait() {
		t.Fatalf("g-2: %v, want the Reserve failure", st)
	}
	// g-2 is retried and passes Reserve: the gang is complete.
	st := s.schedule(pods[2])
	s.settle()
	want := map[string]string{"g-0": "n1", "g-1": "n1", "g-2": "n1"}
	if diff := cmp.Diff(want, s.boundPods()); diff != "" {
		t.Errorf("g-2's retry: %v; bound (-want,+got):\n%s\nevents: %v", st, diff, s.rec.Events())
	}
}

// Item 3 of issue #26: a member the framework rejected at Permit (its
// timer, its deletion, a preemption) reaches Coscheduling only in Unreserve,
// later, on the binding goroutine. Until then it must not count as placed: a
// sibling reaching Permit meanwhile would release a gang that is one short.
func TestMemberRejectedAtPermitDoesNotCountBeforeUnreserve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reject func(s *sim, p *v1.Pod)
	}{
		{"deleted while waiting", func(s *sim, p *v1.Pod) {
			// As the scheduler's informer does on a deletion: the pod leaves
			// its store, then its handler rejects the waiting pod. The
			// plugin's own member informer has not seen the deletion yet
			// (the two informers run apart).
			if err := s.f.SharedInformerFactory().Core().V1().Pods().Informer().GetStore().Delete(p); err != nil {
				t.Fatal(err)
			}
			s.f.RejectWaitingPod(p.UID)
		}},
		{"preempted in memory while waiting", func(s *sim, p *v1.Pod) {
			if wp := s.f.GetWaitingPod(p.UID); wp == nil || !wp.Preempt("DefaultPreemption", "preempted") {
				t.Fatalf("%s was not waiting", p.Name)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*v1.Pod{memberPod("g", 0), memberPod("g", 1), memberPod("g", 2)}
			s := newSim(t, []*v1.Node{node("n1", "8")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
			hold := make(chan struct{})
			s.mu.Lock()
			s.holdUnreserve["g-0"] = hold
			s.mu.Unlock()
			for _, p := range pods[:2] {
				if st := s.schedule(p); !st.IsWait() {
					t.Fatalf("%s: %v, want Wait", p.Name, st)
				}
			}
			tc.reject(s, pods[0])
			// The binding goroutine woke (the framework dropped g-0 from its
			// waiting pods) and has not reached Unreserve yet.
			s.waitFor("g-0 to leave the waiting pods", func() bool { return s.f.GetWaitingPod(pods[0].UID) == nil })
			st := s.schedule(pods[2])
			close(hold)
			s.settle()
			if b := s.boundPods(); len(b) != 0 {
				t.Errorf("g-2 at Permit: %v; bound %v: a gang of minMember 3 was released with only g-1 and g-2 held", st, b)
			}
		})
	}
}

// postFilterProbe stands where DefaultPreemption stands in the documented
// profile (after Coscheduling at postFilter) and counts the cycles that
// reach it.
type postFilterProbe struct{ calls *atomic.Int32 }

func (p postFilterProbe) Name() string { return "PostFilterProbe" }
func (p postFilterProbe) PostFilter(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	p.calls.Add(1)
	return nil, fwk.NewStatus(fwk.Unschedulable, "probe")
}

func withProbe() (extraPlugins, *atomic.Int32) {
	probe := postFilterProbe{calls: &atomic.Int32{}}
	return extraPlugins{after: []tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(probe.Name(), func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return probe, nil
	}, "PostFilter")}}, probe.calls
}

// fill fills a node with n one-CPU pods of priority 0.
func (s *sim) fill(nodeName string, n int) {
	ni, err := s.snapshot.NodeInfos().Get(nodeName)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("batch-%s-%d", nodeName, i)
		s.assume(st.MakePod().Namespace("batch").Name(name).UID(name).Priority(0).Node(nodeName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj(), ni)
	}
}

// Item 1 of issue #26: a gang that needs preemption for more than one member
// lets the preemption plugin after Coscheduling run for each member when a
// dry run says the whole gang would then fit, and declines when it would not.
func TestGangNeedingPreemptionForSeveralMembers(t *testing.T) {
	gang := func(n int, cpu string) []*v1.Pod {
		var pods []*v1.Pod
		for i := range n {
			p := memberPod("g", i)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
			p.Spec.Priority = ptr.To[int32](1000)
			pods = append(pods, p)
		}
		return pods
	}
	t.Run("the whole gang fits once lower-priority pods go: preemption runs", func(t *testing.T) {
		// The evidence: two full 4-CPU nodes of priority-0 pods, a
		// gang of two 2-CPU members of priority 1000.
		pods := gang(2, "2")
		extra, calls := withProbe()
		s := newSimWith(t, extra, []*v1.Node{node("n1", "4"), node("n2", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 2, 0)}, pods)
		s.fill("n1", 4)
		s.fill("n2", 4)
		st := s.schedule(pods[0])
		if calls.Load() != 1 {
			t.Fatalf("first member: %v; the preemption plugin after Coscheduling ran %d times, want once", st, calls.Load())
		}
		if !strings.Contains(st.Message(), "preemption may make room") {
			t.Errorf("first member's status %q: want it to say preemption may make room", st.Message())
		}
	})
	t.Run("the gang would not fit even then: preemption is declined", func(t *testing.T) {
		// Three 3-CPU members: with every batch pod gone the nodes take
		// one each, two in all.
		pods := gang(3, "3")
		extra, calls := withProbe()
		s := newSimWith(t, extra, []*v1.Node{node("n1", "4"), node("n2", "4")}, []*schedv1alpha1.PodGroup{podGroup("g", 3, 0)}, pods)
		s.fill("n1", 4)
		s.fill("n2", 4)
		st := s.schedule(pods[0])
		if calls.Load() != 0 || st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("first member: %v, preemption plugin ran %d times; want it declined", st, calls.Load())
		}
		if !strings.Contains(st.Message(), "a dry run fits 2 of the 3 more needed") {
			t.Errorf("status %q: want the dry run's count", st.Message())
		}
	})
}

// Item 2 of issue #26: after a lower-ranked gang yields its held members,
// the PostFilter chain ends: a preemption plugin after Coscheduling would
// evict pods on a snapshot that still holds the yielded pods.
func TestYieldEndsThePostFilterChain(t *testing.T) {
	a := []*v1.Pod{memberPod("a", 0), memberPod("a", 1)}
	b := []*v1.Pod{memberPod("b", 0), memberPod("b", 1)}
	extra, calls := withProbe()
	s := newSimWith(t, extra, []*v1.Node{node("n1", "2")},
		[]*schedv1alpha1.PodGroup{podGroup("a", 2, 0), podGroup("b", 2, 10)}, append(slices.Clone(a), b...))
	for _, p := range []*v1.Pod{a[0], b[0]} {
		if st := s.schedule(p); !st.IsWait() {
			t.Fatalf("%s: %v, want Wait", p.Name, st)
		}
	}
	st := s.schedule(a[1])
	if !strings.Contains(st.Message(), "lower-ranked pod groups jobs/b") {
		t.Fatalf("a-1: %v, want b to yield", st)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the preemption plugin after Coscheduling ran %d times in the cycle where b yielded, want 0", n)
	}
	s.waitDone("b-0")
	if st := s.schedule(a[1]); !st.IsSuccess() {
		t.Fatalf("a-1 on the freed room: %v", st)
	}
	s.settle()
	if b := s.boundPods(); b["a-0"] == "" || b["a-1"] == "" {
		t.Errorf("bound %v, want gang a", b)
	}
}
