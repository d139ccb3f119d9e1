package explain

import (
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// patches records the pods/status patches a fake API server received and
// fails the first failFirst of them with fail (503 if nil).
type patches struct {
	mu        sync.Mutex
	bodies    []string
	tries     int
	failFirst int
	fail      error
}

func writerUnderTest(t *testing.T, pod *v1.Pod, p *patches) *writer {
	t.Helper()
	cs := kubefake.NewClientset(pod)
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.tries++
		if p.failFirst > 0 {
			p.failFirst--
			if p.fail != nil {
				return true, nil, p.fail
			}
			return true, nil, apierrors.NewServiceUnavailable("the test's API server is unavailable")
		}
		p.bodies = append(p.bodies, string(a.(k8stesting.PatchAction).GetPatch()))
		return true, pod, nil
	})
	f, err := tf.NewFramework(t.Context(), []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "berth", frameworkruntime.WithClientSet(cs))
	if err != nil {
		t.Fatal(err)
	}
	w := newQueue(f)
	t.Cleanup(w.queue.ShutDown)
	return w
}

func pendingResult(msg string) *Result {
	return &Result{Version: ResultVersion, Outcome: OutcomePending, Rejection: msg}
}

// A pod explained twice before the queue wrote the first is written once,
// with the newer explanation: the queue holds a pod once.
func TestTheQueueWritesAPodsNewestExplanationOnce(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{}
	w := writerUnderTest(t, pod, p)
	ctx, logger := t.Context(), klog.FromContext(t.Context())
	w.enqueue(ctx, pod, pendingResult("first"), "fits none of 3 nodes")
	w.enqueue(ctx, pod, pendingResult("second"), "fits none of 4 nodes")
	if n := w.queue.Len(); n != 1 {
		t.Fatalf("queue length %d after two explanations of one pod, want 1", n)
	}
	w.writeNext(ctx, logger)
	if n := w.queue.Len(); n != 0 {
		t.Fatalf("queue length %d after one write, want 0", n)
	}
	if len(p.bodies) != 1 || !strings.Contains(p.bodies[0], "second") || strings.Contains(p.bodies[0], "first") {
		t.Errorf("patches %q, want one, of the second explanation", p.bodies)
	}
}

// A queued explanation whose write met an error that may pass (the API
// server unavailable) is written on a later try.
func TestTheQueueRetriesAWriteThatMayPass(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{failFirst: 1}
	w := writerUnderTest(t, pod, p)
	ctx, logger := t.Context(), klog.FromContext(t.Context())
	w.enqueue(ctx, pod, pendingResult("unavailable once"), "fits none of 3 nodes")
	w.writeNext(ctx, logger) // fails: 503
	if len(p.bodies) != 0 {
		t.Fatalf("patches %q after a failed write", p.bodies)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.writeNext(ctx, logger) // the retry, after the queue's backoff
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not tried again within 10s (its backoff is 0.5s)")
	}
	if len(p.bodies) != 1 || !strings.Contains(p.bodies[0], "unavailable once") {
		t.Errorf("patches %q, want the explanation written on its retry", p.bodies)
	}
}

// A queued explanation whose write was refused for good (Forbidden) is not
// tried again.
func TestTheQueueDoesNotRetryARefusal(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{failFirst: 1, fail: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", nil)}
	w := writerUnderTest(t, pod, p)
	w.enqueue(t.Context(), pod, pendingResult("forbidden"), "fits none of 3 nodes")
	w.writeNext(t.Context(), klog.FromContext(t.Context()))
	if n, r := w.queue.Len(), w.queue.NumRequeues("u-p"); n != 0 || r != 0 || p.tries != 1 {
		t.Errorf("after a Forbidden write: queue length %d, requeues %d, tries %d; want 0, 0, 1", n, r, p.tries)
	}
}

// A pod deleted while its queued explanation was being written is not
// written again when that write failed: a pod recreated under its name
// would get it.
func TestTheQueueDoesNotRetryTheWriteOfADeletedPod(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{failFirst: 1}
	w := writerUnderTest(t, pod, p)
	w.fh.ClientSet().(*kubefake.Clientset).PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		w.forget("u-p") // the informer's delete arrives during the write
		return false, nil, nil
	})
	w.enqueue(t.Context(), pod, pendingResult("deleted meanwhile"), "fits none of 3 nodes")
	w.writeNext(t.Context(), klog.FromContext(t.Context()))
	if n, r := w.queue.Len(), w.queue.NumRequeues("u-p"); n != 0 || r != 0 {
		t.Errorf("after a failed write of a pod deleted meanwhile: queue length %d, requeues %d; want 0, 0", n, r)
	}
}

// An explanation of a pod made while the pod is placed and not yet bound
// (a PodGroup member's late group failure, its informer handler run after
// the member's Reserve, numbered "now") is dropped: written after the
// placement it would leave a bound pod explained as pending. Once the
// placement is undone (Unreserve) the pod's explanations are queued again.
// Seen in the 1,000-node soak with SchedulerAsyncAPICalls: a bound native
// gang member whose explanation said Pending.
func TestAnExplanationMadeWhileThePodIsPlacedIsDropped(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p"}}
	w := writerUnderTest(t, pod, &patches{})
	w.placing(pod.UID, false)
	w.enqueue(t.Context(), pod, pendingResult("a late group failure"), "late")
	if w.queue.Len() != 0 {
		t.Fatal("an explanation made after the pod's placement, before its bind, was queued")
	}
	w.unplacing(pod.UID)
	w.enqueue(t.Context(), pod, pendingResult("rejected at Permit"), "rejected")
	if w.queue.Len() != 1 {
		t.Fatal("the explanation of a pod whose placement was undone was not queued")
	}
	w.placing(pod.UID, false)
	w.unplacing(pod.UID)
	if w.binding.Has(pod.UID) {
		t.Error("the writer still holds the pod as being placed after its bind")
	}
	w.placing(pod.UID, false)
	w.forget(pod.UID)
	if w.binding.Has(pod.UID) {
		t.Error("the writer still holds the pod as being placed after its deletion")
	}
}

// A pending explanation still queued when the pod's bind is seen is not
// written: it was made before the bind, and here no Reserve of this
// replica numbered a placement after it (another replica bound the pod:
// the leader before, whose bind landed after this one explained the
// decision it had left unexplained).
func TestAPendingExplanationQueuedWhenTheBindIsSeenIsDropped(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{}
	w := writerUnderTest(t, pod, p)
	ctx, logger := t.Context(), klog.FromContext(t.Context())
	if !w.enqueue(ctx, pod, pendingResult("decided by the leader before"), "pending") {
		t.Fatal("not queued")
	}
	w.bound(pod.UID)
	w.writeNext(ctx, logger)
	if len(p.bodies) != 0 {
		t.Errorf("patches %q: a pending explanation was written on a bound pod", p.bodies)
	}
}

// A pending explanation being written when the pod's bind is seen is not
// tried again if that write fails (it may not be stopped).
func TestAWriteUnderWayWhenTheBindIsSeenIsNotRetried(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p"}}
	p := &patches{failFirst: 1}
	w := writerUnderTest(t, pod, p)
	w.fh.ClientSet().(*kubefake.Clientset).PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		w.bound("u-p") // the bind arrives during the write
		return false, nil, nil
	})
	w.enqueue(t.Context(), pod, pendingResult("bound meanwhile"), "pending")
	w.writeNext(t.Context(), klog.FromContext(t.Context()))
	if n, r := w.queue.Len(), w.queue.NumRequeues("u-p"); n != 0 || r != 0 {
		t.Errorf("after a failed write of a pod bound meanwhile: queue length %d, requeues %d; want 0, 0", n, r)
	}
}

// An explanation made from a pod's condition is written on the pod's
// version it was made from: when the pod changed since (here a conflict),
// it is tried again on the newest version while its decision still has no
// explanation, and dropped once it has one (the replica before bound the
// pod, or explained it, with writes it had held that landed late).
func TestAnExplanationFromTheConditionIsWrittenOnThePodsVersion(t *testing.T) {
	for _, stillUnexplained := range []bool{true, false} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p", ResourceVersion: "7"}}
		p := &patches{failFirst: 1, fail: apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", nil)}
		w := writerUnderTest(t, pod, p)
		ctx, logger := t.Context(), klog.FromContext(t.Context())
		newer := pod.DeepCopy()
		newer.ResourceVersion = "9"
		rechecks := 0
		it := item{pod: pod, result: pendingResult("decided by the leader before"), summary: "pending", recheck: func() (*v1.Pod, bool) {
			rechecks++
			return newer, stillUnexplained
		}}
		if !w.enqueueItem(ctx, it) {
			t.Fatal("not queued")
		}
		w.writeNext(ctx, logger) // the conflict
		if rechecks != 1 {
			t.Fatalf("rechecks %d after a conflict, want 1", rechecks)
		}
		if !stillUnexplained {
			if n, r := w.queue.Len(), w.queue.NumRequeues("u-p"); n != 0 || r != 0 {
				t.Errorf("the pod has an explanation since: queue length %d, requeues %d; want 0, 0", n, r)
			}
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.writeNext(ctx, logger) // after the queue's backoff
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("not tried again within 10s")
		}
		if len(p.bodies) != 1 || !strings.Contains(p.bodies[0], `"resourceVersion":"9"`) {
			t.Errorf("patches %q: want one, on the pod's newest version (resourceVersion 9)", p.bodies)
		}
	}
}
