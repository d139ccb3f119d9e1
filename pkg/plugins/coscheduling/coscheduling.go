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
	"context"
	"errors"
	"fmt"
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
	"github.com/berth-scheduler/berth/internal/pluginclock"
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
	mgr.now = pluginclock.From(ctx, time.Now)
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
		// The members this release counted as waiting (since) must still
		// be held; members allowed before it may have left the waiting
		// pods on their way to binding.
		now := sh.heldMembers(key)
		lost := false
		for w := range since {
			if w != uid && !now.Has(w) {
				lost = true
				break
			}
		}
		if !lost {
			break
		}
		sh.mgr.unrelease(key, uid, since)
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
