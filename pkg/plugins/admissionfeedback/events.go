package admissionfeedback

import (
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/onceper"
)

// eventInterval: at most one event per controller and node, or per node, in it.
const eventInterval = time.Minute

// eventLimiter records events through the scheduler's event recorder (which
// writes them off the scheduling goroutine), rate-limited.
type eventLimiter struct {
	fh fwk.Handle
	// allowed says whether events from informer handlers, which run in
	// every replica, may be recorded (the leader's only). Events from
	// extension points run only where the scheduler schedules.
	allowed func() bool
	// once dedupes by id.
	once *onceper.Limiter
}

func newEventLimiter(fh fwk.Handle, allowed func() bool) *eventLimiter {
	return &eventLimiter{fh: fh, allowed: allowed, once: onceper.New(eventInterval)}
}

// pod says on pod that node was skipped for it (from PreFilter): once per
// controller and node in eventInterval, on the first of the controller's
// pods to reach PreFilter (a Job of a thousand pending pods avoiding ten
// nodes records ten events, not ten thousand).
func (l *eventLimiter) pod(pod *v1.Pod, ctrl controller, node string, msg func() string) {
	if l.take(string(ctrl.uid) + "|" + node) {
		l.fh.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, ReasonNodeRefusedSibling, "Scheduling", "Skipping %s", msg())
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
	return l != nil && l.fh != nil && l.fh.EventRecorder() != nil && l.once.Allow(id)
}
