// Package elasticquota implements ElasticQuota: namespace quotas read from
// scheduler-plugins' ElasticQuota objects (scheduling.x-k8s.io/v1alpha1) with
// a guaranteed min, borrowing up to max, and reclaim of borrowed resources by
// preemption on upstream's preemption evaluator.
package elasticquota

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/crd"
	"github.com/berth-scheduler/berth/internal/gang"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/perclient"
	"github.com/berth-scheduler/berth/internal/pluginclock"
	"github.com/berth-scheduler/berth/internal/preemptible"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/internal/spclient/informers/externalversions"
	eqlisters "github.com/berth-scheduler/berth/internal/spclient/listers/scheduling/v1alpha1"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "ElasticQuota"

	// elasticQuotaResource is the scheduler's name for ElasticQuota events
	// (resource.version.group: the scheduler watches it with a dynamic informer).
	elasticQuotaResource fwk.EventResource = "elasticquotas.v1alpha1.scheduling.x-k8s.io"

	// crdSyncTimeout bounds the wait for the API server (discovery of the
	// CRD) and then for the ElasticQuota informer at start-up.
	crdSyncTimeout = time.Minute
)

// ElasticQuota is the plugin. All its instances in a process (one per
// profile) share one quota state, since they share one cluster.
type ElasticQuota struct {
	// ctx is the scheduler's (New's): what the plugin starts ends with it.
	ctx    context.Context
	fh     fwk.Handle
	fts    feature.Features
	denied bool
	shared *shared

	evaluator *preemption.Evaluator
	executor  *preemption.Executor
	// fence: PreBind refuses while this process may have stood still.
	fence *leadership.Fence
}

var (
	_ fwk.PreEnqueuePlugin         = &ElasticQuota{}
	_ fwk.PreFilterPlugin          = &ElasticQuota{}
	_ fwk.PostFilterPlugin         = &ElasticQuota{}
	_ fwk.PodGroupPostFilterPlugin = &ElasticQuota{}
	_ fwk.ReservePlugin            = &ElasticQuota{}
	_ fwk.PreBindPlugin            = &ElasticQuota{}
	_ fwk.EnqueueExtensions        = &ElasticQuota{}
	_ fwk.SignPlugin               = &ElasticQuota{}
	_ preemption.Interface         = &ElasticQuota{}
)

// Name returns the plugin's name.
func (pl *ElasticQuota) Name() string { return Name }

// shared is the quota state of one cluster (one scheduler client).
type shared struct {
	mgr        *manager
	args       config.ElasticQuotaArgs
	eqLister   eqlisters.ElasticQuotaLister
	eqClient   versioned.Interface
	podsSynced func() bool
	// active: this process schedules (it holds the lease, or runs without
	// leader election), so it may write status.
	active atomic.Bool
	// waking holds the UIDs of preemptors wakeAfterPreemption watches.
	waking sync.Map
}

// states holds the quota state of each scheduler process's cluster.
var states perclient.Registry[*shared]

// CRD is the custom resource ElasticQuota reads: start-up fails unless the
// API server serves it.
var CRD = crd.Resource{
	Plugin:       Name,
	GroupVersion: schedv1alpha1.SchemeGroupVersion.String(),
	Name:         "elasticquotas",
	CRDFile:      "manifests/crds/scheduling.x-k8s.io_elasticquotas.yaml",
}

// New builds ElasticQuota with a client for ElasticQuota objects made from
// the scheduler's kubeconfig.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if h == nil || h.KubeConfig() == nil {
		return nil, errors.New("ElasticQuota needs the scheduler's kubeconfig")
	}
	c, err := crd.Client(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("building the ElasticQuota client: %w", err)
	}
	return NewWithClient(c)(ctx, obj, h)
}

// NewWithClient returns a factory that reads ElasticQuota objects with c
// (kubectl berth's offline scheduler gives it an in-memory client).
func NewWithClient(c versioned.Interface) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.ElasticQuotaArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type ElasticQuotaArgs, got %T", obj)
		}
		if err := validation.ValidateElasticQuotaArgs(nil, args); err != nil {
			return nil, err
		}
		if h == nil || h.ClientSet() == nil || h.SharedInformerFactory() == nil {
			return nil, errors.New("ElasticQuota needs the scheduler's client and informers")
		}
		registerMetrics()
		sh, err := sharedFor(ctx, h, c, args)
		if err != nil {
			return nil, err
		}
		fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		pl := &ElasticQuota{
			ctx:    ctx,
			fh:     h,
			fts:    fts,
			denied: args.NamespacesWithoutQuota == config.NamespacesWithoutQuotaDenied,
			shared: sh,
			fence:  leadership.ProcessFence(ctx),
		}
		pl.executor = preemption.NewExecutor(h, fts)
		pl.evaluator = preemption.NewEvaluator(Name, h, pl, pl.executor)
		// ElasticQuota's preemption is the profile's (DefaultPreemption is
		// disabled beside it): other plugins' dry runs use its rule.
		preemptible.Provide(h, pl.rule)
		return pl, nil
	}
}

// sharedFor returns the quota state of h's cluster, building it (informers,
// status writer) on first use. Every profile must configure the same args.
func sharedFor(ctx context.Context, h fwk.Handle, c versioned.Interface, args *config.ElasticQuotaArgs) (*shared, error) {
	return states.Get(ctx, h.ClientSet(), func(sh *shared) error {
		if !apiequality.Semantic.DeepEqual(sh.args, *args) {
			return fmt.Errorf("ElasticQuota args differ between profiles (%+v and %+v): all profiles share one quota state and must configure it alike", sh.args, *args)
		}
		return nil
	}, func() (*shared, error) { return newShared(ctx, h, c, args) })
}

// newShared builds the quota state: the quota and pod informers, synced, and
// the status writer, all tied to ctx.
func newShared(ctx context.Context, h fwk.Handle, c versioned.Interface, args *config.ElasticQuotaArgs) (*shared, error) {
	if err := checkCRD(ctx, c, crdSyncTimeout); err != nil {
		return nil, err
	}
	sh := &shared{mgr: newManager(), args: *args, eqClient: c}
	sh.mgr.now = pluginclock.From(ctx, time.Now)
	only := sets.New(args.Resources...)
	logger := klog.FromContext(ctx)

	// Quotas: the effective one of a namespace is recomputed from the lister.
	factory := externalversions.NewSharedInformerFactory(c, 0)
	eqInformer := factory.Scheduling().V1alpha1().ElasticQuotas()
	sh.eqLister = eqInformer.Lister()
	resync := func(obj any) {
		eq, _, err := schedutil.As[*schedv1alpha1.ElasticQuota](obj, nil)
		if err != nil {
			logger.Error(err, "ElasticQuota: unexpected object in the quota informer")
			return
		}
		eqs, err := sh.eqLister.ElasticQuotas(eq.Namespace).List(labels.Everything())
		if err != nil {
			logger.Error(err, "ElasticQuota: listing quotas", "namespace", eq.Namespace)
			return
		}
		if len(eqs) > 1 {
			logger.Info("ElasticQuota: namespace has several quotas; the oldest governs", "namespace", eq.Namespace, "count", len(eqs))
		}
		if eff := effectiveQuota(eqs); eff != nil {
			if cur := sh.mgr.quota(eq.Namespace); cur != nil && cur.uid == eff.UID && cur.newerThan(eff.ResourceVersion) {
				return // a hint already applied a newer event; this informer will catch up
			}
			sh.mgr.setQuota(eq.Namespace, newQuota(eff, only))
		} else {
			sh.mgr.setQuota(eq.Namespace, nil)
		}
	}
	if _, err := eqInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: resync,
		UpdateFunc: func(oldObj, newObj any) {
			o, _, _ := schedutil.As[*schedv1alpha1.ElasticQuota](oldObj, nil)
			n, _, _ := schedutil.As[*schedv1alpha1.ElasticQuota](newObj, nil)
			if o != nil && n != nil && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				return // a status write
			}
			resync(newObj)
		},
		DeleteFunc: resync,
	}); err != nil {
		return nil, fmt.Errorf("watching ElasticQuotas: %w", err)
	}

	// Pods: usage follows the scheduler's own pod informer (terminal pods
	// leave it as deletions).
	reg, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observePod(sh.mgr, obj) },
		UpdateFunc: func(_, newObj any) { observePod(sh.mgr, newObj) },
		DeleteFunc: func(obj any) {
			if pod, _, err := schedutil.As[*v1.Pod](obj, nil); err == nil {
				sh.mgr.forgetPod(pod.UID)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	sh.podsSynced = reg.HasSynced

	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, crdSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), eqInformer.Informer().HasSynced) {
		return nil, fmt.Errorf("ElasticQuota: the ElasticQuota informer did not sync within %s (can the scheduler list and watch elasticquotas.scheduling.x-k8s.io?)", crdSyncTimeout)
	}
	go wait.UntilWithContext(ctx, sh.writeStatus, args.StatusUpdateInterval.Duration)
	return sh, nil
}

func observePod(m *manager, obj any) {
	if pod, _, err := schedutil.As[*v1.Pod](obj, nil); err == nil {
		m.observe(pod)
	}
}

// checkCRD fails start-up when the ElasticQuota CRD is not served.
func checkCRD(ctx context.Context, c versioned.Interface, budget time.Duration) error {
	return crd.Served(ctx, c.Discovery(), CRD, budget)
}

// PreEnqueue keeps a pod out of the active queue while its asynchronous
// preemption is still evicting victims, as DefaultPreemption does, and
// activates it once the preemption ends (wakeAfterPreemption).
func (pl *ElasticQuota) PreEnqueue(ctx context.Context, p *v1.Pod) *fwk.Status {
	if pl.fts.EnableAsyncPreemption && pl.executor.IsPodRunningPreemption(p.GetUID()) {
		pl.wakeAfterPreemption(ctx, p)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the preemption for this pod to be finished")
	}
	return nil
}

// preemptionWake bounds how long a gated preemptor is watched, and how
// often: the preemption's API calls take milliseconds each.
const (
	preemptionWakeTimeout  = 2 * time.Minute
	preemptionWakeInterval = 50 * time.Millisecond
)

// wakeAfterPreemption activates p once its asynchronous preemption has
// ended. Upstream's executor activates a preemptor only when its last victim
// produces no deletion event; it counts on that deletion to requeue the pod.
// A reclaim may choose victims another preemption is already deleting (they
// count as leaving, so concurrent reclaims stop at min): their deletions can
// reach the queue while the pod is gated here, which drops them, and the
// pod's own calls then find the victims gone ("Victim Pod is already
// deleted"): no event is left to requeue it, and it waited for the periodic
// flush of unschedulable pods. One watcher per pod.
func (pl *ElasticQuota) wakeAfterPreemption(ctx context.Context, p *v1.Pod) {
	if _, watching := pl.shared.waking.LoadOrStore(p.UID, struct{}{}); watching {
		return
	}
	logger := klog.FromContext(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(pl.ctx, preemptionWakeTimeout)
		defer cancel()
		err := wait.PollUntilContextCancel(ctx, preemptionWakeInterval, false, func(context.Context) (bool, error) {
			return !pl.executor.IsPodRunningPreemption(p.UID), nil
		})
		// Forgotten before the activation: Activate runs PreEnqueue, which
		// watches again if the preemption still runs (or a new one began).
		pl.shared.waking.Delete(p.UID)
		switch {
		case pl.ctx.Err() != nil:
			return // the scheduler is stopping
		case err != nil:
			logger.Info("ElasticQuota: the pod's preemption did not end in time; activating it", "pod", klog.KObj(p), "timeout", preemptionWakeTimeout)
		default:
			logger.V(4).Info("ElasticQuota: the pod's preemption ended; activating it", "pod", klog.KObj(p))
		}
		pl.fh.Activate(logger, map[string]*v1.Pod{p.Namespace + "/" + p.Name: p})
	}()
}

// PreFilter admits the pod by its namespace's quota.
func (pl *ElasticQuota) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	sh := pl.shared
	if !sh.active.Load() && sh.active.CompareAndSwap(false, true) {
		// Only the scheduler that schedules runs PreFilter: from now on it
		// keeps status.used current.
		sh.mgr.markDirty(sh.mgr.quotaNamespaces()...)
	}
	if !sh.podsSynced() {
		return nil, fwk.AsStatus(errors.New("ElasticQuota: waiting for the pod informer to sync"))
	}
	gone := goneFrom(ctx)
	s := sh.mgr.snapshotExcluding(pod, podRequest(pod), corev1helpers.PodPriority(pod), nil, gone)
	pl.addGang(s, gone)
	state.Write(stateKey, s)
	if !s.hasQuota {
		if pl.denied {
			deniedTotal.WithLabelValues(reasonNoQuota).Inc()
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("namespace %q has no ElasticQuota, and namespaces without one are denied", pod.Namespace))
		}
		return nil, nil
	}
	if d := s.admitAll(); d != nil {
		deniedTotal.WithLabelValues(d.reason).Inc()
		klog.FromContext(ctx).V(4).Info("ElasticQuota refused pod", "pod", klog.KObj(pod), "reason", d.msg)
		return nil, d.status()
	}
	return nil, nil
}

// addGang gives the arithmetic of a gang's member (Coscheduling in this
// scheduler) that of every member the gang still needs, together: a gang
// admitted pod by pod would hold part of the quota at Permit for members
// that the quota then refuses, and a preemption that lets one member in but
// not the others would evict for nothing. The members are the preemptors
// together: one a reclaim already nominated is counted among them, not again
// as a nominated pod.
func (pl *ElasticQuota) addGang(s *preFilterState, gone sets.Set[types.UID]) {
	pod := s.pod
	if !s.hasQuota || pod.Labels[schedv1alpha1.PodGroupLabel] == "" {
		return
	}
	members := gang.For(pl.fh.ClientSet())
	if members == nil {
		return
	}
	group, pods, ok := members.ToPlace(pod)
	if !ok {
		return
	}
	req := make(vec)
	for _, p := range pods {
		req.add(podRequest(p), 1)
	}
	s.gang = pl.shared.mgr.snapshotExcluding(pod, req, s.prio, pods, gone)
	s.gangName, s.gangSize, s.room = group, len(pods), &gangRoom{}
}

// SignPod adds nothing to the pod's signature and never refuses it: the
// quota admits or refuses a pod as a whole in PreFilter, which runs for every
// pod, batched or not, and it changes neither which nodes fit nor their
// scores. So opportunistic batching stays on for profiles with ElasticQuota.
func (pl *ElasticQuota) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// PreFilterExtensions keeps the quota arithmetic current while the framework
// simulates adding nominated pods or removing preemption victims.
func (pl *ElasticQuota) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod counts podInfoToAdd in the pod's quota arithmetic.
func (pl *ElasticQuota) AddPod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfoToAdd fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.adjust(state, podInfoToAdd.GetPod(), 1)
}

// RemovePod takes podInfoToRemove out of the pod's quota arithmetic.
func (pl *ElasticQuota) RemovePod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfoToRemove fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	return pl.adjust(state, podInfoToRemove.GetPod(), -1)
}

func (pl *ElasticQuota) adjust(state fwk.CycleState, other *v1.Pod, sign int64) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		// ElasticQuota's PreFilter did not run (another plugin rejected the
		// pod first) and another PostFilter simulates: nothing to adjust.
		return nil
	}
	s.adjust(other.Namespace, podRequest(other), pl.shared.mgr.hasQuota(other.Namespace), sign)
	return nil
}

func readState(state fwk.CycleState) (*preFilterState, error) {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", stateKey, err)
	}
	s, ok := d.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("%q has type %T", stateKey, d)
	}
	return s, nil
}

// Reserve counts the pod against its quota until the informer sees it bound.
func (pl *ElasticQuota) Reserve(_ context.Context, state fwk.CycleState, p *v1.Pod, _ string) *fwk.Status {
	pl.shared.mgr.assume(p, state.IsPodGroupSchedulingCycle())
	return nil
}

// Unreserve undoes Reserve.
func (pl *ElasticQuota) Unreserve(_ context.Context, state fwk.CycleState, p *v1.Pod, _ string) {
	pl.shared.mgr.unassume(p, state.IsPodGroupSchedulingCycle())
}

// PreBindPreFlight refuses the binding of a quota namespace's pod while
// this process may have stood still (leadership.Fence): a leader paused past
// its lease wakes with the quota usage it had, while another replica may
// have bound the namespace's room meanwhile. It runs before every plugin's
// PreBind (so before VolumeBinding or DynamicResources write anything) and
// otherwise returns Skip: no nomination is written for a binding ElasticQuota
// has nothing to do with. The pod is retried once the process's lease is
// confirmed (or by the replica that leads).
func (pl *ElasticQuota) PreBindPreFlight(ctx context.Context, _ fwk.CycleState, p *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if s := pl.fenced(ctx, p, nodeName); s != nil {
		return nil, s
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreBind is the same check where the scheduler runs no PreBindPreFlight
// (NominatedNodeNameForExpectation off).
func (pl *ElasticQuota) PreBind(ctx context.Context, _ fwk.CycleState, p *v1.Pod, nodeName string) *fwk.Status {
	return pl.fenced(ctx, p, nodeName)
}

// fenced is an Error for a quota namespace's pod while the fence holds.
func (pl *ElasticQuota) fenced(ctx context.Context, p *v1.Pod, nodeName string) *fwk.Status {
	if !pl.shared.mgr.hasQuota(p.Namespace) {
		return nil
	}
	if fenced, why := pl.fence.Fenced(); fenced {
		pl.fence.Refused(Name)
		klog.FromContext(ctx).V(2).Info("ElasticQuota: binding refused", "pod", klog.KObj(p), "node", nodeName, "reason", why)
		return fwk.NewStatus(fwk.Error, "ElasticQuota: "+why)
	}
	return nil
}

// EventsToRegister: a quota's spec changing (status writes are skipped), and
// an assigned pod leaving a namespace with a quota.
func (pl *ElasticQuota) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: elasticQuotaResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterQuotaChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodDeletion},
	}, nil
}

// isSchedulableAfterQuotaChange queues on any change of a quota's spec: its
// own namespace's quota sets its limits, any other's min changes what can be
// borrowed. Updates of status alone (ours, every few seconds) are skipped.
func (pl *ElasticQuota) isSchedulableAfterQuotaChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	switch {
	case oldObj == nil && newObj != nil:
		if n, err := crd.As[schedv1alpha1.ElasticQuota](newObj); err == nil {
			pl.shared.applyEvent(n, false)
		}
		return fwk.Queue, nil
	case newObj == nil && oldObj != nil:
		if o, err := crd.As[schedv1alpha1.ElasticQuota](oldObj); err == nil {
			pl.shared.applyEvent(o, true)
		}
		return fwk.Queue, nil
	case oldObj == nil:
		return fwk.Queue, nil
	}
	o, err := crd.As[schedv1alpha1.ElasticQuota](oldObj)
	if err != nil {
		return fwk.Queue, err
	}
	n, err := crd.As[schedv1alpha1.ElasticQuota](newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return fwk.QueueSkip, nil
	}
	pl.shared.applyEvent(n, false)
	logger.V(5).Info("ElasticQuota spec changed", "pod", klog.KObj(pod), "quota", klog.KObj(n))
	return fwk.Queue, nil
}

// applyEvent brings the quota state up to date with a quota event the
// scheduler's own (dynamic) informer delivered, before the pods it requeues
// are scheduled again: ElasticQuota's informer may not have seen it yet, and
// a pod admitted by the change but checked against the old quota would wait
// for the next event. Only the namespace's governing quota (or a first one)
// is applied; ElasticQuota's informer settles anything else. The two
// informers run apart, so the event may also be older than what ElasticQuota's
// informer already installed: a deletion applies only to the object it
// deletes (by UID: `kubectl replace --force` re-creates the name), and an
// add or update only if its resourceVersion is not older than the installed one.
func (sh *shared) applyEvent(eq *schedv1alpha1.ElasticQuota, deleted bool) {
	if sh == nil || sh.mgr == nil {
		return
	}
	m := sh.mgr
	cur := m.quota(eq.Namespace)
	switch {
	case deleted:
		if cur != nil && cur.name == eq.Name && cur.uid == eq.UID {
			m.setQuota(eq.Namespace, nil)
		}
	case cur == nil:
		m.setQuota(eq.Namespace, newQuota(eq, sets.New(sh.args.Resources...)))
	case cur.name == eq.Name && !cur.newerThan(eq.ResourceVersion):
		q := newQuota(eq, sets.New(sh.args.Resources...))
		if cur.uid != q.uid || cur.resourceVersion != q.resourceVersion || !maps.Equal(cur.min, q.min) || !maps.Equal(cur.max, q.max) {
			m.setQuota(eq.Namespace, q)
		}
	}
}

// isSchedulableAfterPodDeletion queues when the deleted pod counted against a
// quota (its namespace's, or the totals borrowing draws on).
func (pl *ElasticQuota) isSchedulableAfterPodDeletion(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, nil)
	if err != nil {
		return fwk.Queue, err
	}
	if deleted.Namespace == pod.Namespace || pl.shared.mgr.hasQuota(deleted.Namespace) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
