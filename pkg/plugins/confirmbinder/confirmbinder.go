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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	corev1nodeaffinity "k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/mutant"
	"github.com/berth-scheduler/berth/internal/perclient"
	"github.com/berth-scheduler/berth/internal/quantity"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "ConfirmBinder"

	reserveStateKey = "Reserve" + Name

	reasonNodeDeleted = "node-deleted"

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

	// nodes is shared by every profile of the process.
	nodes *nodeGate
	// fence: while it holds, every binding is confirmed.
	fence *leadership.Fence
}

// nodeGate serialises confirm-then-bind per node, so that parallel binding
// cycles for one node see each other, and holds this scheduler's pods
// reserved on a node and not yet bound. There is one per cluster client, that
// is one per scheduler process: profiles bind to the same nodes.
type nodeGate struct {
	locks sync.Map // node name -> chan struct{} of capacity 1
	// inFlight are this scheduler's pods reserved on a node and not yet bound.
	inFlightMu sync.Mutex
	inFlight   map[string]map[types.UID]*v1.Pod
}

// gates holds the node gate of each scheduler process.
var gates perclient.Registry[*nodeGate]

// gateFor returns the process's node gate for client, dropped when ctx (the
// scheduler's) ends.
func gateFor(ctx context.Context, client kubernetes.Interface) *nodeGate {
	g, _ := gates.Get(ctx, client, nil, func() (*nodeGate, error) {
		return &nodeGate{inFlight: map[string]map[types.UID]*v1.Pod{}}, nil
	})
	return g
}

// lock takes node's lock, giving up when ctx ends; the returned func releases it.
func (g *nodeGate) lock(ctx context.Context, node string) (func(), error) {
	v, ok := g.locks.Load(node)
	if !ok {
		v, _ = g.locks.LoadOrStore(node, make(chan struct{}, 1))
	}
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the node's confirmation lock: %w", context.Cause(ctx))
	}
}

func (g *nodeGate) add(node string, pod *v1.Pod) {
	g.inFlightMu.Lock()
	defer g.inFlightMu.Unlock()
	if g.inFlight[node] == nil {
		g.inFlight[node] = map[types.UID]*v1.Pod{}
	}
	g.inFlight[node][pod.UID] = pod
}

func (g *nodeGate) forget(node string, pod *v1.Pod) {
	g.inFlightMu.Lock()
	defer g.inFlightMu.Unlock()
	if m := g.inFlight[node]; m != nil {
		delete(m, pod.UID)
		if len(m) == 0 {
			delete(g.inFlight, node)
		}
	}
}

// othersInFlight appends the pods reserved on node, other than pod and those listed.
func (g *nodeGate) othersInFlight(node string, pod *v1.Pod, listed map[types.UID]bool, out []*v1.Pod) []*v1.Pod {
	g.inFlightMu.Lock()
	defer g.inFlightMu.Unlock()
	for uid, p := range g.inFlight[node] {
		if uid != pod.UID && !listed[uid] {
			out = append(out, p)
		}
	}
	return out
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
		nodes:               gateFor(ctx, h.ClientSet()),
		fence:               leadership.ProcessFence(ctx),
	}
	if f := h.SharedInformerFactory(); f != nil {
		// Forget the lock of a deleted node, so node churn does not grow the map.
		if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if n, _, err := schedutil.As[*v1.Node](obj, nil); err == nil {
					pl.nodes.locks.Delete(n.Name)
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
	// node and tried: the verdict of a Kubernetes PodGroup cycle's try of
	// node (Reserve with IsPodGroupSchedulingCycle), which the binding's
	// Reserve keeps (see Reserve).
	node  string
	tried bool
}

func (s *reserveState) Clone() fwk.StateData { return s }

// Reserve decides, from the scheduler's consistent snapshot, whether this
// binding needs a confirmation, and counts the pod as in flight on the node.
//
// A member of a Kubernetes PodGroup is reserved twice: by the PodGroup
// cycle's try, whose snapshot holds the members placed before it and the
// member itself on the node, and again for binding once the cycle has
// reverted them all, when the snapshot holds none of them. The try's
// verdict, taken without the member counted twice, stands: the binding
// confirms if either says so.
func (pl *ConfirmBinder) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	inGroupCycle := state.IsPodGroupSchedulingCycle()
	confirm := pl.always
	if !confirm {
		ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
		// A node missing from the snapshot is odd enough to confirm.
		confirm = err != nil || pl.isTight(ni, pod, inGroupCycle && holds(ni, pod))
	}
	if !inGroupCycle {
		if d, err := state.Read(reserveStateKey); err == nil {
			if tried, ok := d.(*reserveState); ok && tried.tried && tried.node == nodeName {
				confirm = confirm || tried.confirm
			}
		}
	}
	state.Write(reserveStateKey, &reserveState{confirm: confirm, node: nodeName, tried: inGroupCycle})
	if !inGroupCycle {
		// A try is not in flight: the cycle may revert it, and the
		// binding's Reserve counts it.
		pl.nodes.add(nodeName, pod)
	}
	return nil
}

// holds: the node's pods include pod (the PodGroup cycle adds each member
// it assumes to the snapshot).
func holds(ni fwk.NodeInfo, pod *v1.Pod) bool {
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == pod.UID {
			return true
		}
	}
	return false
}

// Unreserve forgets the pod (its binding failed or a later plugin rejected
// it). A PodGroup cycle's revert of a try has nothing to forget, and must
// not drop the entry of a binding Reserve that came first.
func (pl *ConfirmBinder) Unreserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if state.IsPodGroupSchedulingCycle() {
		return
	}
	pl.forget(pod, nodeName)
}

func (pl *ConfirmBinder) forget(pod *v1.Pod, nodeName string) {
	pl.nodes.forget(nodeName, pod)
}

// isTight reports whether, by the cache, some resource of the node would have
// less than the tight share of allocatable left after this pod; counted: the
// node's requests already include the pod's.
func (pl *ConfirmBinder) isTight(ni fwk.NodeInfo, pod *v1.Pod, counted bool) bool {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	podReq := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	pods := len(ni.GetPods()) + 1
	if counted {
		podReq, pods = v1.ResourceList{}, pods-1
	}
	tight := func(allocatable, used int64) bool {
		return allocatable > 0 && (allocatable-used)*100 < pl.tight*allocatable
	}
	if tight(alloc.GetMilliCPU(), req.GetMilliCPU()+podReq.Cpu().MilliValue()) ||
		tight(alloc.GetMemory(), req.GetMemory()+podReq.Memory().Value()) ||
		tight(alloc.GetEphemeralStorage(), req.GetEphemeralStorage()+podReq.StorageEphemeral().Value()) ||
		tight(int64(alloc.GetAllowedPodNumber()), int64(pods)) {
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
	// A process that stood still (paused past its lease, starved) decided
	// on a view that may be stale: confirm whatever Reserve said
	// (leadership.Fence), and use the confirmation only if the process did
	// not stand still again while it was taken.
	epoch, _ := pl.fence.Epoch()
	if !confirm {
		if fenced, why := pl.fence.Fenced(); fenced {
			pl.fence.Refused(Name)
			klog.FromContext(ctx).V(2).Info("ConfirmBinder: confirming a binding Reserve found roomy", "pod", klog.KObj(pod), "node", nodeName, "reason", why)
			confirm = true
		}
	}
	if !confirm || mutant.On(mutant.ConfirmBinderSkips) {
		confirmations.WithLabelValues(resultSkipped).Inc()
		return pl.binder.Bind(ctx, state, pod, nodeName)
	}

	logger := klog.FromContext(ctx)
	start := time.Now()
	// confirmTimeout bounds the whole confirmation, the wait for the node's
	// lock included: with a slow API server, waits would otherwise pile up.
	cctx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	var c *conflict
	unlock, err := pl.nodes.lock(cctx, nodeName)
	if err == nil {
		c, err = pl.confirm(cctx, pod, nodeName)
		if c != nil && c.reason == reasonNodeDeleted {
			defer pl.nodes.locks.Delete(nodeName) // a late cycle must not keep a deleted node's lock
		}
		defer unlock()
		// Deferred after unlock, so it runs before it: the next binding
		// cycle to confirm this node must not count a pod refused here as
		// still in flight, or it refuses a pod that fits (seen once as
		// TestParallelBindsSeeEachOther's 2 bound, 2 refused).
		defer pl.forget(pod, nodeName)
	}
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
	// A process that stood still during the confirmation (paused between
	// its reads and now) holds a confirmation as stale as its cache.
	if now, stale := pl.fence.Epoch(); stale || now != epoch {
		pl.fence.Refused(Name)
		return fwk.AsStatus(fmt.Errorf("ConfirmBinder: not binding on node %s: this scheduler stood still after confirming it; the pod is retried", nodeName))
	}
	return pl.binder.Bind(ctx, state, pod, nodeName)
}

// conflict is why the node cannot take the pod.
type conflict struct {
	reason  string // metric label
	message string
}

// confirm reads the node and the pods bound to it from the API server and
// checks that the pod still fits. It returns nil, nil when it does.
func (pl *ConfirmBinder) confirm(ctx context.Context, pod *v1.Pod, nodeName string) (*conflict, error) {
	client := pl.handle.ClientSet()
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &conflict{reason: reasonNodeDeleted, message: "the node was deleted"}, nil
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
	others = pl.nodes.othersInFlight(nodeName, pod, listed, others)
	return fits(pod, node, others), nil
}

// fits checks the pod against the node exactly as the kubelet's admission
// will: it drops the extended resources the node does not advertise and those
// a DRA claim backs, then runs the checks of the kubelet's admission and of
// the scheduler's 1.37 AdmissionCheck, first failure first (resources and pod
// count, required node affinity, node name, host ports), on a NodeInfo built
// from the node's live pods, which counts them as the scheduler and kubelet
// do (init and sidecar containers, overhead, and the status resources of pods
// resized in place). Each check is the scheduler plugin's exported one; they
// are composed here rather than through scheduler.AdmissionCheck, which
// Kubernetes 1.38 removes (docs/compatibility.md).
func fits(pod *v1.Pod, node *v1.Node, others []*v1.Pod) *conflict {
	ni := framework.NewNodeInfo(others...)
	ni.SetNode(node)
	pod = withoutUnadmittedExtendedResources(pod, ni)
	if insufficient := noderesources.Fits(pod, ni, nil, noderesources.ResourceRequestsOptions{
		EnablePodLevelResources:           utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources),
		EnableDRAExtendedResource:         utilfeature.DefaultFeatureGate.Enabled(features.DRAExtendedResource),
		EnableDRANodeAllocatableResources: utilfeature.DefaultFeatureGate.Enabled(features.DRANodeAllocatableResources),
	}); len(insufficient) > 0 {
		ir := insufficient[0]
		if ir.ResourceName == v1.ResourcePods {
			return &conflict{reason: "pods", message: fmt.Sprintf("pods: %d bound, allocatable %d", ir.Used, ir.Capacity)}
		}
		return &conflict{reason: "resource", message: fmt.Sprintf("insufficient %s: requested %s, used %s, allocatable %s",
			ir.ResourceName, quantity.FromScaled(ir.ResourceName, ir.Requested), quantity.FromScaled(ir.ResourceName, ir.Used), quantity.FromScaled(ir.ResourceName, ir.Capacity))}
	}
	if matches, _ := corev1nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !matches {
		return &conflict{reason: "node-affinity", message: "the node no longer matches the pod's required node affinity"}
	}
	if !nodename.Fits(pod, ni) {
		return &conflict{reason: "other", message: fmt.Sprintf("%s: %s", nodename.Name, nodename.ErrReason)}
	}
	if !nodeports.Fits(pod, ni) {
		return &conflict{reason: "host-port", message: hostPortMessage(pod, ni)}
	}
	return nil
}

// withoutUnadmittedExtendedResources mirrors the kubelet's
// removeMissingExtendedResources (pkg/kubelet/lifecycle/predicate.go,
// unexported): the kubelet admits a pod without checking extended resources
// its node does not advertise (cluster-level resources, which the scheduler's
// Fit may be told to ignore) and those backed by a DRA claim (DRAExtendedResource).
func withoutUnadmittedExtendedResources(pod *v1.Pod, ni *framework.NodeInfo) *v1.Pod {
	draBacked := func(name v1.ResourceName, container string) bool {
		if !utilfeature.DefaultFeatureGate.Enabled(features.DRAExtendedResource) || pod.Status.ExtendedResourceClaimStatus == nil {
			return false
		}
		for _, m := range pod.Status.ExtendedResourceClaimStatus.RequestMappings {
			if v1.ResourceName(m.ResourceName) == name && m.ContainerName == container {
				return true
			}
		}
		return false
	}
	filter := func(containers []v1.Container) {
		for i, c := range containers {
			kept := make(v1.ResourceList, len(c.Resources.Requests))
			for name, q := range c.Resources.Requests {
				if schedutil.IsDRAExtendedResourceName(name) && draBacked(name, c.Name) {
					continue
				}
				if v1helper.IsExtendedResourceName(name) {
					if _, ok := ni.Allocatable.ScalarResources[name]; !ok {
						continue
					}
				}
				kept[name] = q
			}
			containers[i].Resources.Requests = kept
		}
	}
	out := pod.DeepCopy()
	filter(out.Spec.Containers)
	filter(out.Spec.InitContainers)
	return out
}

// hostPortMessage names the first of the pod's host ports already in use.
func hostPortMessage(pod *v1.Pod, ni *framework.NodeInfo) string {
	for _, cp := range schedutil.GetHostPorts(pod) {
		if ni.UsedPorts.CheckConflict(cp.HostIP, string(cp.Protocol), cp.HostPort) {
			proto := cp.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			return fmt.Sprintf("host port %s/%d is in use", proto, cp.HostPort)
		}
	}
	return "a host port of the pod is in use"
}
