package explain

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

const (
	// queueSize bounds the pods whose explanations wait to be written; past
	// it a new pod's explanation is dropped and counted (scheduling never
	// waits for them).
	queueSize = 256
	// writeTimeout bounds one write (with its retries).
	writeTimeout = 10 * time.Second
	// queueRetries: a queued explanation whose write failed on an error
	// that may pass is tried again this many times, on the queue's
	// per-item backoff, unless a newer one of the pod replaces it.
	queueRetries = 3
)

// writeBackoff spaces the tries of a placement's write: six, 0.1 to 1.6s
// apart (3.1s of waiting in all), within writeTimeout.
var writeBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6}

// queueBackoff spaces a queued explanation's retries: 0.5, 1, 2 s.
func queueBackoff() workqueue.TypedRateLimiter[types.UID] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](500*time.Millisecond, 10*time.Second)
}

type item struct {
	pod     *v1.Pod
	result  *Result
	summary string
	// seq orders the explanations of a pod as its cycles made them (from
	// writer.next, taken in the scheduling cycle).
	seq uint64
	// recheck is set for an explanation made from the pod's condition
	// (no cycle of this replica ran): it is written on the pod's version
	// it was made from (a resourceVersion precondition), so that a pod
	// changed since (bound, or explained, by the replica before: writes it
	// had held that landed late) is not given it. On a conflict, recheck
	// reads the pod's newest version and says whether its decision still
	// has no explanation; the write is then tried again on that version.
	recheck func() (*v1.Pod, bool)
}

// writer writes explanations off the scheduling goroutine (a pending pod's
// from a client-go workqueue keyed by the pod's UID, a placement's in the
// binding cycle): the annotation by a merge patch of pods/status (which
// upstream's system:kube-scheduler role may patch; pods it may not), and an
// event.
//
// The queue holds a pod once: a newer explanation of a pod waiting there
// replaces the older (counted as superseded), and one worker writes them,
// so one pod's queued writes never overlap. The two paths race: a pending
// explanation can wait in the queue while the pod's next cycle places it
// and its binding cycle writes the placement. So an explanation older than
// the pod's placement is never written (counted as superseded), and a
// placement's write waits for a queued write of the same pod under way: a
// bound pod never ends with a pending explanation, whether or not its
// placement was explained. A pod another replica bound (the leader before,
// a bind that landed late) has what is queued for it dropped when its bind
// is seen, and an explanation made from a pod's condition is written on
// the pod's version it was made from (item.recheck), so it never lands on
// a pod bound since.
type writer struct {
	fh    fwk.Handle
	queue workqueue.TypedRateLimitingInterface[types.UID]
	seq   atomic.Uint64

	// mu guards what follows.
	mu sync.Mutex
	// pending holds each queued pod's newest explanation.
	pending map[types.UID]item
	// placed maps a pod's UID to the seq of its newest placement (taken at
	// Reserve) while an explanation of it was queued or being written:
	// such an explanation older than it is stale. Forgotten when the pod
	// is deleted.
	placed map[types.UID]uint64
	// binding holds the pods placed (Reserve) and not yet bound, nor
	// unreserved, nor deleted: an explanation made of such a pod (a late
	// informer handler's, numbered "now") is older than its placement and
	// is not queued.
	binding sets.Set[types.UID]
	// inflight is the pod whose queued explanation is being written, done
	// closed when that write ends; inflightGone, that the pod was deleted
	// meanwhile (its write is not tried again: a pod recreated under the
	// name would get it).
	inflight     types.UID
	inflightGone bool
	done         chan struct{}
}

func newWriter(ctx context.Context, fh fwk.Handle) *writer {
	w := newQueue(fh)
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	go w.run(ctx)
	return w
}

// newQueue is a writer that nothing runs yet (newWriter starts it).
func newQueue(fh fwk.Handle) *writer {
	return &writer{fh: fh, pending: map[types.UID]item{}, placed: map[types.UID]uint64{}, binding: sets.New[types.UID](),
		queue: workqueue.NewTypedRateLimitingQueue(queueBackoff())}
}

// next numbers an explanation; call it in the scheduling cycle that made it.
func (w *writer) next() uint64 { return w.seq.Add(1) }

// placing marks that the pod is placed, in its Reserve (the scheduling
// cycle), explained or not: what is queued for it from earlier cycles is
// stale from now on.
//
// unreserved: the pod was placed and unreserved before, so an explanation
// of that rejection may still be queued later, numbered as of the
// Unreserve: mark the placement either way.
func (w *writer) placing(uid types.UID, unreserved bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.binding != nil { // nil: no pod informer tells the bind (unit tests)
		w.binding.Insert(uid)
	}
	if _, queued := w.pending[uid]; queued || w.inflight == uid || unreserved {
		if w.placed == nil {
			w.placed = map[types.UID]uint64{}
		}
		w.placed[uid] = w.next()
	}
}

// unplacing: the pod's placement ended — undone (Unreserve), or the pod is
// in a scheduling cycle again (PreFilter) — so explanations made from now
// on are newer than it. A bind seen ends it too (bound).
func (w *writer) unplacing(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.binding.Delete(uid)
}

// bound: the pod's bind was seen (this replica's or another's). Its
// placement ended, and an explanation still queued for it is stale: every
// placed explanation is written before its bind (PreBind), so what waits
// is a pending one, made before the bind (by this replica of a decision
// the replica before it made, whose bind landed after). A write already
// under way is not stopped, nor tried again.
func (w *writer) bound(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.binding.Delete(uid)
	if _, queued := w.pending[uid]; queued {
		delete(w.pending, uid) // the queue's key is dropped by writeNext
		writes.WithLabelValues("superseded").Inc()
	}
	if w.inflight == uid {
		// The write under way is not tried again if it fails.
		if w.placed == nil {
			w.placed = map[types.UID]uint64{}
		}
		w.placed[uid] = w.next()
	}
}

// isBinding: the pod is placed and its bind not yet seen.
func (w *writer) isBinding(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.binding.Has(uid)
}

// room is how many more pods' explanations the queue takes.
func (w *writer) room() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return queueSize - len(w.pending)
}

// forget drops what the writer remembers of a deleted pod.
func (w *writer) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, uid)
	delete(w.placed, uid)
	w.binding.Delete(uid)
	if w.inflight == uid {
		w.inflightGone = true
	}
}

// superseded: the pod was placed in a cycle after the one that made it.
// w.mu must be held.
func (w *writer) superseded(it item) bool {
	newest, ok := w.placed[it.pod.UID]
	return ok && newest > it.seq
}

// enqueue hands an explanation over, never blocking, and reports whether
// it was queued (not: the pod is being placed, the queue is full, or a
// newer explanation of it waits).
func (w *writer) enqueue(ctx context.Context, pod *v1.Pod, r *Result, summary string) bool {
	return w.enqueueAs(ctx, pod, r, summary, 0)
}

// enqueueAs is enqueue with the explanation numbered seq (0: the next
// number): one made from an earlier moment than now.
func (w *writer) enqueueAs(ctx context.Context, pod *v1.Pod, r *Result, summary string, seq uint64) bool {
	return w.enqueueItem(ctx, item{pod: pod, result: r, summary: summary, seq: seq})
}

// enqueueItem is enqueueAs of an item made whole (recheck set).
func (w *writer) enqueueItem(ctx context.Context, it item) bool {
	explanations.WithLabelValues(it.result.Outcome).Inc()
	if it.seq == 0 {
		it.seq = w.next()
	}
	pod := it.pod
	w.mu.Lock()
	old, queued := w.pending[pod.UID]
	switch {
	case w.binding.Has(pod.UID):
		// Made after the pod's placement, of an earlier moment: stale.
		w.mu.Unlock()
		writes.WithLabelValues("superseded").Inc()
		return false
	case !queued && len(w.pending) >= queueSize:
		w.mu.Unlock()
		writes.WithLabelValues("dropped").Inc()
		klog.FromContext(ctx).V(2).Info("Explain: write queue full, explanation dropped", "pod", klog.KObj(pod))
		return false
	case queued && old.seq > it.seq:
		// Made from an earlier moment than the one waiting: stale.
		w.mu.Unlock()
		writes.WithLabelValues("superseded").Inc()
		return false
	}
	w.pending[pod.UID] = it
	w.mu.Unlock()
	if queued {
		writes.WithLabelValues("superseded").Inc()
		// The newer explanation starts its retries afresh.
		w.queue.Forget(pod.UID)
	}
	w.queue.Add(pod.UID)
	return true
}

func (w *writer) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for w.writeNext(ctx, logger) {
	}
}

// writeNext writes the next pod's queued explanation unless the pod was
// placed since it was made; false once the queue is shut down (what is left
// in it then is not written: the scheduler is stopping).
// The check and the mark of the write under way are one step under mu: a
// placement either is seen here or, reserved after it, finds this write
// under way and waits for it. A write that failed on an error that may pass
// is queued again with backoff, queueRetries times at most, unless a newer
// explanation of the pod is queued meanwhile.
func (w *writer) writeNext(ctx context.Context, logger klog.Logger) bool {
	uid, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(uid)
	if ctx.Err() != nil {
		// Get hands out what is queued until the queue is empty, after
		// ShutDown too.
		w.queue.Forget(uid)
		return false
	}
	w.mu.Lock()
	it, ok := w.pending[uid]
	delete(w.pending, uid)
	switch {
	case !ok: // the pod was deleted, or a newer explanation's write took it
		w.mu.Unlock()
		w.queue.Forget(uid)
		return true
	case w.superseded(it):
		w.mu.Unlock()
		w.queue.Forget(uid)
		writes.WithLabelValues("superseded").Inc()
		logger.V(4).Info("Explain: explanation superseded by the pod's placement", "pod", klog.KObj(it.pod))
		return true
	}
	w.inflight, w.inflightGone, w.done = uid, false, make(chan struct{})
	w.mu.Unlock()

	err := w.write(ctx, logger, it, false)

	w.mu.Lock()
	defer w.mu.Unlock()
	gone := w.inflightGone
	w.inflight, w.inflightGone = "", false
	close(w.done)
	retry := err != nil && transient(err)
	if apierrors.IsConflict(err) && it.recheck != nil {
		// The pod changed since the explanation was made from it.
		if cur, ok := it.recheck(); ok {
			it.pod, retry = cur, true
		} else {
			writes.WithLabelValues("superseded").Inc()
		}
	}
	if _, newer := w.pending[uid]; newer || gone || !retry || w.superseded(it) || w.queue.NumRequeues(uid) >= queueRetries {
		w.queue.Forget(uid)
		return true
	}
	w.pending[uid] = it
	w.queue.AddRateLimited(uid)
	return true
}

// writePlaced writes a placement's explanation in the binding cycle, with
// retries, after a queued write of the same pod under way (whose
// explanation is older).
func (w *writer) writePlaced(ctx context.Context, logger klog.Logger, it item) {
	w.mu.Lock()
	busy, done := w.inflight == it.pod.UID, w.done
	w.mu.Unlock()
	if busy {
		waitCtx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		select {
		case <-done:
		case <-waitCtx.Done():
			writes.WithLabelValues("error").Inc()
			logger.Error(waitCtx.Err(), "Explain: waiting for the pod's earlier write", "pod", klog.KObj(it.pod))
			return
		}
	}
	_ = w.write(ctx, logger, it, true) // counted and logged by write
}

// transient: an error a later try may not see (the API server unreachable,
// overloaded or timing out), as opposed to one it will (Forbidden, NotFound,
// Invalid).
func transient(err error) bool {
	if status := apierrors.APIStatus(nil); !errors.As(err, &status) {
		return true // no answer from the API server
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}

// write writes one explanation: the annotation, then the event, and returns
// the patch's error (counted and logged). retry: a failed patch is tried
// again, with backoff, until writeTimeout (the binding cycle's write of a
// placement; the queue retries its own writes, see writeNext), as long as
// the error may pass: a network error, a timeout, 429 or 5xx.
func (w *writer) write(ctx context.Context, logger klog.Logger, it item, retry bool) error {
	b, err := encode(it.result)
	if err != nil {
		writes.WithLabelValues("error").Inc()
		logger.Error(err, "Explain: encoding an explanation", "pod", klog.KObj(it.pod))
		return nil // counted and logged; trying again cannot help
	}
	meta := map[string]any{"annotations": map[string]string{AnnotationResult: string(b)}}
	if it.recheck != nil {
		meta["resourceVersion"] = it.pod.ResourceVersion // see item.recheck
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		writes.WithLabelValues("error").Inc()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	try := func(ctx context.Context) (bool, error) {
		_, err = w.fh.ClientSet().CoreV1().Pods(it.pod.Namespace).Patch(ctx, it.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err == nil || !retry || !transient(err), nil
	}
	if waitErr := wait.ExponentialBackoffWithContext(ctx, writeBackoff, try); waitErr != nil && err == nil {
		err = waitErr
	}
	if err != nil {
		if apierrors.IsConflict(err) && it.recheck != nil {
			// Counted by writeNext, which reads the pod again.
			logger.V(4).Info("Explain: the pod changed since its explanation was made from its condition", "pod", klog.KObj(it.pod))
			return err
		}
		if apierrors.IsNotFound(err) {
			w.forget(it.pod.UID) // gone: its delete may have been seen already
		}
		writes.WithLabelValues("error").Inc()
		logger.Error(err, "Explain: writing the explanation", "pod", klog.KObj(it.pod))
		return err
	}
	writes.WithLabelValues("ok").Inc()
	resultBytes.Observe(float64(len(b)))
	if rec := w.fh.EventRecorder(); rec != nil {
		rec.Eventf(it.pod, nil, v1.EventTypeNormal, ReasonExplained, eventAction(it.result), "%s", it.summary)
	}
	return nil
}

// eventAction is the Explained event's action: Binding for a placement,
// Scheduling for a pending pod, as upstream's Scheduled and
// FailedScheduling events. They must differ: client-go's events
// broadcaster folds an event into the series of an earlier one with the
// same regarding object, reason and action (keeping the earlier note), so
// with one action a placement explained within minutes of a pending
// explanation would never be shown.
func eventAction(r *Result) string {
	if r.Outcome == OutcomePlaced {
		return "Binding"
	}
	return "Scheduling"
}
