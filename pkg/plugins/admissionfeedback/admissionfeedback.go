// Package admissionfeedback implements AdmissionFeedback: when a kubelet's
// admission refuses a pod (OutOfcpu, UnexpectedAdmissionError,
// TopologyAffinityError, ...), the node is avoided for the replacements the
// pod's controller creates, instead of receiving them again because it now
// looks emptier; a node that refuses pods of many controllers scores lowest.
package admissionfeedback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/cyclestate"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/perclient"
	"github.com/berth-scheduler/berth/internal/pluginclock"
	"github.com/berth-scheduler/berth/internal/podorigin"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "AdmissionFeedback"

	preFilterStateKey = "PreFilter" + Name
	preScoreStateKey  = "PreScore" + Name

	// ReasonNodeRefusedSibling is the event on a pod for which a node was
	// skipped because it refused a pod of the same controller.
	ReasonNodeRefusedSibling = "NodeRefusedSibling"
	// ReasonNodeRefusingPods is the event on a node that refused pods of
	// blackHoleThreshold controllers within blackHoleWindow.
	ReasonNodeRefusingPods = "NodeRefusingPods"

	signFragmentKey = Name + ".controller"

	// syncTimeout bounds the wait for the Failed-pod informer at start-up.
	syncTimeout = time.Minute
	// sweepInterval: how often ended avoidances re-activate their pods.
	sweepInterval = time.Second
	// maxMessage bounds the kubelet's message quoted in reasons and events.
	maxMessage = 200
)

// AdmissionFeedback keeps a controller's pods off the nodes whose kubelet
// refused one of them, for a while.
type AdmissionFeedback struct {
	fh     fwk.Handle
	shared *shared
	// preFilter, preScore: the states last written, read by Filter and
	// Score without the CycleState's map (cyclestate).
	preFilter cyclestate.Last[*preFilterState]
	preScore  cyclestate.Last[*preScoreState]
}

var (
	_ fwk.PreFilterPlugin   = &AdmissionFeedback{}
	_ fwk.FilterPlugin      = &AdmissionFeedback{}
	_ fwk.PreScorePlugin    = &AdmissionFeedback{}
	_ fwk.ScorePlugin       = &AdmissionFeedback{}
	_ fwk.EnqueueExtensions = &AdmissionFeedback{}
	_ fwk.SignPlugin        = &AdmissionFeedback{}
)

// shared is the state all profiles of a scheduler share: one Failed-pod
// informer, one store.
type shared struct {
	args    config.AdmissionFeedbackArgs
	store   *store
	reasons reasonMatcher
	now     func() time.Time
	fh      fwk.Handle
	writer  *leadership.Writer
	events  *eventLimiter

	// activate moves pods back to the active queue (the handle's, or a
	// test's).
	activate func(klog.Logger, map[string]*v1.Pod)

	// pinned records the pods the scheduler's pod informer first saw with
	// spec.nodeName already set, after its initial list: placed by their
	// author, not bound by a scheduler (see placedByAuthor). UID → when the
	// informer saw it go (zero while it lives); forgotten pinnedGrace
	// later, once the Failed-pod informer has had it.
	pinnedMu sync.Mutex
	pinned   map[types.UID]time.Time
}

// pinnedGrace: how long a pinned pod is remembered after the scheduler's
// informer saw it go (a pod turning Failed reaches that informer as a
// deletion, maybe before the Failed-pod informer sees it).
const pinnedGrace = 10 * time.Minute

// pin records a pod created with spec.nodeName (seen live, not listed).
func (sh *shared) pin(pod *v1.Pod) {
	sh.pinnedMu.Lock()
	defer sh.pinnedMu.Unlock()
	sh.pinned[pod.UID] = time.Time{}
}

// unpin marks a pinned pod gone; sweepPinned forgets it pinnedGrace later.
func (sh *shared) unpin(uid types.UID, now time.Time) {
	sh.pinnedMu.Lock()
	defer sh.pinnedMu.Unlock()
	if _, ok := sh.pinned[uid]; ok {
		sh.pinned[uid] = now
	}
}

func (sh *shared) isPinned(uid types.UID) bool {
	sh.pinnedMu.Lock()
	defer sh.pinnedMu.Unlock()
	_, ok := sh.pinned[uid]
	return ok
}

func (sh *shared) sweepPinned(now time.Time) {
	sh.pinnedMu.Lock()
	defer sh.pinnedMu.Unlock()
	for uid, gone := range sh.pinned {
		if !gone.IsZero() && now.Sub(gone) > pinnedGrace {
			delete(sh.pinned, uid)
		}
	}
}

var states perclient.Registry[*shared]

// timeNow is the clock (a variable for tests).
var timeNow = time.Now

// Name returns the plugin's name.
func (pl *AdmissionFeedback) Name() string { return Name }

// New builds AdmissionFeedback: it starts the informer of Failed pods and
// waits until it listed them, so a restarted scheduler avoids what it
// avoided before.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.AdmissionFeedbackArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type AdmissionFeedbackArgs, got %T", obj)
	}
	if err := validation.ValidateAdmissionFeedbackArgs(nil, args); err != nil {
		return nil, err
	}
	if h == nil || h.ClientSet() == nil || h.SharedInformerFactory() == nil {
		return nil, errors.New("AdmissionFeedback needs the scheduler's client and informers")
	}
	registerMetrics()
	sh, err := states.Get(ctx, h.ClientSet(), func(sh *shared) error {
		if !apiequality.Semantic.DeepEqual(sh.args, *args) {
			return fmt.Errorf("AdmissionFeedback args differ between profiles (%+v and %+v): all profiles share one memory of refusals and must configure it alike", sh.args, *args)
		}
		return nil
	}, func() (*shared, error) { return newShared(ctx, h, args) })
	if err != nil {
		return nil, err
	}
	return &AdmissionFeedback{fh: h, shared: sh}, nil
}

func newSharedState(h fwk.Handle, args *config.AdmissionFeedbackArgs) *shared {
	sh := &shared{
		args:    *args,
		store:   newStore(args.RefusalTTL.Duration, args.MaxRefusalTTL.Duration, args.BlackHoleWindow.Duration, int(args.BlackHoleThreshold)),
		reasons: newReasonMatcher(args.Reasons),
		now:     timeNow,
		fh:      h,
		pinned:  map[types.UID]time.Time{},
	}
	sh.store.evicted = refusalsEvicted.Inc
	sh.activate = func(logger klog.Logger, pods map[string]*v1.Pod) { h.Activate(logger, pods) }
	sh.events = newEventLimiter(h, func() bool { return sh.writer == nil || sh.writer.Allowed() })
	return sh
}

// newShared builds the state, starts the Failed-pod informer and the sweep
// loop, all tied to ctx, and replays the Failed pods that exist.
func newShared(ctx context.Context, h fwk.Handle, args *config.AdmissionFeedbackArgs) (*shared, error) {
	logger := klog.FromContext(ctx)
	sh := newSharedState(h, args)
	sh.now = pluginclock.From(ctx, timeNow)
	sh.writer = leadership.NewWriter(ctx, h.SharedInformerFactory().Core().V1().Pods().Informer().HasSynced)

	// The scheduler's own pod informer leaves out Failed pods (a pod that
	// turns Failed reaches it as a deletion of its previous state): this
	// one lists and watches only them.
	factory := informers.NewSharedInformerFactoryWithOptions(h.ClientSet(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("status.phase", string(v1.PodFailed)).String()
		}))
	failed := factory.Core().V1().Pods().Informer()
	// Failed pods stay until pod GC (12,500 by default): keep only what a
	// refusal needs of each.
	if err := failed.SetTransform(slimFailedPod); err != nil {
		return nil, fmt.Errorf("watching Failed pods: %w", err)
	}
	replay := newReplay(sh)
	reg, err := failed.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { replay.add(logger, obj) },
		// A Failed pod stays Failed; an update (labels, finalizers, a
		// relist) is not a new refusal. A pod whose reason changed to an
		// admission reason is.
		UpdateFunc: func(oldObj, newObj any) {
			if o, ok := oldObj.(*v1.Pod); ok && !sh.isRefusal(o) {
				replay.add(logger, newObj)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching Failed pods: %w", err)
	}
	// Pods registered to be activated when an avoidance ends are forgotten
	// once bound or deleted (the scheduler's own pod informer: pending and
	// bound pods).
	// The same informer tells which pods were placed by their author: a pod
	// it first sees live with spec.nodeName set was never pending, so no
	// scheduler bound it (what a tenant cannot fake, unlike its managed
	// fields; those still decide for the pods of the initial list).
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if p, ok := obj.(*v1.Pod); ok && !isInInitialList && p.Spec.NodeName != "" {
				sh.pin(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if o, ok := oldObj.(*v1.Pod); ok && o.Spec.NodeName == "" {
				if n, ok := newObj.(*v1.Pod); ok && n.Spec.NodeName != "" {
					sh.store.forgetWaiting(n)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if p, _, err := schedutil.As[*v1.Pod](obj, nil); err == nil && p != nil {
				sh.store.forgetWaiting(p)
				sh.unpin(p.UID, sh.now())
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) { sh.nodeUpdated(logger, oldObj, newObj) },
		DeleteFunc: func(obj any) { sh.nodeDeleted(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		return nil, fmt.Errorf("AdmissionFeedback: the informer of Failed pods did not sync within %s (can the scheduler list and watch pods?)", syncTimeout)
	}
	n := replay.finish(logger)
	logger.V(2).Info("AdmissionFeedback: rebuilt refusals from Failed pods", "refusals", n, "remembered", sh.store.size())
	go wait.UntilWithContext(ctx, sh.sweep, sweepInterval)
	return sh, nil
}

// replay buffers the refusals of the informer's initial list, which arrive
// in no particular order, and applies them sorted by time; later ones are
// applied as they come.
type replay struct {
	sh      *shared
	mu      sync.Mutex
	pending []observed
	done    bool
}

func newReplay(sh *shared) *replay { return &replay{sh: sh} }

func (r *replay) add(logger klog.Logger, obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	if !r.done {
		if o, ok := r.sh.refusalOf(pod, false); ok {
			r.pending = append(r.pending, o)
		}
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if o, ok := r.sh.refusalOf(pod, true); ok {
		r.sh.record(logger, o, true)
	} else if r.sh.isRefusal(pod) && (r.sh.isPinned(pod.UID) || placedByAuthor(pod)) {
		refusalsNotScheduled.Inc()
		logger.V(4).Info("AdmissionFeedback: not counting the refusal of a pod no scheduler bound", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "reason", pod.Status.Reason)
	}
}

func (r *replay) finish(logger klog.Logger) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	sortObserved(r.pending)
	for _, o := range r.pending {
		r.sh.record(logger, o, false)
	}
	n := len(r.pending)
	r.pending, r.done = nil, true
	return n
}

// slimFailedPod keeps of a Failed pod what refusalOf reads.
func slimFailedPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	// Of the managed fields, whether the pod's author set spec.nodeName and
	// when the kubelet last wrote its status (placedByAuthor, kubeletWrite).
	var managed []metav1.ManagedFieldsEntry
	if placedByAuthor(pod) {
		managed = append(managed, metav1.ManagedFieldsEntry{Manager: "author", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(podorigin.NodeNameFields)})
	}
	if t := kubeletWrite(pod); !t.IsZero() {
		managed = append(managed, metav1.ManagedFieldsEntry{Manager: "kubelet", Subresource: "status", Time: &metav1.Time{Time: t}})
	}
	slim := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, OwnerReferences: pod.OwnerReferences, ManagedFields: managed},
		Spec: v1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: v1.PodStatus{Phase: pod.Status.Phase, Reason: pod.Status.Reason,
			Message: truncate(pod.Status.Message, maxMessage), StartTime: pod.Status.StartTime},
	}
	// Of the conditions, only the latest transition time is read
	// (statusTime): one condition carries it.
	if t := latestTransition(pod); !t.IsZero() {
		slim.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, LastTransitionTime: metav1.NewTime(t)}}
	}
	return slim, nil
}

// latestTransition is the latest lastTransitionTime of the pod's conditions.
func latestTransition(pod *v1.Pod) time.Time {
	var t time.Time
	for _, c := range pod.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return t
}

// placedByAuthor: whoever created or updated the pod set spec.nodeName (an
// entry of its managedFields, not of a subresource, owns it). A pod placed
// by its author says nothing of how the node admits what schedulers place
// there, and counting its refusal would let any namespace make a node a
// black hole for all.
func placedByAuthor(pod *v1.Pod) bool {
	return slices.ContainsFunc(pod.ManagedFields, podorigin.OwnsNodeName)
}

// kubeletWrite is when the kubelet last wrote the pod's status, as its
// managedFields record it (zero when they do not).
func kubeletWrite(pod *v1.Pod) time.Time {
	var t time.Time
	for _, e := range pod.ManagedFields {
		if podorigin.KubeletStatusWrite(e) && e.Time != nil && e.Time.After(t) {
			t = e.Time.Time
		}
	}
	return t
}

// statusTime is when a Failed pod of the informer's initial list failed, as
// near as the pod says: the kubelet's last status write (the refusal: a
// Failed pod's status is not written again); without one, the latest
// condition transition (a kubelet that re-admits a pod after a restart turns
// Ready False; 1.37's rejectPod writes no condition and keeps the old
// startTime, days ago maybe); without conditions, the startTime the kubelet
// sets when it refuses a pod that never ran.
func statusTime(pod *v1.Pod) time.Time {
	if t := kubeletWrite(pod); !t.IsZero() {
		return t
	}
	if t := latestTransition(pod); !t.IsZero() {
		return t
	}
	if st := pod.Status.StartTime; st != nil {
		return st.Time
	}
	return time.Time{}
}

// refusalOf reads a refused pod: Failed with an admission reason, on a
// node a scheduler bound it to (not pinned, nor placedByAuthor), of a
// controller that is not a DaemonSet. live: the informer sees the
// pod turn Failed now (after its initial list), and the refusal is timed
// now; a pod of the initial list (this scheduler just started) is timed by
// its status (statusTime), never later than now.
func (sh *shared) refusalOf(pod *v1.Pod, live bool) (observed, bool) {
	if !sh.isRefusal(pod) || sh.isPinned(pod.UID) || placedByAuthor(pod) {
		return observed{}, false
	}
	ctrl, ok := controllerOf(pod)
	if !ok {
		return observed{}, false
	}
	at := sh.now()
	if t := statusTime(pod); !live && !t.IsZero() && t.Before(at) {
		at = t
	}
	return observed{
		ctrl: ctrl, node: pod.Spec.NodeName, reason: pod.Status.Reason,
		message: truncate(pod.Status.Message, maxMessage),
		pod:     pod.Namespace + "/" + pod.Name, podUID: pod.UID, at: at,
	}, true
}

func (sh *shared) isRefusal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed && pod.Spec.NodeName != "" && sh.reasons.matches(pod.Status.Reason)
}

// record stores a refusal, counts it and, when the node became a black
// hole, says so on the node.
func (sh *shared) record(logger klog.Logger, o observed, live bool) {
	r, becameBlackHole := sh.store.observe(o)
	if r == nil {
		return
	}
	if live {
		refusalsTotal.WithLabelValues(reasonLabel(o.reason)).Inc()
	}
	rememberedRefusals.Set(float64(sh.store.size()))
	logger.V(2).Info("AdmissionFeedback: node refused a pod; avoiding it for the controller's pods",
		"node", o.node, "pod", o.pod, "controller", o.ctrl.String(), "reason", o.reason,
		"refusals", r.count, "avoidFor", r.until.Sub(o.at).String())
	if becameBlackHole {
		blackHoleNodes.Set(float64(sh.blackHoles().Len()))
		if live {
			sh.events.node(o.node, fmt.Sprintf("refused pods of %d controllers within %s (the latest %s of %s: %s): it scores lowest for every pod",
				sh.args.BlackHoleThreshold, sh.args.BlackHoleWindow.Duration, o.pod, o.ctrl, o.reason))
		}
	}
}

// blackHoles returns the current black-hole nodes (not to be changed).
func (sh *shared) blackHoles() sets.Set[string] { return *sh.store.blackHoles.Load() }

// sweep ends the avoidances that are due and activates the pods that
// waited for them.
func (sh *shared) sweep(ctx context.Context) {
	sh.sweepPinned(sh.now())
	waiting := sh.store.sweep(sh.now())
	blackHoleNodes.Set(float64(sh.blackHoles().Len()))
	rememberedRefusals.Set(float64(sh.store.size()))
	sh.activatePods(klog.FromContext(ctx), waiting, "avoidance ended")
}

func (sh *shared) activatePods(logger klog.Logger, pods []*v1.Pod, why string) {
	if len(pods) == 0 {
		return
	}
	m := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	logger.V(4).Info("AdmissionFeedback: activating pods", "pods", len(m), "why", why)
	sh.activate(logger, m)
}

// nodeUpdated forgets the node's refusals when its allocatable, capacity or
// labels changed: the device plugin recovered, the node was resized or
// relabelled, and the kubelet may admit what it refused.
func (sh *shared) nodeUpdated(logger klog.Logger, oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*v1.Node)
	newNode, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 || !nodeFixed(oldNode, newNode) {
		return
	}
	n, waiting := sh.store.forgetNode(newNode.Name, sh.now())
	if n == 0 {
		return
	}
	logger.V(2).Info("AdmissionFeedback: node changed; forgetting its refusals", "node", klog.KObj(newNode), "refusals", n)
	blackHoleNodes.Set(float64(sh.blackHoles().Len()))
	rememberedRefusals.Set(float64(sh.store.size()))
	sh.activatePods(logger, waiting, "node changed")
}

func (sh *shared) nodeDeleted(logger klog.Logger, obj any) {
	node, _, err := schedutil.As[*v1.Node](obj, nil)
	if err != nil || node == nil {
		return
	}
	if n, _ := sh.store.forgetNode(node.Name, sh.now()); n > 0 {
		logger.V(4).Info("AdmissionFeedback: node deleted; dropping its refusals", "node", klog.KObj(node), "refusals", n)
		rememberedRefusals.Set(float64(sh.store.size()))
	}
}

// nodeFixed: what the kubelet admits by changed.
func nodeFixed(oldNode, newNode *v1.Node) bool {
	return !apiequality.Semantic.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable) ||
		!apiequality.Semantic.DeepEqual(oldNode.Status.Capacity, newNode.Status.Capacity) ||
		!apiequality.Semantic.DeepEqual(oldNode.Labels, newNode.Labels)
}

// controllerOf returns the pod's controller, unless it has none or it is
// a DaemonSet (whose pods must go to their node).
func controllerOf(pod *v1.Pod) (controller, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.UID == "" || ref.Kind == "DaemonSet" {
		return controller{}, false
	}
	return controller{uid: ref.UID, kind: ref.Kind, namespace: pod.Namespace, name: ref.Name}, true
}

// exempt: pods AdmissionFeedback leaves alone.
func exempt(pod *v1.Pod) (controller, bool) {
	if pod.Spec.NodeName != "" {
		return controller{}, true
	}
	c, ok := controllerOf(pod)
	return c, !ok
}

// preFilterState holds each node avoided for the pod and the refusal that
// avoids it: a short list compared by name (Filter runs for every node: a
// few string comparisons cost less than hashing the node's name), a map
// beyond smallSet nodes. The reason is formatted when Filter rejects the
// node (with PreFilter's clock), not for every pod.
type preFilterState struct {
	avoided []avoidedNode
	byName  map[string]*observed
	now     time.Time
}

type avoidedNode struct {
	node string
	r    *observed
}

// smallSet is how many names a state compares one by one.
const smallSet = 8

// reason is why node is avoided, if it is.
func (s *preFilterState) reason(node string) (string, bool) {
	if r := s.refusal(node); r != nil {
		return refusalMessage(*r, s.now), true
	}
	return "", false
}

// refusal is the refusal that avoids node, or nil.
func (s *preFilterState) refusal(node string) *observed {
	if s.byName != nil {
		return s.byName[node]
	}
	for i := range s.avoided {
		if s.avoided[i].node == node {
			return s.avoided[i].r
		}
	}
	return nil
}

// add records the refusal r on its node (a later refusal on the same node
// replaces it).
func (s *preFilterState) add(r *observed) {
	for i := range s.avoided {
		if s.avoided[i].node == r.node {
			s.avoided[i].r = r
			return
		}
	}
	s.avoided = append(s.avoided, avoidedNode{node: r.node, r: r})
}

// Clone: the state is not changed after PreFilter.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter looks up the refusals of the pod's controller; a pod whose
// controller no node is refusing now is skipped (Filter costs nothing).
func (pl *AdmissionFeedback) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	ctrl, skip := exempt(pod)
	if skip {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	now := pl.shared.now()
	refusals := pl.shared.store.avoided(ctrl.uid, pod, now)
	if len(refusals) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &preFilterState{now: now}
	for i := range refusals {
		r := &refusals[i]
		s.add(r)
		pl.shared.events.pod(pod, ctrl, r.node, func() string { return refusalMessage(*r, now) })
	}
	if len(s.avoided) > smallSet {
		s.byName = make(map[string]*observed, len(s.avoided))
		for _, a := range s.avoided {
			s.byName[a.node] = a.r
		}
	}
	klog.FromContext(ctx).V(4).Info("AdmissionFeedback: avoiding nodes that refused the controller's pods", "pod", klog.KObj(pod), "controller", ctrl.String(), "nodes", len(s.avoided))
	pl.preFilter.Write(state, preFilterStateKey, s)
	return nil, nil
}

// refusalMessage is the reason Filter gives for an avoided node.
func refusalMessage(r observed, now time.Time) string {
	return fmt.Sprintf("node %s refused pod %s of %s %s ago: %s (%s)",
		r.node, r.pod, r.ctrl, duration.HumanDuration(now.Sub(r.at)), r.reason, r.message)
}

// PreFilterExtensions returns nil: a refusal does not depend on the pods on
// the node.
func (pl *AdmissionFeedback) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects the nodes PreFilter found refusing the controller's pods.
// Preemption cannot change a refusal: UnschedulableAndUnresolvable.
func (pl *AdmissionFeedback) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := pl.preFilter.Read(state, preFilterStateKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if msg, ok := s.reason(nodeInfo.Node().Name); ok {
		nodesSkipped.Inc()
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

// preScoreState holds the black-hole nodes as PreScore saw them: a short
// list compared by name, the set beyond smallSet nodes.
type preScoreState struct {
	names []string
	set   sets.Set[string]
}

// Clone: the state is not changed after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

func (s *preScoreState) has(node string) bool {
	if s.set != nil {
		return s.set.Has(node)
	}
	for _, n := range s.names {
		if n == node {
			return true
		}
	}
	return false
}

// PreScore skips pods AdmissionFeedback leaves alone, and every pod while
// no node is a black hole.
func (pl *AdmissionFeedback) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	holes := pl.shared.blackHoles()
	if _, skip := exempt(pod); skip || holes.Len() == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	s := &preScoreState{}
	if holes.Len() > smallSet {
		s.set = holes
	} else {
		s.names = sets.List(holes)
	}
	pl.preScore.Write(state, preScoreStateKey, s)
	return nil
}

// Score is 0 for a black-hole node, the maximum for the rest.
func (pl *AdmissionFeedback) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	name := nodeInfo.Node().Name
	s, err := pl.preScore.Read(state, preScoreStateKey)
	if err != nil {
		// Enabled for Score without PreScore: the black holes now.
		if pl.shared.blackHoles().Has(name) {
			return fwk.MinScore, nil
		}
		return fwk.MaxScore, nil
	}
	if s.has(name) {
		return fwk.MinScore, nil
	}
	return fwk.MaxScore, nil
}

// ScoreExtensions returns nil: scores are already in range.
func (pl *AdmissionFeedback) ScoreExtensions() fwk.ScoreExtensions { return nil }

// SignPod: the result depends on the pod only through its controller
// (KEP-5598 batching stays on).
func (pl *AdmissionFeedback) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	ctrl, skip := exempt(pod)
	if skip {
		return []fwk.SignFragment{{Key: signFragmentKey, Value: ""}}, nil
	}
	return []fwk.SignFragment{{Key: signFragmentKey, Value: string(ctrl.uid)}}, nil
}

// EventsToRegister: a node whose allocatable or labels changed forgets its
// refusals (the capacity-only case is covered by the node handler, which
// activates the waiting pods). An ended avoidance activates its pods too.
func (pl *AdmissionFeedback) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

// isSchedulableAfterNodeChange queues a rejected pod when a node's
// allocatable, capacity or labels changed (its refusals are forgotten).
func (pl *AdmissionFeedback) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldNode == nil || newNode == nil || !nodeFixed(oldNode, newNode) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("AdmissionFeedback: node changed, its refusals are forgotten", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}

// reasonMatcher matches status reasons: exact, or by prefix ("OutOf*").
type reasonMatcher struct {
	exact    map[string]struct{}
	prefixes []string
}

func newReasonMatcher(reasons []string) reasonMatcher {
	m := reasonMatcher{exact: map[string]struct{}{}}
	for _, r := range reasons {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			m.prefixes = append(m.prefixes, p)
		} else {
			m.exact[r] = struct{}{}
		}
	}
	return m
}

func (m reasonMatcher) matches(reason string) bool {
	if reason == "" {
		return false
	}
	if _, ok := m.exact[reason]; ok {
		return true
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
