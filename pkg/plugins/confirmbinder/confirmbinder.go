// Package confirmbinder implements ConfirmBinder: right before the Binding is
// written, it checks the chosen node against the API server's live state
// (not the scheduler's cache) and sends the pod back to the queue if the node
// can no longer take it.
package confirmbinder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "ConfirmBinder"

	reserveStateKey = "Reserve" + Name

	// EventReasonBindConflict is the reason of the event on a pod whose
	// binding was refused because the node no longer fits it.
	EventReasonBindConflict = "BindConflict"
)

// ConfirmBinder confirms the node against live API state, then binds exactly
// as DefaultBinder does (it delegates to it).
type ConfirmBinder struct {
	handle    fwk.Handle
	binder    fwk.BindPlugin
	always    bool
	tight     int64
	timeout   time.Duration
	bindOnErr bool
	// comparisonOperators follows the TaintTolerationComparisonOperators gate, as TaintToleration does.
	comparisonOperators bool

	// nodeLocks serialise confirm-then-bind per node, so parallel binding
	// cycles for one node see each other.
	nodeLocks sync.Map // node name -> *sync.Mutex
	// inFlight are this scheduler's pods reserved on a node and not yet bound.
	inFlightMu sync.Mutex
	inFlight   map[string]map[types.UID]*v1.Pod
}

var (
	_ fwk.BindPlugin    = &ConfirmBinder{}
	_ fwk.ReservePlugin = &ConfirmBinder{}
)

// Name returns the plugin's name.
func (pl *ConfirmBinder) Name() string { return Name }

// New builds ConfirmBinder.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.ConfirmBinderArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type ConfirmBinderArgs, got %T", obj)
	}
	if err := validation.ValidateConfirmBinderArgs(nil, args); err != nil {
		return nil, err
	}
	if h == nil || h.ClientSet() == nil {
		return nil, errors.New("ConfirmBinder needs the scheduler's client")
	}
	db, err := defaultbinder.New(ctx, nil, h)
	if err != nil {
		return nil, fmt.Errorf("building the default binder: %w", err)
	}
	registerMetrics()
	pl := &ConfirmBinder{
		handle:              h,
		binder:              db.(fwk.BindPlugin),
		always:              args.Confirm == config.ConfirmAlways,
		tight:               int64(args.TightHeadroomPercent),
		timeout:             args.ConfirmTimeout.Duration,
		bindOnErr:           args.OnConfirmError == config.ConfirmErrorBind,
		comparisonOperators: utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators),
		inFlight:            map[string]map[types.UID]*v1.Pod{},
	}
	if f := h.SharedInformerFactory(); f != nil {
		// Forget the lock of a deleted node, so node churn does not grow the map.
		if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if n, _, err := schedutil.As[*v1.Node](obj, nil); err == nil {
					pl.nodeLocks.Delete(n.Name)
				}
			},
		}); err != nil {
			return nil, fmt.Errorf("watching node deletions: %w", err)
		}
	}
	return pl, nil
}

// reserveState carries Reserve's verdict to Bind.
type reserveState struct {
	confirm bool
}

func (s *reserveState) Clone() fwk.StateData { return s }

// Reserve decides, from the scheduler's consistent snapshot, whether this
// binding needs a confirmation, and counts the pod as in flight on the node.
func (pl *ConfirmBinder) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	confirm := pl.always
	if !confirm {
		ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
		// A node missing from the snapshot is odd enough to confirm.
		confirm = err != nil || pl.isTight(ni, pod)
	}
	state.Write(reserveStateKey, &reserveState{confirm: confirm})
	pl.inFlightMu.Lock()
	if pl.inFlight[nodeName] == nil {
		pl.inFlight[nodeName] = map[types.UID]*v1.Pod{}
	}
	pl.inFlight[nodeName][pod.UID] = pod
	pl.inFlightMu.Unlock()
	return nil
}

// Unreserve forgets the pod (its binding failed or a later plugin rejected it).
func (pl *ConfirmBinder) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.forget(pod, nodeName)
}

func (pl *ConfirmBinder) forget(pod *v1.Pod, nodeName string) {
	pl.inFlightMu.Lock()
	if m := pl.inFlight[nodeName]; m != nil {
		delete(m, pod.UID)
		if len(m) == 0 {
			delete(pl.inFlight, nodeName)
		}
	}
	pl.inFlightMu.Unlock()
}

// isTight reports whether, by the cache, some resource of the node would have
// less than the tight share of allocatable left after this pod.
func (pl *ConfirmBinder) isTight(ni fwk.NodeInfo, pod *v1.Pod) bool {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	podReq := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	tight := func(allocatable, used int64) bool {
		return allocatable > 0 && (allocatable-used)*100 < pl.tight*allocatable
	}
	if tight(alloc.GetMilliCPU(), req.GetMilliCPU()+podReq.Cpu().MilliValue()) ||
		tight(alloc.GetMemory(), req.GetMemory()+podReq.Memory().Value()) ||
		tight(alloc.GetEphemeralStorage(), req.GetEphemeralStorage()+podReq.StorageEphemeral().Value()) ||
		tight(int64(alloc.GetAllowedPodNumber()), int64(len(ni.GetPods())+1)) {
		return true
	}
	reqScalar := req.GetScalarResources()
	for name, a := range alloc.GetScalarResources() {
		q := podReq[name]
		if tight(a, reqScalar[name]+q.Value()) {
			return true
		}
	}
	return false
}

// Bind confirms the node when Reserve asked for it, then binds through
// DefaultBinder. Confirm-then-bind holds the node's lock.
func (pl *ConfirmBinder) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	defer pl.forget(pod, nodeName)
	confirm := true
	if c, err := state.Read(reserveStateKey); err == nil {
		if s, ok := c.(*reserveState); ok {
			confirm = s.confirm
		}
	}
	if !confirm {
		confirmations.WithLabelValues(resultSkipped).Inc()
		return pl.binder.Bind(ctx, state, pod, nodeName)
	}

	logger := klog.FromContext(ctx)
	start := time.Now()
	mu := pl.nodeLock(nodeName)
	mu.Lock()
	defer mu.Unlock()
	c, err := pl.confirm(ctx, pod, nodeName)
	confirmDuration.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		confirmations.WithLabelValues(resultError).Inc()
		if !pl.bindOnErr {
			return fwk.AsStatus(fmt.Errorf("confirming node %s for the binding: %w", nodeName, err))
		}
		logger.Error(err, "Confirming the node failed; binding without confirmation (onConfirmError: Bind)", "pod", klog.KObj(pod), "node", nodeName)
	case c != nil:
		confirmations.WithLabelValues(resultConflict).Inc()
		conflicts.WithLabelValues(c.reason).Inc()
		msg := fmt.Sprintf("node %s no longer fits the pod: %s", nodeName, c.message)
		logger.V(2).Info("Binding refused: the node changed since the scheduling decision", "pod", klog.KObj(pod), "node", nodeName, "reason", c.reason, "detail", c.message)
		pl.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeWarning, EventReasonBindConflict, "Binding", msg)
		// An error (not a rejection) sends the pod to the backoff queue: it is
		// retried within seconds, when the cache already holds the pod that
		// took its place, instead of waiting for a cluster event.
		return fwk.AsStatus(errors.New(msg))
	default:
		confirmations.WithLabelValues(resultFit).Inc()
	}
	return pl.binder.Bind(ctx, state, pod, nodeName)
}

func (pl *ConfirmBinder) nodeLock(node string) *sync.Mutex {
	if mu, ok := pl.nodeLocks.Load(node); ok {
		return mu.(*sync.Mutex)
	}
	mu, _ := pl.nodeLocks.LoadOrStore(node, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// conflict is why the node cannot take the pod.
type conflict struct {
	reason  string // metric label
	message string
}

// confirm reads the node and the pods bound to it from the API server and
// checks that the pod still fits. It returns nil, nil when it does.
func (pl *ConfirmBinder) confirm(ctx context.Context, pod *v1.Pod, nodeName string) (*conflict, error) {
	ctx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	client := pl.handle.ClientSet()
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &conflict{reason: "node-deleted", message: "the node was deleted"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting node: %w", err)
	}
	if node.Spec.Unschedulable {
		return &conflict{reason: "node-cordoned", message: "the node was cordoned"}, nil
	}
	logger := klog.FromContext(ctx)
	if taint, found := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, pl.comparisonOperators); found {
		return &conflict{reason: "taint", message: fmt.Sprintf("the node has taint %s that the pod does not tolerate", taint.ToString())}, nil
	}

	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the node's pods: %w", err)
	}
	others := make([]*v1.Pod, 0, len(pods.Items))
	listed := make(map[types.UID]bool, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != nodeName { // the field selector did this; stay safe if it did not
			continue
		}
		listed[p.UID] = true
		if p.UID != pod.UID && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			others = append(others, p)
		}
	}
	// This scheduler's pods reserved on the node but not bound yet count too.
	pl.inFlightMu.Lock()
	for uid, p := range pl.inFlight[nodeName] {
		if uid != pod.UID && !listed[uid] {
			others = append(others, p)
		}
	}
	pl.inFlightMu.Unlock()
	return fits(pod, node, others), nil
}

// fits checks the pod against the node's allocatable, its pod count and host
// ports, with the kubelet's request math (init and sidecar containers, overhead).
func fits(pod *v1.Pod, node *v1.Node, others []*v1.Pod) *conflict {
	used := v1.ResourceList{}
	ports := fwk.HostPortInfo{}
	for _, p := range others {
		addTo(used, resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
		for _, cp := range schedutil.GetHostPorts(p) {
			ports.Add(cp.HostIP, string(cp.Protocol), cp.HostPort)
		}
	}
	if maxPods, ok := node.Status.Allocatable[v1.ResourcePods]; ok && int64(len(others)+1) > maxPods.Value() {
		return &conflict{reason: "pods", message: fmt.Sprintf("pods: %d bound, allocatable %d", len(others), maxPods.Value())}
	}
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range want {
		if q.IsZero() || name == v1.ResourcePods {
			continue
		}
		alloc, ok := node.Status.Allocatable[name]
		u := used[name]
		total := u.DeepCopy()
		total.Add(q)
		if !ok || total.Cmp(alloc) > 0 {
			return &conflict{reason: "resource", message: fmt.Sprintf("insufficient %s: requested %s, used %s, allocatable %s", name, q.String(), u.String(), alloc.String())}
		}
	}
	for _, cp := range schedutil.GetHostPorts(pod) {
		if ports.CheckConflict(cp.HostIP, string(cp.Protocol), cp.HostPort) {
			proto := cp.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			return &conflict{reason: "host-port", message: fmt.Sprintf("host port %s/%d is in use", proto, cp.HostPort)}
		}
	}
	return nil
}

func addTo(total, add v1.ResourceList) {
	for name, q := range add {
		t := total[name]
		t.Add(q)
		total[name] = t
	}
}
