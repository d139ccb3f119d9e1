package explain

import (
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

const (
	// queueSize bounds the explanations waiting to be written; past it they
	// are dropped and counted (scheduling never waits for them).
	queueSize = 256
	// writeTimeout bounds one write (with its retries).
	writeTimeout = 10 * time.Second
)

// writeBackoff spaces the tries of a placement's write: six, 0.1 to 1.6s
// apart (3.1s of waiting in all), within writeTimeout.
var writeBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6}

// stripes is the number of locks a pod's writes are ordered by (pods are
// spread over them by UID).
const stripes = 64

type item struct {
	pod     *v1.Pod
	result  *Result
	summary string
	// seq orders the explanations of a pod as its cycles made them (from
	// writer.next, taken in the scheduling cycle).
	seq uint64
}

// writer writes explanations off the scheduling goroutine (a pending pod's
// from its queue, a placement's in the binding cycle): the annotation
// by a merge patch of pods/status (which upstream's system:kube-scheduler
// role may patch; pods it may not), and an event.
//
// The two paths race: a pending explanation can wait in the queue while the
// pod's next cycle places it and its binding cycle writes the placement. So
// a pod's writes (patch and event) are serialised by a lock, and an
// explanation older than the placement written last for its pod is never
// written (counted as superseded): a bound pod never ends with a pending
// explanation.
type writer struct {
	fh    fwk.Handle
	queue chan item
	seq   atomic.Uint64
	seed  maphash.Seed
	locks [stripes]sync.Mutex
	// placed maps a pod's UID to the seq of the newest placement written
	// (or being written) for it; forgotten when the pod is deleted.
	placed sync.Map
}

func newWriter(ctx context.Context, fh fwk.Handle) *writer {
	w := &writer{fh: fh, queue: make(chan item, queueSize), seed: maphash.MakeSeed()}
	go w.run(ctx)
	return w
}

// next numbers an explanation; call it in the scheduling cycle that made it.
func (w *writer) next() uint64 { return w.seq.Add(1) }

// forget drops what the writer remembers of a deleted pod.
func (w *writer) forget(uid types.UID) { w.placed.Delete(uid) }

func (w *writer) lock(uid types.UID) *sync.Mutex {
	return &w.locks[maphash.String(w.seed, string(uid))%stripes]
}

// enqueue hands an explanation over, never blocking.
func (w *writer) enqueue(ctx context.Context, pod *v1.Pod, r *Result, summary string) {
	explanations.WithLabelValues(r.Outcome).Inc()
	select {
	case w.queue <- item{pod: pod, result: r, summary: summary, seq: w.next()}:
	default:
		writes.WithLabelValues("dropped").Inc()
		klog.FromContext(ctx).V(2).Info("Explain: write queue full, explanation dropped", "pod", klog.KObj(pod))
	}
}

func (w *writer) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-w.queue:
			w.write(ctx, logger, it, false)
		}
	}
}

// write writes one explanation: the annotation, then the event. retry: a
// failed patch is tried again, with backoff, until writeTimeout (the binding
// cycle's write of a placement; the queue's writes are tried once), as
// long as the error may pass: a network error, a timeout, 429 or 5xx.
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

func (w *writer) write(ctx context.Context, logger klog.Logger, it item, retry bool) {
	mu := w.lock(it.pod.UID)
	mu.Lock()
	defer mu.Unlock()
	if newest, ok := w.placed.Load(it.pod.UID); ok && newest.(uint64) > it.seq {
		writes.WithLabelValues("superseded").Inc()
		logger.V(4).Info("Explain: explanation superseded by the pod's placement", "pod", klog.KObj(it.pod))
		return
	}
	if it.result.Outcome == OutcomePlaced {
		w.placed.Store(it.pod.UID, it.seq)
	}
	b, err := encode(it.result)
	if err != nil {
		writes.WithLabelValues("error").Inc()
		logger.Error(err, "Explain: encoding an explanation", "pod", klog.KObj(it.pod))
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationResult: string(b)}}})
	if err != nil {
		writes.WithLabelValues("error").Inc()
		return
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
		if apierrors.IsNotFound(err) {
			w.forget(it.pod.UID) // gone: its delete may have been seen already
		}
		writes.WithLabelValues("error").Inc()
		logger.Error(err, "Explain: writing the explanation", "pod", klog.KObj(it.pod))
		return
	}
	writes.WithLabelValues("ok").Inc()
	resultBytes.Observe(float64(len(b)))
	if rec := w.fh.EventRecorder(); rec != nil {
		rec.Eventf(it.pod, nil, v1.EventTypeNormal, ReasonExplained, "Scheduling", "%s", it.summary)
	}
}
