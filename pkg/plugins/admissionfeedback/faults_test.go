package admissionfeedback

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// readmitted is a pod of rs that ran on node since long ago and was refused
// when the kubelet restarted and admitted it again (startTime stays the
// original; the Ready condition turned False at the refusal).
func readmitted(name, rs, node, reason string, started, refusedAt time.Time) *v1.Pod {
	p := refused(name, rs, node, reason, started)
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(started.Add(-time.Second))},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: metav1.NewTime(refusedAt)},
	}
	return p
}

// Item 7 of issue #26: a refusal is timed by the transition to Failed, not
// by the pod's start: a pod refused when its kubelet re-admitted it after a
// restart has a startTime of days ago.
func TestRefusalOfAPodThatHadRunIsNotBornExpired(t *testing.T) {
	t.Run("seen live", func(t *testing.T) {
		e := newEnv(t, nil)
		// Refused at t0, ran since three days before: no conditions at all
		// (the informer's first sight is the time).
		p := refused("web-old", "web", "n1", "UnexpectedAdmissionError", t0.Add(-72*time.Hour))
		if o, ok := e.pl.shared.refusalOf(p, true); ok {
			e.pl.shared.record(e.logger(), o, true)
		}
		rejected, _ := e.avoided(pending("web-new", "web"), "n1", "n2")
		if !slices.Equal(keys(rejected), []string{"n1"}) {
			t.Errorf("rejected %v right after n1 refused web's pod, want n1 avoided", rejected)
		}
	})
	t.Run("replayed by a restarted scheduler", func(t *testing.T) {
		e := newEnv(t, nil, readmitted("web-old", "web", "n1", "UnexpectedAdmissionError", t0.Add(-72*time.Hour), t0.Add(-time.Minute)))
		rejected, _ := e.avoided(pending("web-new", "web"), "n1", "n2")
		if !slices.Equal(keys(rejected), []string{"n1"}) {
			t.Errorf("rejected %v a minute after n1 refused web's pod on re-admission, want n1 avoided", rejected)
		}
	})
}

// Item 8 of issue #26: one NodeRefusedSibling event per controller and node
// per interval, however many of the controller's pods reach PreFilter; and
// the pods registered to be activated are forgotten once bound or deleted.
func TestAvoidanceEventsAndWaitingPodsAreBounded(t *testing.T) {
	t.Run("events", func(t *testing.T) {
		e := newEnv(t, nil)
		var nodes []string
		for i := range 10 {
			n := fmt.Sprintf("n%d", i)
			nodes = append(nodes, n)
			e.observe(refused(fmt.Sprintf("job-refused-%d", i), "job", n, "OutOfcpu", t0))
		}
		e.rec.Take()
		for i := range 1000 {
			e.avoided(pending(fmt.Sprintf("job-%d", i), "job"), nodes...)
		}
		if _, evs := e.rec.Take(); len(evs) != 10 {
			t.Errorf("%d events for 1,000 pods of one controller avoiding 10 nodes, want 10 (one per controller and node)", len(evs))
		}
	})
	t.Run("waiting pods", func(t *testing.T) {
		e := newEnv(t, nil)
		e.observe(refused("web-refused", "web", "n1", "OutOfcpu", t0))
		var pods []*v1.Pod
		for i := range 20 {
			p, err := e.cs.CoreV1().Pods(ns).Create(e.ctx, pending(fmt.Sprintf("web-%d", i), "web"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		}
		for _, p := range pods {
			e.avoided(p, "n1", "n2")
		}
		if n := e.waitingPods(); n != 20 {
			t.Fatalf("%d pods registered to wait for n1's avoidance, want 20", n)
		}
		for i, p := range pods {
			if i%2 == 0 {
				if err := e.cs.CoreV1().Pods(ns).Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			bound := p.DeepCopy()
			bound.Spec.NodeName = "n2"
			if _, err := e.cs.CoreV1().Pods(ns).Update(e.ctx, bound, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return e.waitingPods() == 0, nil
		}); err != nil {
			t.Errorf("%d pods still registered after all were bound or deleted, want 0", e.waitingPods())
		}
	})
}

func (e *env) logger() klog.Logger { return klog.FromContext(e.ctx) }

func (e *env) waitingPods() int {
	s := e.pl.shared.store
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, byNode := range s.byCtrl {
		for _, r := range byNode {
			n += len(r.waiting)
		}
	}
	return n
}

// Issue 51, item 8: a pod created with spec.nodeName (no scheduler bound it:
// its creator's managed fields own spec.nodeName) says nothing of how the node
// admits what schedulers place there, and any tenant can make one. Its
// refusal is not counted: three such ReplicaSets made a node a black hole
// for every pod.
func TestRefusalOfAPodNoSchedulerBoundIsIgnored(t *testing.T) {
	e := newEnv(t, nil)
	for i, rs := range []string{"t1", "t2", "t3"} {
		p := refused(fmt.Sprintf("%s-0", rs), rs, "n1", "NodeAffinity", t0.Add(-time.Duration(i)*time.Second))
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{},"f:nodeName":{}}}`)}}
		slim, err := slimFailedPod(p)
		if err != nil || !placedByAuthor(slim.(*v1.Pod)) {
			t.Fatalf("the slim pod (%v) lost who placed it", err)
		}
		e.observe(p)
	}
	if bh := e.pl.shared.blackHoles(); bh.Len() != 0 {
		t.Errorf("black holes %v from pods created on the node by a tenant, want none", bh.UnsortedList())
	}
	if rejected, _ := e.avoided(pending("t1-1", "t1"), "n1", "n2"); len(rejected) != 0 {
		t.Errorf("rejected %v for the tenant's own next pod, want none: no scheduler placed the refused one", rejected)
	}
	// The same refusals of pods a scheduler bound do count.
	e.observe(refused("web-0", "web", "n1", "NodeAffinity", t0))
	if rejected, _ := e.avoided(pending("web-1", "web"), "n1", "n2"); !slices.Equal(keys(rejected), []string{"n1"}) {
		t.Errorf("rejected %v after n1 refused a pod a scheduler bound, want n1", rejected)
	}
}

// Issue 51, item 5: 1.37's kubelet writes a refusal (rejectPod) without
// conditions and keeps the pod's old startTime; a scheduler that starts
// later must time the refusal by the kubelet's status write, which the
// pod's managedFields record (manager kubelet, subresource status).
func TestARefusalReplayedAtStartUpIsTimedByTheKubeletsWrite(t *testing.T) {
	p := refused("web-old", "web", "n1", "UnexpectedAdmissionError", t0.Add(-72*time.Hour))
	p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		Subresource: "status", Time: ptr.To(metav1.NewTime(t0.Add(-time.Minute)))})
	// The informer of Failed pods slims what it lists (slimFailedPod).
	e := newEnv(t, nil, p)
	rejected, _ := e.avoided(pending("web-new", "web"), "n1", "n2")
	if !slices.Equal(keys(rejected), []string{"n1"}) {
		t.Errorf("rejected %v a minute after n1 refused web's pod (startTime three days ago, no conditions), want n1 avoided", rejected)
	}
}

// A tenant may strip or forge its pod's managed fields: the scheduler's pod
// informer saw the pod first with spec.nodeName set (never pending, so no
// scheduler bound it), and that decides (review of issue 51, item 8).
func TestAPinnedPodWithoutManagedFieldsIsStillNotCounted(t *testing.T) {
	e := newEnv(t, nil)
	p := refused("pinned-0", "pinned", "n1", "NodeAffinity", t0)
	p.Status = v1.PodStatus{}
	p.ManagedFields = nil
	if _, err := e.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return e.pl.shared.isPinned(p.UID), nil
	}); err != nil {
		t.Fatal("the scheduler's pod informer never saw the pinned pod")
	}
	failed := refused("pinned-0", "pinned", "n1", "NodeAffinity", t0)
	failed.ManagedFields = nil // stripped: nothing says who set spec.nodeName
	e.observe(failed)
	if rejected, _ := e.avoided(pending("pinned-1", "pinned"), "n1", "n2"); len(rejected) != 0 {
		t.Errorf("rejected %v after a pinned pod with no managed fields was refused, want none", rejected)
	}
}
