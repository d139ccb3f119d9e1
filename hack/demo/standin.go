package main

// The demo's stand-ins for a kubelet that refuses pods and for the ReplicaSet
// controller: make demo runs no kube-controller-manager and no KWOK (they
// would add two builds to its cold start). The tests run the real ones
// (internal/sandbox: KWOK's refusal Stage, kube-controller-manager's
// ReplicaSet controller).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// Kubelet admission refusal written by RefusingKubelet: a device plugin whose
// devices went unhealthy, in the kubelet's words ("Pod was rejected: " and
// the device manager's error).
const (
	RefusalReason  = "UnexpectedAdmissionError"
	RefusalMessage = "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/gpu, which is unexpected"
)

// RefusingKubelet stands in for the kubelet of one node whose admission
// refuses every pod bound to it, as the kubelet does: the pod ends Failed
// with a reason and message, and startTime set to the refusal.
type RefusingKubelet struct {
	refusing atomic.Bool
	mu       sync.Mutex
	refused  []string
}

// StartRefusingKubelet refuses pods bound to node until ctx ends or
// SetRefusing(false).
func StartRefusingKubelet(ctx context.Context, c kubernetes.Interface, node string) (*RefusingKubelet, error) {
	k := &RefusingKubelet{}
	k.refusing.Store(true)
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	refuse := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || !k.refusing.Load() || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
			return
		}
		p = p.DeepCopy()
		now := metav1.Now()
		p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: RefusalReason, Message: RefusalMessage, StartTime: &now}
		if _, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
			k.mu.Lock()
			k.refused = append(k.refused, p.Namespace+"/"+p.Name)
			k.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: refuse, UpdateFunc: func(_, o any) { refuse(o) }}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the refusing kubelet of %s did not sync", node)
	}
	return k, nil
}

// Refused is how many pods it refused.
func (k *RefusingKubelet) Refused() int { return len(k.RefusedPods()) }

// RefusedPods are the pods it refused (namespace/name), in order.
func (k *RefusingKubelet) RefusedPods() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.refused...)
}

// SetRefusing turns the refusals on or off (the device plugin recovered).
func (k *RefusingKubelet) SetRefusing(on bool) { k.refusing.Store(on) }

// Replacer stands in for a ReplicaSet controller (none runs on envtest): for
// each of its pods that ends Failed it creates a replacement, owned by the
// same ReplicaSet.
type Replacer struct {
	c       kubernetes.Interface
	cancel  context.CancelFunc
	rs      *appsv1.ReplicaSet
	pod     sandbox.PodSpec
	mu      sync.Mutex
	created []string
	seen    map[types.UID]bool
	n       atomic.Int64
}

// StartReplacer creates a ReplicaSet object named spec.Name (as the pods'
// owner), then replicas pods of spec owned by it, and replaces every one that
// fails until Close.
func StartReplacer(ctx context.Context, c kubernetes.Interface, spec sandbox.PodSpec, replicas int) (*Replacer, error) {
	labels := map[string]string{"app": spec.Name}
	rs, err := c.AppsV1().ReplicaSets(spec.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: sandbox.MakePod(spec).Spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ReplicaSet %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Replacer{c: c, cancel: cancel, rs: rs, pod: spec, seen: map[types.UID]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(spec.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + spec.Name }))
	inf := f.Core().V1().Pods().Informer()
	replace := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Status.Phase != v1.PodFailed {
			return
		}
		r.mu.Lock()
		done := r.seen[p.UID]
		r.seen[p.UID] = true
		r.mu.Unlock()
		if !done {
			_ = r.create(ctx)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: replace, UpdateFunc: func(_, o any) { replace(o) }}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the stand-in ReplicaSet controller of %s did not sync", spec.Name)
	}
	for range replicas {
		if err := r.create(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// create creates one more pod of the ReplicaSet (a replacement).
func (r *Replacer) create(ctx context.Context) error {
	s := r.pod
	s.Name = fmt.Sprintf("%s-%d", r.pod.Name, r.n.Add(1))
	p := sandbox.MakePod(s)
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(r.rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	if _, err := r.c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s: %w", s.Name, err)
	}
	r.mu.Lock()
	r.created = append(r.created, s.Name)
	r.mu.Unlock()
	return nil
}

// Pods are the names of the pods it created, in order.
func (r *Replacer) Pods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.created...)
}

// Latest is the pod it created last.
func (r *Replacer) Latest() string {
	p := r.Pods()
	return p[len(p)-1]
}

// Stop stops replacing (its watch ends); the pods stay.
func (r *Replacer) Stop() { r.cancel() }

// Close stops replacing, then deletes the ReplicaSet and every pod it created.
func (r *Replacer) Close(ctx context.Context) error {
	r.cancel()
	for _, name := range r.Pods() {
		_ = r.c.CoreV1().Pods(r.rs.Namespace).Delete(ctx, name, *metav1.NewDeleteOptions(0))
	}
	return r.c.AppsV1().ReplicaSets(r.rs.Namespace).Delete(ctx, r.rs.Name, metav1.DeleteOptions{})
}

// RefusalCluster is three nodes for one test, tainted for its pods alone and
// reached through a node selector: BlackHole, the roomiest (LeastAllocated
// prefers it), whose stand-in kubelet refuses every pod, and two smaller
// nodes that admit.
type RefusalCluster struct {
	BlackHole string
	Others    []string
	Selector  map[string]string
	Kubelet   *RefusingKubelet
	taint     v1.Taint

	c      kubernetes.Interface
	cancel context.CancelFunc
}

// StartRefusalCluster creates the nodes black-hole-<id>, admits-<id>-a and
// admits-<id>-b and starts the black hole's refusing kubelet.
func StartRefusalCluster(ctx context.Context, c kubernetes.Interface, id string) (*RefusalCluster, error) {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rc := &RefusalCluster{BlackHole: "black-hole-" + id, Others: []string{"admits-" + id + "-a", "admits-" + id + "-b"},
		Selector: map[string]string{"berth.dev/refusal-cluster": id}, c: c, cancel: cancel,
		taint: v1.Taint{Key: "berth.dev/refusal-cluster", Value: id, Effect: v1.TaintEffectNoSchedule}}
	for i, name := range append([]string{rc.BlackHole}, rc.Others...) {
		cpu, mem := "4", "8Gi"
		if i == 0 {
			cpu, mem = "16", "64Gi"
		}
		if _, err := sandbox.CreateNode(ctx, c, sandbox.NodeSpec{Name: name, CPU: cpu, Memory: mem, Labels: rc.Selector, Taints: []v1.Taint{rc.taint}}); err != nil {
			_ = rc.Close(ctx)
			return nil, err
		}
	}
	var err error
	if rc.Kubelet, err = StartRefusingKubelet(kctx, c, rc.BlackHole); err != nil {
		_ = rc.Close(ctx)
		return nil, err
	}
	return rc, nil
}

// PodSpec is a pod of 1 CPU and 1Gi for profile, kept on the cluster's nodes.
func (rc *RefusalCluster) PodSpec(namespace, name, profile string) sandbox.PodSpec {
	return sandbox.PodSpec{Namespace: namespace, Name: name, SchedulerName: profile, CPU: "1", Memory: "1Gi", NodeSelector: rc.Selector,
		Tolerations: []v1.Toleration{{Key: rc.taint.Key, Operator: v1.TolerationOpEqual, Value: rc.taint.Value, Effect: rc.taint.Effect}}}
}

// Stop stops the refusing kubelet (its watch ends); the nodes stay.
func (rc *RefusalCluster) Stop() { rc.cancel() }

// Close stops the refusing kubelet and deletes the nodes.
func (rc *RefusalCluster) Close(ctx context.Context) error {
	rc.cancel()
	var errs []error
	for _, name := range append([]string{rc.BlackHole}, rc.Others...) {
		if err := rc.c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
