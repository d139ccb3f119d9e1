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
