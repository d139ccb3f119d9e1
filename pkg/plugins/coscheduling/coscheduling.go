// Package coscheduling implements Coscheduling: gang scheduling of the pods
// of scheduler-plugins' PodGroup objects (scheduling.x-k8s.io/v1alpha1,
// pods labelled scheduling.x-k8s.io/pod-group), so that jobs written for
// scheduler-plugins (Kubeflow Trainer, mpi-operator) run on Kubernetes 1.37
// unchanged. A group's members are let into the queue once minMember of them
// exist, kept adjacent by the queue sort, held at Permit until minMember are
// placed and then released together; a gang that cannot complete gives back
// what it holds at once.
package coscheduling

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/crd"
	"github.com/berth-scheduler/berth/internal/fitoptions"
	"github.com/berth-scheduler/berth/internal/gang"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/perclient"
	"github.com/berth-scheduler/berth/internal/preemptible"
	"github.com/berth-scheduler/berth/internal/quantity"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/internal/spclient/informers/externalversions"
	pglisters "github.com/berth-scheduler/berth/internal/spclient/listers/scheduling/v1alpha1"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "Coscheduling"

	// podGroupResource is the scheduler's name for PodGroup events.
	podGroupResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

	// maxPermitWait is the framework's cap on a Permit wait.
	maxPermitWait = 15 * time.Minute

	// timerMargin: a waiting member this close to its own Permit timeout
	// is left to the framework's timer.
	timerMargin = time.Second

	// syncTimeout bounds the CRD check and the informers' sync at start-up.
	syncTimeout = time.Minute

	// Event reasons (on the PodGroup, and on pods where said).
	reasonWaiting        = "GangWaiting"
	reasonTimeout        = "GangTimeout"
	reasonReleased       = "GangReleased"
	reasonScheduled      = "GangScheduled"
	reasonBindFailed     = "GangMemberBindFailed"
	reasonTimeoutClamped = "GangTimeoutClamped"
	reasonYielded        = "GangYielded"
	reasonUnschedulable  = "GangUnschedulable"
)

// Coscheduling is the plugin. All its instances in a process (one per
// profile) share one view of the groups, since they share one cluster.
type Coscheduling struct {
	fh     fwk.Handle
	shared *shared
	// fts and fitOpts: the scheduler's feature gates, for the upstream
	// checks of the preemption dry run.
	fts     feature.Features
	fitOpts noderesources.ResourceRequestsOptions
}

var (
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.PostBindPlugin    = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
	_ fwk.SignPlugin        = &Coscheduling{}
)

// Name returns the plugin's name.
func (pl *Coscheduling) Name() string { return Name }

// shared is the gang state of one cluster (one scheduler client).
type shared struct {
	mgr      *manager
	args     config.CoschedulingArgs
	pgLister pglisters.PodGroupLister
	pgClient versioned.Interface
	// fh is the first profile's handle: waiting pods are one map for all
	// profiles, and events are recorded through it.
	fh fwk.Handle
	// activate moves pods back to the active queue (the handle's, or a
	// test's).
	activate func(map[string]*v1.Pod)
	synced   func() bool
	events   *eventLimiter
	// queueSeen: a pod reached PreEnqueue, so the scheduling queue (the
	// handle's activator) exists.
	queueSeen atomic.Bool
	// writer says whether this replica writes status and events.
	writer *leadership.Writer
	// writing: mayWrite said yes last time the status loop asked.
	writing atomic.Bool
	// afterHeld, in unit tests only, runs between Permit's read of the held
	// members and its count (the window Permit closes).
	afterHeld func()
	// rejectMu serialises this plugin's rejections of waiting pods: the
	// framework's waitingPod.Reject writes its done flag under a read lock
	// (k8s 1.37.2), so two concurrent Rejects of one pod race.
	rejectMu sync.Mutex
}

// states holds the gang state of each scheduler process's cluster.
var states perclient.Registry[*shared]

// CRD is the custom resource Coscheduling reads: start-up fails unless the
// API server serves it.
var CRD = crd.Resource{
	Plugin:       Name,
	GroupVersion: schedv1alpha1.SchemeGroupVersion.String(),
	Name:         "podgroups",
	CRDFile:      "manifests/crds/scheduling.x-k8s.io_podgroups.yaml",
}

// New builds Coscheduling with a client for PodGroups made from the
// scheduler's kubeconfig.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if h == nil || h.KubeConfig() == nil {
		return nil, errors.New("Coscheduling needs the scheduler's kubeconfig")
	}
	c, err := crd.Client(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("building the PodGroup client: %w", err)
	}
	return NewWithClient(c)(ctx, obj, h)
}

// NewWithClient returns a factory that reads PodGroups with c (kubectl
// berth's offline scheduler gives it an in-memory client).
func NewWithClient(c versioned.Interface) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.CoschedulingArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type CoschedulingArgs, got %T", obj)
		}
		if err := validation.ValidateCoschedulingArgs(nil, args); err != nil {
			return nil, err
		}
		if h == nil || h.ClientSet() == nil || h.SharedInformerFactory() == nil {
			return nil, errors.New("Coscheduling needs the scheduler's client and informers")
		}
		registerMetrics()
		sh, err := states.Get(ctx, h.ClientSet(), func(sh *shared) error {
			if !apiequality.Semantic.DeepEqual(sh.args, *args) {
				return fmt.Errorf("Coscheduling args differ between profiles (%+v and %+v): all profiles share one view of the pod groups and must configure it alike", sh.args, *args)
			}
			return nil
		}, func() (*shared, error) { return newShared(ctx, h, c, args) })
		if err != nil {
			return nil, err
		}
		fts, fitOpts := fitoptions.FromGates()
		return &Coscheduling{fh: h, shared: sh, fts: fts, fitOpts: fitOpts}, nil
	}
}

// newShared builds the gang state: PodGroup and member-pod informers, synced,
// and the status writer, all tied to ctx.
func newShared(ctx context.Context, h fwk.Handle, c versioned.Interface, args *config.CoschedulingArgs) (*shared, error) {
	if err := crd.Served(ctx, c.Discovery(), CRD, syncTimeout); err != nil {
		return nil, err
	}
	mgr := newManager()
	mgr.trackDirty = args.WriteStatus
	sh := &shared{mgr: mgr, args: *args, pgClient: c, fh: h,
		writer: leadership.NewWriter(ctx, h.SharedInformerFactory().Core().V1().Pods().Informer().HasSynced)}
	sh.activate = func(pods map[string]*v1.Pod) {
		// The handle's activator is the scheduling queue, which the
		// scheduler sets after building the profiles, while these informers
		// may already deliver events. Before any pod reached PreEnqueue no pod
		// can be gated, so there is nothing to activate.
		if sh.queueSeen.Load() {
			h.Activate(klog.FromContext(ctx), pods)
		}
	}
	sh.events = newEventLimiter(h, sh.mayWrite)
	logger := klog.FromContext(ctx)

	pgFactory := externalversions.NewSharedInformerFactory(c, 0)
	pgInformer := pgFactory.Scheduling().V1alpha1().PodGroups()
	sh.pgLister = pgInformer.Lister()
	if _, err := pgInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sh.podGroupChanged(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { sh.podGroupChanged(ctx, obj, false) },
		DeleteFunc: func(obj any) { sh.podGroupChanged(ctx, obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("watching PodGroups: %w", err)
	}

	// Member pods, in every phase (the status counts finished ones, which
	// the scheduler's own pod informer does not list).
	podFactory := informers.NewSharedInformerFactoryWithOptions(h.ClientSet(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = schedv1alpha1.PodGroupLabel }))
	podInformer := podFactory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sh.podChanged(logger, obj) },
		UpdateFunc: func(_, obj any) { sh.podChanged(logger, obj) },
		DeleteFunc: func(obj any) { sh.podDeleted(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching pods of pod groups: %w", err)
	}

	pgFactory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), pgInformer.Informer().HasSynced) {
		return nil, fmt.Errorf("Coscheduling: the PodGroup informer did not sync within %s (can the scheduler list and watch podgroups.scheduling.x-k8s.io?)", syncTimeout)
	}
	sh.synced = podInformer.HasSynced
	if err := gang.Provide(ctx, h.ClientSet(), sh); err != nil {
		return nil, err
	}
	if args.WriteStatus {
		go wait.UntilWithContext(ctx, sh.writeStatus, args.StatusUpdateInterval.Duration)
	}
	return sh, nil
}

// mayWrite reports whether this process writes status and events for users
// (leadership.Writer).
func (sh *shared) mayWrite() bool { return sh.writer.Allowed() }

// ToPlace implements gang.Members for ElasticQuota.
func (sh *shared) ToPlace(pod *v1.Pod) (string, []*v1.Pod, bool) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return "", nil, false
	}
	pods := sh.mgr.toPlace(key, pod)
	return key, pods, len(pods) > 1
}

// podGroupChanged installs a PodGroup's spec; a new or changed group's
// members are activated (PreEnqueue may now let them in), a deleted group's
// waiting members are released.
func (sh *shared) podGroupChanged(ctx context.Context, obj any, deleted bool) {
	pg, _, err := schedutil.As[*schedv1alpha1.PodGroup](obj, nil)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Coscheduling: unexpected object in the PodGroup informer")
		return
	}
	key := pg.Namespace + "/" + pg.Name
	if deleted {
		sh.mgr.setSpec(key, nil)
		sh.rejectWaiting(key, fmt.Sprintf("pod group %s was deleted", key))
		return
	}
	s := sh.specOf(pg)
	if s.clamped {
		sh.events.podGroup(pg, v1.EventTypeWarning, reasonTimeoutClamped,
			fmt.Sprintf("scheduleTimeoutSeconds %d exceeds the scheduler's 15m cap on a Permit wait; members wait at most 15m", *pg.Spec.ScheduleTimeoutSeconds))
	}
	if sh.mgr.setSpec(key, s) {
		// A lowered minMember may complete a gang whose members wait.
		if allowed, _ := sh.mgr.release(key, sh.heldMembers(key)); allowed != nil {
			for _, wp := range sh.waitingMembers(key) {
				if allowed.Has(wp.GetPod().UID) {
					wp.Allow(Name)
				}
			}
		}
		if pods := sh.mgr.pendingMembers(key); len(pods) > 0 {
			sh.activate(pods)
		}
	}
}

func (sh *shared) specOf(pg *schedv1alpha1.PodGroup) *spec {
	s := &spec{
		name: pg.Name, namespace: pg.Namespace, uid: pg.UID, created: pg.CreationTimestamp.Time,
		minMember: int(pg.Spec.MinMember), minResources: pg.Spec.MinResources,
		timeout: sh.args.ScheduleTimeout.Duration,
	}
	if s.minMember < 1 {
		s.minMember = 1 // the CRD's minimum; an unset field means a group of one
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		s.timeout = time.Duration(*t) * time.Second
		if s.timeout > maxPermitWait {
			s.timeout, s.clamped = maxPermitWait, true
		}
	}
	return s
}

func (sh *shared) podChanged(logger klog.Logger, obj any) {
	pod, _, err := schedutil.As[*v1.Pod](obj, nil)
	if err != nil {
		logger.Error(err, "Coscheduling: unexpected object in the pod informer")
		return
	}
	key, ok := groupKeyOf(pod)
	if !ok {
		return
	}
	if sh.mgr.observe(key, pod) {
		// Quorum reached: PreEnqueue gated the members that came before;
		// the queue re-runs it for pods it activates.
		logger.V(4).Info("Coscheduling: pod group reached quorum", "podGroup", key)
		if pods := sh.mgr.pendingMembers(key); len(pods) > 0 {
			sh.activate(pods)
		}
	}
	if pod.Spec.NodeName != "" {
		if d, ok := sh.mgr.completion(key); ok {
			gangLatency.Observe(d.Seconds())
			if s := sh.mgr.spec(key); s != nil {
				sh.events.background(s, v1.EventTypeNormal, reasonScheduled,
					fmt.Sprintf("%d members bound in %s", s.minMember, d.Round(time.Millisecond)))
			}
		}
	}
}

func (sh *shared) podDeleted(obj any) {
	pod, _, err := schedutil.As[*v1.Pod](obj, nil)
	if err != nil {
		return
	}
	if key, ok := groupKeyOf(pod); ok {
		sh.mgr.remove(key, pod.UID)
	}
}

// waitingMembers returns the pods of key's group waiting at Permit.
func (sh *shared) waitingMembers(key string) []fwk.WaitingPod {
	var out []fwk.WaitingPod
	sh.fh.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := groupKeyOf(wp.GetPod()); ok && k == key {
			out = append(out, wp)
		}
	})
	return out
}

// rejectWaiting releases every member of key's group waiting at Permit.
// A member whose own Permit timeout fires within timerMargin is left to its
// timer: the framework's waitingPod.Reject writes its done flag under a read
// lock (k8s 1.37.2), so a Reject racing the timer's is a data race; this
// plugin's own Rejects are serialised by rejectMu.
func (sh *shared) rejectWaiting(key, msg string) int {
	sh.rejectMu.Lock()
	defer sh.rejectMu.Unlock()
	n := 0
	for _, wp := range sh.waitingMembers(key) {
		if sh.mgr.timesOutWithin(key, wp.GetPod().UID, timerMargin) {
			continue
		}
		if wp.Reject(Name, msg) {
			n++
		}
	}
	return n
}

// QueueSort: Less orders by priority, then by the group's creation time (a
// pod of no group: its queue timestamp), then by group, then by queue
// timestamp. Members of a group thus leave the queue one after another, and
// pods of no group are in exactly PrioritySort's order. Entities that are not
// pods (upstream's own pod groups) are ordered as PrioritySort orders them.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := a.GetPriority(), b.GetPriority()
	if pa != pb {
		return pa > pb
	}
	ta, ka := pl.sortKey(a)
	tb, kb := pl.sortKey(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

func (pl *Coscheduling) sortKey(e fwk.QueuedEntityInfo) (time.Time, string) {
	if e.Type() == fwk.PodKeyType {
		if pi, ok := e.(podInfoGetter); ok && pi.GetPodInfo() != nil {
			if key, ok := groupKeyOf(pi.GetPodInfo().GetPod()); ok {
				if created, ok := pl.shared.mgr.created(key); ok {
					return created, key
				}
			}
		}
	}
	return e.GetTimestamp(), ""
}

// PreEnqueue keeps a member out of the active queue while its PodGroup does
// not exist or has fewer than minMember members.
func (pl *Coscheduling) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	if !pl.shared.queueSeen.Load() {
		pl.shared.queueSeen.Store(true)
	}
	key, ok := groupKeyOf(pod)
	if !ok {
		return nil
	}
	c, s, _, _ := pl.shared.mgr.snapshot(key)
	if s == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod group %q does not exist", key))
	}
	if c.ready < s.minMember {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, waitingMessage(c))
	}
	return nil
}

func waitingMessage(c counts) string {
	return fmt.Sprintf("%s: %d/%d members, waiting for quorum", reasonWaiting, c.ready, c.minMember)
}

// PreFilter refuses a member whose group is missing, below quorum, marked
// failed (until an event that may help), or whose minResources exceed the
// cluster's free capacity.
func (pl *Coscheduling) PreFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	sh := pl.shared
	if !sh.synced() {
		return nil, fwk.AsStatus(errors.New("Coscheduling: waiting for the pod informer to sync"))
	}
	c, s, failed, failedMsg := sh.mgr.snapshot(key)
	switch {
	case s == nil:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod group %q does not exist", key))
	case c.ready < s.minMember:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, waitingMessage(c))
	case failed:
		rejectionsTotal.WithLabelValues("gang-failed").Inc()
		return nil, fwk.NewStatus(fwk.Unschedulable, failedMsg)
	}
	// minResources are checked for the first member of an attempt: the
	// others follow it through Permit, which releases a gang that does not fit.
	if len(s.minResources) > 0 && c.placed == 0 {
		msg, gap := minResourcesGap(key, s, nodes)
		sh.mgr.setGap(key, gap)
		if msg != "" {
			rejectionsTotal.WithLabelValues("min-resources").Inc()
			klog.FromContext(ctx).V(4).Info("Coscheduling: minResources do not fit", "pod", klog.KObj(pod), "podGroup", key, "gap", msg)
			sh.events.podGroupRef(s, v1.EventTypeWarning, reasonUnschedulable, msg)
			return nil, fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	return nil, nil
}

// PreFilterExtensions: none (Coscheduling has no Filter).
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PostFilter runs when a member fits no node. In this order:
//  1. If holds of lower-ranked gangs (priority, then PodGroup creation time)
//     at Permit are what keeps the member out of some node, those gangs are
//     released: the highest-ranked gang is never starved by partial holds of
//     others, so two gangs can never both stay half held. The PostFilter
//     chain ends there (UnschedulableAndUnresolvable): the snapshot still
//     holds the yielded pods, and a preemption plugin after this one would
//     evict pods the yield already made unnecessary. The member retries on
//     the freed room.
//  2. If a dry run (gangFitsAfterPreemption) says every member the gang
//     still needs would fit once the profile's preemption made room, the
//     status lets the preemption plugin after Coscheduling in the profile
//     (DefaultPreemption or ElasticQuota) make room for this member. A gang
//     preempts only when it would then complete, so no gang evicts pods for
//     a gang that would still wait.
//  3. Otherwise the gang cannot complete now: its own held members are
//     released (nothing stays assumed for a gang that cannot run) and
//     preemption is declined (UnschedulableAndUnresolvable stops the
//     PostFilter plugins after this one).
//
// The status message (in the pod's FailedScheduling event) says which.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	sh := pl.shared
	logger := klog.FromContext(ctx)
	if released := pl.yieldLowerRanked(ctx, state, pod, key); len(released) > 0 {
		msg := fmt.Sprintf("released the members held at Permit by lower-ranked pod groups %s for pod group %s; no preemption in this cycle, the member retries on the freed room", strings.Join(released, ", "), key)
		logger.V(3).Info("Coscheduling: "+msg, "pod", klog.KObj(pod))
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	c, s, _, _ := sh.mgr.snapshot(key)
	if s == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod group %q does not exist", key))
	}
	needed := max(s.minMember-c.placed, 1)
	fit, fitted, declined := pl.gangFitsAfterPreemption(ctx, state, pod, key, needed, statuses)
	if fit {
		msg := fmt.Sprintf("pod group %s: %d/%d members placed; with lower-priority pods evicted the gang would complete (a dry run fits all %d more needed): preemption may make room for %s", key, c.placed, s.minMember, needed, pod.Name)
		logger.V(4).Info("Coscheduling: "+msg, "pod", klog.KObj(pod))
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	why := fmt.Sprintf("preemption declined: with every lower-priority pod evicted a dry run fits %d of the %d more needed, so the gang would still not complete", fitted, needed)
	if declined != "" {
		why = "preemption declined: " + declined
	}
	msg := fmt.Sprintf("pod group %s cannot be placed now: %d/%d members placed and %s fits no node; %s", key, c.placed, s.minMember, pod.Name, why)
	if n := sh.rejectWaiting(key, msg+"; the gang's held members are released"); n > 0 {
		// Members not yet tried would take the room just given back, and
		// be held for a gang that does not fit: refuse them for a while.
		sh.mgr.markFailed(key, fmt.Sprintf("pod group %s could not be placed at %s; waiting for a change in the cluster", key, time.Now().UTC().Format(time.RFC3339)))
		rejectionsTotal.WithLabelValues("member-unschedulable").Add(float64(n))
		msg += fmt.Sprintf("; %d members held at Permit were released", n)
		sh.events.podGroupRef(s, v1.EventTypeWarning, reasonReleased, msg)
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// rank orders gangs: higher priority first, then the older PodGroup, then the key.
type rank struct {
	priority int32
	created  time.Time
	key      string
}

func (r rank) above(o rank) bool {
	if r.priority != o.priority {
		return r.priority > o.priority
	}
	if !r.created.Equal(o.created) {
		return r.created.Before(o.created)
	}
	return r.key < o.key
}

// yieldLowerRanked releases gangs ranked below pod's whose members, held at
// Permit, occupy a node where pod would fit without them. The lowest-ranked
// such gangs are released first, and only as many as needed for one node.
func (pl *Coscheduling) yieldLowerRanked(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key string) []string {
	sh := pl.shared
	created, _ := sh.mgr.created(key)
	me := rank{priority: corev1helpers.PodPriority(pod), created: created, key: key}
	// Held members of lower-ranked gangs, by gang.
	held := map[string][]*v1.Pod{}
	ranks := map[string]rank{}
	sh.fh.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		k, ok := groupKeyOf(p)
		if !ok || k == key || !slices.Contains(wp.GetPendingPlugins(), Name) {
			return
		}
		c, _ := sh.mgr.created(k)
		r := rank{priority: corev1helpers.PodPriority(p), created: c, key: k}
		if me.above(r) {
			held[k] = append(held[k], p)
			ranks[k] = r
		}
	})
	if len(held) == 0 {
		return nil
	}
	gangs := make([]string, 0, len(held))
	for k := range held {
		gangs = append(gangs, k)
	}
	slices.SortFunc(gangs, func(a, b string) int { // lowest rank first
		if ranks[a].above(ranks[b]) {
			return 1
		}
		return -1
	})
	logger := klog.FromContext(ctx)
	// Release the fewest lowest-ranked gangs that make one node fit.
	for n := 1; n <= len(gangs); n++ {
		if pl.fitsWithout(ctx, state, pod, heldOn(held, gangs[:n])) {
			for _, k := range gangs[:n] {
				msg := fmt.Sprintf("pod group %s yields its held members to higher-ranked pod group %s", k, key)
				released := sh.rejectWaiting(k, msg)
				rejectionsTotal.WithLabelValues("yielded").Add(float64(released))
				sh.mgr.markFailed(k, msg)
				if s := sh.mgr.spec(k); s != nil {
					sh.events.podGroupRef(s, v1.EventTypeNormal, reasonYielded, msg)
				}
				logger.V(4).Info("Coscheduling: gang yields", "podGroup", k, "to", key, "released", released)
			}
			return gangs[:n]
		}
	}
	return nil
}

// heldOn groups the held members of gangs by node.
func heldOn(held map[string][]*v1.Pod, gangs []string) map[string][]*v1.Pod {
	byNode := map[string][]*v1.Pod{}
	for _, k := range gangs {
		for _, p := range held[k] {
			if p.Spec.NodeName != "" {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			}
		}
	}
	return byNode
}

// fitsWithout reports whether pod passes every Filter plugin on some node of
// byNode once that node's pods listed there are removed from it (on a copy,
// with the PreFilter extensions told, as preemption simulates).
func (pl *Coscheduling) fitsWithout(ctx context.Context, state fwk.CycleState, pod *v1.Pod, byNode map[string][]*v1.Pod) bool {
	logger := klog.FromContext(ctx)
	for nodeName, pods := range byNode {
		ni, err := pl.fh.SnapshotSharedLister().NodeInfos().Get(nodeName)
		if err != nil {
			continue
		}
		ni = ni.Snapshot()
		s := state.Clone()
		removed := true
		for _, p := range pods {
			pi, err := framework.NewPodInfo(p)
			if err != nil || ni.RemovePod(logger, p) != nil {
				removed = false
				break
			}
			if st := pl.fh.RunPreFilterExtensionRemovePod(ctx, s, pod, pi, ni); !st.IsSuccess() {
				removed = false
				break
			}
		}
		if removed && pl.fh.RunFilterPluginsWithNominatedPods(ctx, s, pod, ni).IsSuccess() {
			return true
		}
	}
	return false
}

// gangFitsAfterPreemption is the dry run of PostFilter's step 2: would the
// members the gang still needs all fit once the profile's preemption made
// the room it can make? The members (pod and the unplaced siblings toPlace
// names, shaped as pod where there are fewer), largest first, are placed one
// after another on copies of the snapshot's nodes. A member that does not
// fit a node as it is evicts there, as the preemption would, the fewest of
// the pods the profile's preemption may take (preemptible.For:
// DefaultPreemption's lower-priority pods, or ElasticQuota's reclaim rule
// for the gang as a whole): all eligible ones removed, then reprieved most
// important first while the member still fits. Members shaped as pod go
// through the profile's Filter plugins with pod's cycle state; others, whose
// PreFilter state this plugin cannot compute, through upstream's checks of
// room (roomFor) — and a member whose placement depends on other pods
// (inter-pod affinity, spread constraints, host ports) makes the simulation
// impossible: it declines. The PreFilter extensions are told of every
// removal and addition. Each shape walks the nodes once. It reports whether
// all fit and how many did.
func (pl *Coscheduling) gangFitsAfterPreemption(ctx context.Context, state fwk.CycleState, pod *v1.Pod, key string, needed int, statuses fwk.NodeToStatusReader) (fit bool, fitted int, declined string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false, 0, "the member's preemptionPolicy is Never"
	}
	nodes, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return false, 0, "the snapshot's nodes could not be listed"
	}
	logger := klog.FromContext(ctx)
	members := pl.shared.mgr.toPlace(key, pod)
	if len(members) == 0 {
		members = []*v1.Pod{pod}
	}
	for len(members) < needed {
		members = append(members, pod)
	}
	members = members[:needed]
	// A sibling already nominated to a node has its room promised there
	// (and RunFilterPluginsWithNominatedPods counts it): it is not placed
	// again. The scheduler's nominator says so at once; this plugin's pod
	// informer only once the nomination is written and watched back, and
	// a sibling counted both placed here and nominated there made the dry
	// run decline a gang that fits, release its held members and let the
	// borrower refill the room (issue 51, item 1).
	byNominator := sets.New[types.UID]()
	for _, ni := range nodes {
		for _, pi := range pl.fh.NominatedPodsForNode(ni.Node().Name) {
			if k, ok := groupKeyOf(pi.GetPod()); ok && k == key {
				byNominator.Insert(pi.GetPod().UID)
			}
		}
	}
	nominated := 0
	members = slices.DeleteFunc(members, func(m *v1.Pod) bool {
		if m != pod && (m.Status.NominatedNodeName != "" || byNominator.Has(m.UID)) {
			nominated++
			return true
		}
		return false
	})
	same := make(map[*v1.Pod]bool, len(members))
	for _, m := range members {
		same[m] = m == pod || sameShape(m, pod)
		if !same[m] && dependsOnOtherPods(m) {
			return false, 0, fmt.Sprintf("member %s needs other pods placed around it (required inter-pod affinity, spread constraints or host ports), which the dry run cannot simulate", m.Name)
		}
	}
	slices.SortStableFunc(members, func(a, b *v1.Pod) int { return compareSize(b, a) })
	victims := preemptible.For(pl.fh)(members)
	if !pl.freeableCoversGap(key, nodes, victims) {
		return false, 0, "the pods preemption may take cannot free what the gang's minResources lack"
	}
	s := state.Clone()
	work := make([]fwk.NodeInfo, len(nodes)) // copies, made on first change
	nodeAt := func(i int) fwk.NodeInfo {
		if work[i] == nil {
			work[i] = nodes[i].Snapshot()
		}
		return work[i]
	}
	fits := func(m *v1.Pod, ni fwk.NodeInfo) bool {
		if same[m] {
			return pl.fh.RunFilterPluginsWithNominatedPods(ctx, s, pod, ni).IsSuccess()
		}
		return pl.roomFor(logger, m, ni)
	}
	remove := func(ni fwk.NodeInfo, pi fwk.PodInfo) bool {
		return ni.RemovePod(logger, pi.GetPod()) == nil && pl.fh.RunPreFilterExtensionRemovePod(ctx, s, pod, pi, ni).IsSuccess()
	}
	restore := func(ni fwk.NodeInfo, pi fwk.PodInfo) bool {
		ni.AddPodInfo(pi)
		return pl.fh.RunPreFilterExtensionAddPod(ctx, s, pod, pi, ni).IsSuccess()
	}
	// placeOn tries m on node i, evicting the fewest eligible pods; ok=false
	// means the simulation itself failed. A node no eviction can open (the
	// cycle found it unresolvable for pod; for another shape, its affinity
	// or taints) is skipped at once, as upstream's preemption skips it.
	placeOn := func(m *v1.Pod, i int) (placed, ok bool) {
		ni := nodes[i]
		if work[i] != nil {
			ni = work[i]
		}
		if fits(m, ni) {
			return true, true
		}
		if same[m] {
			if statuses != nil && statuses.Get(ni.Node().Name).Code() == fwk.UnschedulableAndUnresolvable {
				return false, true
			}
		} else if !pl.placeable(logger, m, ni.Node()) {
			return false, true
		}
		var cands []fwk.PodInfo
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if k, isMember := groupKeyOf(p); isMember && k == key {
				continue
			}
			cands = append(cands, pi)
		}
		// Least important first, so a cap on what a namespace gives up
		// takes the right ones.
		slices.SortStableFunc(cands, func(a, b fwk.PodInfo) int {
			return cmp.Compare(corev1helpers.PodPriority(a.GetPod()), corev1helpers.PodPriority(b.GetPod()))
		})
		var taken []fwk.PodInfo
		for _, pi := range cands {
			if victims.Eligible(pi.GetPod()) {
				victims.Take(pi.GetPod())
				taken = append(taken, pi)
			}
		}
		if len(taken) == 0 {
			return false, true
		}
		ni = nodeAt(i)
		for _, pi := range taken {
			if !remove(ni, pi) {
				return false, false
			}
		}
		if !fits(m, ni) {
			for _, pi := range taken {
				victims.Release(pi.GetPod())
				if !restore(ni, pi) {
					return false, false
				}
			}
			return false, true
		}
		// Reprieve, most important first, while m still fits.
		for j := len(taken) - 1; j >= 0; j-- {
			pi := taken[j]
			if !restore(ni, pi) {
				return false, false
			}
			if fits(m, ni) {
				victims.Release(pi.GetPod())
				continue
			}
			if !remove(ni, pi) {
				return false, false
			}
		}
		return true, true
	}
	cursor := map[*v1.Pod]int{} // per shape (its first member): where the last one went
	shapeOf := func(m *v1.Pod) *v1.Pod {
		if same[m] {
			return pod
		}
		for o := range cursor {
			if o != pod && sameShape(m, o) {
				return o
			}
		}
		return m
	}
	for n, m := range members {
		shape := shapeOf(m)
		found := false
		for i := cursor[shape]; i < len(nodes); i++ {
			placed, ok := placeOn(m, i)
			if !ok {
				return false, nominated + n, "the dry run could not simulate an eviction"
			}
			if !placed {
				continue
			}
			found, cursor[shape] = true, i
			ni := nodeAt(i)
			c := m.DeepCopy()
			c.UID = types.UID(fmt.Sprintf("%s-dry-run-%d", pod.UID, n))
			c.Spec.NodeName = ni.Node().Name
			pi, err := framework.NewPodInfo(c)
			if err != nil || !restore(ni, pi) {
				return false, nominated + n, "the dry run could not simulate a placement"
			}
			break
		}
		if !found {
			return false, nominated + n, ""
		}
	}
	return true, nominated + len(members), ""
}

// freeableCoversGap: for a gang refused for its minResources (the gap
// recorded in this cycle's PreFilter), the pods the preemption may take free
// at least what is lacking; else no preemption can complete the gang.
func (pl *Coscheduling) freeableCoversGap(key string, nodes []fwk.NodeInfo, victims preemptible.Victims) bool {
	gap := pl.shared.mgr.gapOf(key)
	if gap == nil {
		return true
	}
	freeable := map[v1.ResourceName]int64{}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); victims.Eligible(p) {
				freeable[v1.ResourcePods]++
				for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
					freeable[name] += quantity.Scaled(name, q)
				}
			}
		}
	}
	for name, lack := range gap {
		if freeable[name] < lack {
			return false
		}
	}
	return true
}

// dependsOnOtherPods: whether the member fits depends on the pods around it
// (required inter-pod affinity or anti-affinity, DoNotSchedule spread
// constraints, host ports), which roomFor does not simulate. Preferences do
// not decide fitting.
func dependsOnOtherPods(p *v1.Pod) bool {
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

// compareSize orders pods by CPU, then memory requested.
func compareSize(a, b *v1.Pod) int {
	ra := resourcehelper.PodRequests(a, resourcehelper.PodResourcesOptions{})
	rb := resourcehelper.PodRequests(b, resourcehelper.PodResourcesOptions{})
	if c := ra.Cpu().Cmp(*rb.Cpu()); c != 0 {
		return c
	}
	return ra.Memory().Cmp(*rb.Memory())
}

// roomFor: the upstream checks of room for a member whose own PreFilter
// state this plugin cannot compute: resources, required node affinity and
// node selector, untolerated NoSchedule/NoExecute taints.
func (pl *Coscheduling) roomFor(logger klog.Logger, m *v1.Pod, ni fwk.NodeInfo) bool {
	return len(noderesources.Fits(m, ni, pl.fh.SharedDRAManager(), pl.fitOpts)) == 0 && pl.placeable(logger, m, ni.Node())
}

// placeable: the member's required node affinity (and node selector) matches
// the node and it tolerates the node's NoSchedule/NoExecute taints: what no
// eviction changes.
func (pl *Coscheduling) placeable(logger klog.Logger, m *v1.Pod, node *v1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(m).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, m.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, pl.fts.EnableTaintTolerationComparisonOperators)
	return !untolerated
}

// sameShape: a and b ask the scheduler for the same (requests, node
// selection, affinity, tolerations, spread constraints, priority), so a's
// cycle state serves b's Filter.
func sameShape(a, b *v1.Pod) bool {
	return apiequality.Semantic.DeepEqual(resourcehelper.PodRequests(a, resourcehelper.PodResourcesOptions{}), resourcehelper.PodRequests(b, resourcehelper.PodResourcesOptions{})) &&
		apiequality.Semantic.DeepEqual(a.Spec.NodeSelector, b.Spec.NodeSelector) &&
		apiequality.Semantic.DeepEqual(a.Spec.Affinity, b.Spec.Affinity) &&
		apiequality.Semantic.DeepEqual(a.Spec.Tolerations, b.Spec.Tolerations) &&
		apiequality.Semantic.DeepEqual(a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints) &&
		corev1helpers.PodPriority(a) == corev1helpers.PodPriority(b)
}

// reservedKey marks, in the cycle state, that Reserve counted the member in
// this cycle (Unreserve acts only then).
const reservedKey fwk.StateKey = "Reserve" + Name

type reservedMark struct{}

func (reservedMark) Clone() fwk.StateData { return reservedMark{} }

// Reserve counts the member as placed.
func (pl *Coscheduling) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	if key, ok := groupKeyOf(pod); ok {
		pl.shared.mgr.reserve(key, pod.UID)
		state.Write(reservedKey, reservedMark{})
	}
	return nil
}

// Unreserve undoes Reserve. A member that leaves Permit without its gang
// (rejected, timed out, deleted) takes the gang's other held members with
// it, so that no resources stay assumed for a gang that will not run. A
// member whose binding failed after the gang was released is retried at once
// and the gang stands: its bound members stay bound.
func (pl *Coscheduling) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return
	}
	if _, err := state.Read(reservedKey); err != nil {
		// The framework runs every Reserve plugin's Unreserve after a
		// Reserve failure: an earlier plugin's failed before this one's
		// Reserve ran, so the member never was this plugin's.
		return
	}
	sh := pl.shared
	wasAllowed, waited := sh.mgr.unreserve(key, pod.UID)
	s := sh.mgr.spec(key)
	if wasAllowed {
		bindFailuresTotal.Inc()
		if s != nil {
			sh.events.podGroupRef(s, v1.EventTypeWarning, reasonBindFailed,
				fmt.Sprintf("member %s was released with its gang but its binding failed; it is retried at once and still counts toward minMember", pod.Name))
		}
		sh.activate(map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
		return
	}
	if s == nil {
		sh.rejectWaiting(key, fmt.Sprintf("pod group %s does not exist", key))
		return
	}
	reason, label := fmt.Sprintf("pod group %s: member %s left Permit before the gang was complete", key, pod.Name), "member-released"
	if waited > 0 && waited >= s.timeout {
		// One message for the whole gang: its members time out together.
		reason, label = fmt.Sprintf("pod group %s: members waited %s at Permit (scheduleTimeout) without the gang completing", key, s.timeout), "timeout"
	}
	if n := sh.rejectWaiting(key, reason+"; the gang's held members are released"); n > 0 || label == "timeout" {
		rejectionsTotal.WithLabelValues(label).Add(float64(n + 1))
		ev := reasonReleased
		if label == "timeout" {
			ev = reasonTimeout
		}
		sh.events.podGroupRef(s, v1.EventTypeWarning, ev, reason)
		klog.FromContext(ctx).V(4).Info("Coscheduling: gang released", "podGroup", key, "members", n, "reason", reason)
	}
}

// Permit holds the member until minMember members of its group are placed,
// then releases all of them.
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return nil, 0
	}
	sh := pl.shared
	s := sh.mgr.spec(key)
	if s == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pod group %q does not exist", key)), 0
	}
	released, c, allowed := sh.permit(key, pod.UID)
	if released {
		for _, wp := range sh.waitingMembers(key) {
			if allowed.Has(wp.GetPod().UID) {
				wp.Allow(Name)
			}
		}
		klog.FromContext(ctx).V(4).Info("Coscheduling: gang released", "podGroup", key, "placed", c.placed, "minMember", s.minMember)
		return nil, 0
	}
	// The first member to wait brings its siblings out of backoff.
	if c.placed == 1 {
		if pods := sh.mgr.pendingMembers(key); len(pods) > 0 {
			if d, err := state.Read(framework.PodsToActivateKey); err == nil {
				if pa, ok := d.(*framework.PodsToActivate); ok {
					pa.Lock()
					for k, p := range pods {
						pa.Map[k] = p
					}
					pa.Unlock()
				}
			}
		}
	}
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("pod group %s: %d/%d members placed, waiting for the rest", key, c.placed, s.minMember)), s.timeout
}

// permit is manager.permit with the members the framework holds. They are
// read before the manager's lock is taken (heldMembers), so a member the
// framework rejects in between (its timer, a deletion, a preemption) would
// be counted and the gang released one short: before any member is
// allowed, they are read again, and a release that counted a member no
// longer held is undone and decided anew (a few times at most). A member
// rejected after that read (or rejected but not yet dropped from the
// framework's waiting pods: its binding goroutine drops it when it wakes) is
// one rejected after the release, as if its binding had failed: it is
// retried and the gang completes with it.
func (sh *shared) permit(key string, uid types.UID) (bool, counts, sets.Set[types.UID]) {
	held := sh.heldMembers(key)
	if sh.afterHeld != nil {
		sh.afterHeld()
	}
	released, c, allowed, since := sh.mgr.permit(key, uid, held)
	for try := 1; released && try <= maxPermitRechecks; try++ {
		now := sh.heldMembers(key)
		lost := held.Intersection(allowed).Difference(now)
		lost.Delete(uid)
		if lost.Len() == 0 {
			break
		}
		sh.mgr.unrelease(key, allowed, since)
		held = now
		released, c, allowed, since = sh.mgr.permit(key, uid, held)
	}
	return released, c, allowed
}

// maxPermitRechecks bounds permit's decisions anew.
const maxPermitRechecks = 3

// heldMembers returns the members of key's group the framework still holds
// at Permit: in its waiting-pods map (the binding goroutine removes a
// rejected one when the rejection wakes it, before Unreserve) and still in
// the scheduler's pod informer (a deletion leaves it there before the
// framework rejects the waiting pod). Computed before the manager's lock is
// taken (the framework's map has a lock of its own).
func (sh *shared) heldMembers(key string) sets.Set[types.UID] {
	held := sets.New[types.UID]()
	lister := sh.fh.SharedInformerFactory().Core().V1().Pods().Lister()
	for _, wp := range sh.waitingMembers(key) {
		p := wp.GetPod()
		if cur, err := lister.Pods(p.Namespace).Get(p.Name); err == nil && cur.UID == p.UID && cur.DeletionTimestamp == nil {
			held.Insert(p.UID)
		}
	}
	return held
}

// PostBind: nothing to do per pod; the latency metric is observed when the
// informer sees the last needed member bound. Present so the plugin can be
// listed at every point in multiPoint without surprises.
func (pl *Coscheduling) PostBind(context.Context, fwk.CycleState, *v1.Pod, string) {}

// SignPod signs members with their group, so members of one group can be
// batched together and never with another group's; other pods get no
// fragment. Coscheduling has no Filter or Score, so batching stays on.
func (pl *Coscheduling) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if key, ok := groupKeyOf(pod); ok {
		return []fwk.SignFragment{{Key: "berth.dev/Coscheduling.PodGroup", Value: key}}, nil
	}
	return nil, nil
}

// EventsToRegister: a PodGroup appearing or changing (PreEnqueue, the failed
// mark), a member pod appearing (quorum; also reached by activation), and
// what can make room for a gang that did not fit: a node added or changed,
// an assigned pod deleted.
func (pl *Coscheduling) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.isSchedulableAfterPodGroupChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: pl.isSchedulableAfterMemberAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterClusterChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterClusterChange},
	}, nil
}

func (pl *Coscheduling) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	n, err := crd.As[schedv1alpha1.PodGroup](newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if n.Namespace+"/"+n.Name != key {
		return fwk.QueueSkip, nil
	}
	if oldObj != nil {
		if o, err := crd.As[schedv1alpha1.PodGroup](oldObj); err == nil && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
			return fwk.QueueSkip, nil // a status write
		}
	}
	pl.shared.mgr.clearFailed(key)
	logger.V(5).Info("Coscheduling: PodGroup changed", "pod", klog.KObj(pod), "podGroup", key)
	return fwk.Queue, nil
}

func (pl *Coscheduling) isSchedulableAfterMemberAdded(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	_, added, err := schedutil.As[*v1.Pod](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if k, ok := groupKeyOf(added); ok && k == key {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterClusterChange: a node or a freed pod may make room for
// a gang that did not fit; the gang is let try again. The gang's own members
// leaving nodes do not count (a released gang's assumed members are deleted
// from the scheduler's cache as assigned pods, and taking that room back
// would send the gang round again and again), but for one case below. A
// gang refused for its minResources waits until the events since the
// refusal freed at least what it lacked (a 500-member gang short of 100
// CPUs is not tried again for every pod deleted anywhere, each try costing
// a pass over the nodes). The case: a refusal recorded while none of the
// gang's members was placed counted the room of released members the cache
// had not yet forgotten (upstream runs Unreserve first, then forgets the
// assumed pod), so their leaving counts towards that gap: no other event
// may come to close it.
func (pl *Coscheduling) isSchedulableAfterClusterChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	key, ok := groupKeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if gone, ok := oldObj.(*v1.Pod); ok {
		if k, ok := groupKeyOf(gone); ok && k == key {
			if id, freed, ok := freedBy(oldObj, newObj); ok {
				if _, closes := pl.shared.mgr.mayClose(key, id, freed); closes {
					logger.V(5).Info("Coscheduling: the gang's own released room covers its minResources", "pod", klog.KObj(pod), "podGroup", key)
					return fwk.Queue, nil
				}
			}
			return fwk.QueueSkip, nil
		}
	}
	if id, freed, ok := freedBy(oldObj, newObj); ok {
		if hasGap, closes := pl.shared.mgr.mayClose(key, id, freed); hasGap && !closes {
			return fwk.QueueSkip, nil
		} else if closes {
			logger.V(5).Info("Coscheduling: freed room may cover the gang's minResources", "pod", klog.KObj(pod), "podGroup", key)
		}
	}
	pl.shared.mgr.clearFailed(key)
	return fwk.Queue, nil
}
