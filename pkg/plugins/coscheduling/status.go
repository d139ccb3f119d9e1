package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/onceper"
)

// writeStatus writes the status of the PodGroups whose members or spec
// changed since the last round, off the scheduling path, only in the process
// that schedules (mayWrite): it writes a difference, with the object's
// resourceVersion, and a failed write is logged, counted and tried again next
// round. A process that starts leading writes every group once.
func (sh *shared) writeStatus(ctx context.Context) {
	if !sh.mayWrite() {
		// A replica that does not write keeps no backlog: the one that
		// starts writing marks every group (below).
		sh.writing.Store(false)
		sh.mgr.takeDirty()
		return
	}
	if !sh.writing.Swap(true) {
		sh.mgr.markAllDirty()
	}
	logger := klog.FromContext(ctx)
	for _, key := range sh.mgr.takeDirty() {
		s := sh.mgr.spec(key)
		if s == nil {
			continue
		}
		pg, err := sh.pgLister.PodGroups(s.namespace).Get(s.name)
		if err != nil || pg.UID != s.uid {
			continue // deleted or replaced meanwhile; its own events follow
		}
		want := sh.mgr.statusOf(key, pg.Status)
		c, _, _, _ := sh.mgr.snapshot(key)
		if c.ready < c.minMember && want.Phase == schedv1alpha1.PodGroupPending {
			sh.events.waiting(s, c)
		}
		if apiequality.Semantic.DeepEqual(pg.Status, want) {
			continue
		}
		pg = pg.DeepCopy()
		pg.Status = want
		_, err = sh.pgClient.SchedulingV1alpha1().PodGroups(s.namespace).UpdateStatus(ctx, pg, metav1.UpdateOptions{})
		switch {
		case err == nil:
			statusWritesTotal.WithLabelValues("ok").Inc()
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			statusWritesTotal.WithLabelValues("conflict").Inc()
			sh.mgr.markDirty(key)
		default:
			statusWritesTotal.WithLabelValues("error").Inc()
			logger.Error(err, "Coscheduling: writing PodGroup status failed; retrying next round", "podGroup", klog.KObj(pg))
			sh.mgr.markDirty(key)
		}
	}
}

// eventLimiter records events on PodGroups through the scheduler's event
// recorder: at most one per group, reason and message a minute, and one
// GangWaiting per group a minute whatever its counts.
type eventLimiter struct {
	fh fwk.Handle
	// allowed says whether events from informers and background loops,
	// which run in every replica, may be recorded (the leader's only).
	// Events from extension points run only where the scheduler schedules.
	allowed func() bool
	// once dedupes by id.
	once *onceper.Limiter
}

const eventInterval = time.Minute

func newEventLimiter(fh fwk.Handle, allowed func() bool) *eventLimiter {
	return &eventLimiter{fh: fh, allowed: allowed, once: onceper.New(eventInterval)}
}

// waiting reports that a group waits for quorum (from the status loop).
func (l *eventLimiter) waiting(s *spec, c counts) {
	if l == nil || (l.allowed != nil && !l.allowed()) {
		return
	}
	l.record(s, v1.EventTypeNormal, reasonWaiting, fmt.Sprintf("%d/%d members, waiting for quorum", c.ready, c.minMember),
		s.namespace+"/"+s.name+"|"+reasonWaiting)
}

// background records an event from an informer handler, if allowed.
func (l *eventLimiter) background(s *spec, eventType, reason, msg string) {
	if l == nil || (l.allowed != nil && !l.allowed()) {
		return
	}
	l.podGroupRef(s, eventType, reason, msg)
}

func (l *eventLimiter) podGroup(pg *schedv1alpha1.PodGroup, eventType, reason, msg string) {
	l.background(&spec{name: pg.Name, namespace: pg.Namespace, uid: pg.UID}, eventType, reason, msg)
}

// podGroupRef records an event regarding the PodGroup s names.
func (l *eventLimiter) podGroupRef(s *spec, eventType, reason, msg string) {
	l.record(s, eventType, reason, msg, s.namespace+"/"+s.name+"|"+reason+"|"+msg)
}

// record records the event unless one of the same id was recorded within
// the interval.
func (l *eventLimiter) record(s *spec, eventType, reason, msg, id string) {
	if l == nil || l.fh == nil || l.fh.EventRecorder() == nil || !l.once.Allow(id) {
		return
	}
	// The reference names the kind itself: the recorder's scheme does not
	// know scheduler-plugins' types.
	ref := &schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, UID: s.uid},
	}
	var related runtime.Object
	l.fh.EventRecorder().Eventf(ref, related, eventType, reason, "Scheduling", "%s", msg)
}
