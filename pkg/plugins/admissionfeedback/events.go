package admissionfeedback

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// eventInterval: at most one event per pod and node, or per node, in it.
const eventInterval = time.Minute

// eventLimiter records events through the scheduler's event recorder (which
// writes them off the scheduling goroutine), rate-limited.
type eventLimiter struct {
	fh fwk.Handle
	// allowed says whether events from informer handlers, which run in
	// every replica, may be recorded (the leader's only). Events from
	// extension points run only where the scheduler schedules.
	allowed func() bool

	mu        sync.Mutex
	last      map[string]time.Time
	lastSweep time.Time
	now       func() time.Time
}

func newEventLimiter(fh fwk.Handle, allowed func() bool) *eventLimiter {
	return &eventLimiter{fh: fh, allowed: allowed, last: map[string]time.Time{}, now: time.Now}
}

// pod says on pod that node was skipped for it (from PreFilter).
func (l *eventLimiter) pod(pod *v1.Pod, node, msg string) {
	if l.take(string(pod.UID) + "|" + node) {
		l.fh.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, ReasonNodeRefusedSibling, "Scheduling", "Skipping %s", msg)
	}
}

// node says on a node that it became a black hole (from the informer).
func (l *eventLimiter) node(name, msg string) {
	if l.allowed != nil && !l.allowed() {
		return
	}
	if l.take("node|" + name) {
		ref := &v1.Node{}
		ref.Name = name
		if n, err := l.fh.SharedInformerFactory().Core().V1().Nodes().Lister().Get(name); err == nil {
			ref.UID = n.UID
		}
		l.fh.EventRecorder().Eventf(ref, nil, v1.EventTypeWarning, ReasonNodeRefusingPods, "Scheduling", "Node %s", msg)
	}
}

// take reports whether an event of this id may be recorded now.
func (l *eventLimiter) take(id string) bool {
	if l == nil || l.fh == nil || l.fh.EventRecorder() == nil {
		return false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[id]; ok && now.Sub(t) < eventInterval {
		return false
	}
	l.last[id] = now
	if now.Sub(l.lastSweep) >= eventInterval { // bounded: older entries go
		l.lastSweep = now
		for k, t := range l.last {
			if now.Sub(t) >= eventInterval {
				delete(l.last, k)
			}
		}
	}
	return true
}
