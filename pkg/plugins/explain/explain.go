// Package explain implements Explain: for the pods that ask, it records why
// the pod landed on its node (each node's per-plugin weighted scores, the
// rejections by plugin) and why a pending pod fits nowhere (the rejections
// by plugin and the nodes nearest to fitting), in a size-bounded pod
// annotation and an event. Pods that do not ask cost one annotation lookup.
package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/fitoptions"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/mutant"
	"github.com/berth-scheduler/berth/internal/pluginclock"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "Explain"

	stateKey = "PreFilter" + Name

	// ReasonExplained is the event on an explained pod.
	ReasonExplained = "Explained"
)

// Explain explains scheduling decisions for the pods that ask.
type Explain struct {
	fh         fwk.Handle
	args       config.ExplainArgs
	namespaces sets.Set[string]
	fitOpts    noderesources.ResourceRequestsOptions
	out        *writer
	now        func() time.Time
	// budget bounds the explanations computed (nil: no bound), nsBudgets
	// each namespace's share of it (a *rate.Limiter per namespace).
	budget    *rate.Limiter
	nsBudgets *utilcache.LRUExpireCache
	// budgetMu makes a look at the budget and the take one step (the
	// scheduling goroutine and the pod informer's both take).
	budgetMu sync.Mutex
	// asked holds the pending pods whose request annotation appeared since
	// the queue last read them (podUpdated), nAsked how many.
	asked  sync.Map
	nAsked atomic.Int32
	// lastPending: when each pending pod was last explained (UID →
	// time.Time), or a renew mark (its next explanation is due: placed
	// since, or asking anew); forgotten when it is bound or deleted.
	lastPending   sync.Map
	pendingStores atomic.Uint64
	// decided: the pending pods whose failure this replica's PostFilter
	// saw (UID → time.Time), whatever it then did (explained it, or not:
	// the budget, repeatPending, an error): the condition the scheduler
	// writes next is that decision's, not one to explain from the
	// condition (podUpdated). Forgotten when the pod is bound or deleted,
	// spent by the condition's next change, and swept after repeatPending.
	decided       sync.Map
	decidedStores atomic.Uint64
	// inheritedPasses counts explainInherited's passes (tests).
	inheritedPasses atomic.Int32
	// unreserved: pods a cycle placed and then did not bind (Unreserve:
	// rejected at Permit, binding failed), UID → the writer's number at
	// Unreserve; the pod informer explains those from the message the
	// scheduler then writes (explainPendingMember), or a timer from the
	// message it had if none came (explainIfUnchanged). PostFilter, a new
	// placement and the pod's deletion drop the mark.
	unreserved sync.Map
	// leader: whether this process schedules (explainPendingMember runs
	// from the pod informer, which every replica runs); nil: always.
	leader *leadership.Writer
	// pods reads the newest pod object (the informer's store is updated
	// before its handlers run).
	pods corelisters.PodLister
	// done is closed when the scheduler stops.
	done <-chan struct{}
}

// repeatPending is how often a pending pod's explanation is renewed at most.
const repeatPending = time.Minute

// rememberPending records when a pending pod was explained; the sweep
// (remember) drops the records older than repeatPending and the renew
// marks older than renewTTL.
func (pl *Explain) rememberPending(uid types.UID, now time.Time) {
	remember(&pl.lastPending, &pl.pendingStores, uid, now, func(v any) bool {
		if r, ok := v.(renew); ok {
			return now.Sub(r.at) >= renewTTL
		}
		return !pendingFresh(v, now)
	})
}

// remember stores v for uid in m and, every 1,024th store (counted in
// stores), drops the entries stale says are: a pod deleted while its
// cycle ran may be remembered after its deletion was handled.
func remember(m *sync.Map, stores *atomic.Uint64, uid types.UID, v any, stale func(any) bool) {
	m.Store(uid, v)
	if stores.Add(1)%1024 != 0 {
		return
	}
	m.Range(func(k, v any) bool {
		if stale(v) {
			m.Delete(k)
		}
		return true
	})
}

// pendingFresh: a lastPending value that holds the pod's next pending
// explanation back at now (a time within repeatPending; a renew mark never
// does).
func pendingFresh(v any, now time.Time) bool {
	at, made := v.(time.Time)
	return made && now.Sub(at) < repeatPending
}

// renew, in lastPending, marks a pod whose next pending explanation is
// made whatever the explanation it carries says: it was placed since (a
// rejection at Permit, a failed binding), or it asks anew. Swept after
// renewTTL (the pod's bind or deletion drops it before that).
type renew struct{ at time.Time }

// renewTTL: see renew.
const renewTTL = 10 * time.Minute

// renewNext marks the pod's next pending explanation as due (renew).
func (pl *Explain) renewNext(uid types.UID) {
	pl.lastPending.Store(uid, renew{at: pl.now()})
}

// rememberDecided records that this replica's PostFilter saw the pod fail,
// dropping the records older than repeatPending every 1,024th.
func (pl *Explain) rememberDecided(uid types.UID, now time.Time) {
	remember(&pl.decided, &pl.decidedStores, uid, now, func(v any) bool { return now.Sub(v.(time.Time)) >= repeatPending })
}

// decidedHere: this replica's PostFilter saw the pod fail within
// repeatPending, and the condition that decision wrote has not been seen
// yet (consume: it is seen now; the record is spent). The scheduler writes
// a condition only when it changes: a PostFilter whose message repeats
// leaves its record unspent, so a decision no PostFilter saw that follows
// it within the minute (no node at all) is taken for that PostFilter's and
// not explained from its condition; the pod keeps the explanation it had
// (or none) until a PostFilter of Explain runs for it again.
func (pl *Explain) decidedHere(uid types.UID, consume bool) bool {
	var at any
	var ok bool
	if consume {
		at, ok = pl.decided.LoadAndDelete(uid)
	} else {
		at, ok = pl.decided.Load(uid)
	}
	return ok && pl.now().Sub(at.(time.Time)) < repeatPending
}

// recentlyExplained: the pod's pending explanation was made within
// repeatPending, by this replica (lastPending) or, read from the pod's
// annotation, by the replica that led before: a new leader would
// otherwise renew at its takeover the explanation of every pending pod it
// tries, spending its budget on pods that have one while those that have
// none (their explanation lost with the leader before) wait for a minute
// with budget left. The annotation's time is remembered as this replica's.
func (pl *Explain) recentlyExplained(pod *v1.Pod, now time.Time) bool {
	if v, ok := pl.lastPending.Load(pod.UID); ok {
		return pendingFresh(v, now)
	}
	raw := pod.Annotations[AnnotationResult]
	if raw == "" {
		return false
	}
	var r struct {
		Time     metav1.Time `json:"time"`
		Outcome  string      `json:"outcome"`
		Decision string      `json:"decision"`
	}
	// One a new leader made from the pod's condition ("decision") does
	// not count: the pod's next PostFilter explains it in full. (A gang
	// member's group failure, also in the scheduler's words, counts, as
	// this replica's own record of it always did.)
	if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Outcome != OutcomePending || r.Decision != "" {
		return false
	}
	// Written by another replica's clock: one ahead of this one's counts
	// as now. (A pod placed since, or asking anew, has a renew mark: its
	// annotation is not read.)
	at := r.Time.Time
	if at.After(now) {
		at = now
	}
	if now.Sub(at) >= repeatPending {
		return false
	}
	// A renew mark stored meanwhile (the pod's Reserve, on the scheduling
	// goroutine) stands.
	if v, loaded := pl.lastPending.LoadOrStore(pod.UID, at); loaded {
		return pendingFresh(v, now)
	}
	return true
}

var (
	_ fwk.PreFilterPlugin  = &Explain{}
	_ fwk.PreScorePlugin   = &Explain{}
	_ fwk.ReservePlugin    = &Explain{}
	_ fwk.PreBindPlugin    = &Explain{}
	_ fwk.PostFilterPlugin = &Explain{}
	_ fwk.SignPlugin       = &Explain{}
)

// Name returns the plugin's name.
func (pl *Explain) Name() string { return Name }

// New builds Explain with a writer of explanations to the API server.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.ExplainArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type ExplainArgs, got %T", obj)
	}
	if err := validation.ValidateExplainArgs(nil, args); err != nil {
		return nil, err
	}
	if h == nil || h.ClientSet() == nil || h.SnapshotSharedLister() == nil {
		return nil, errors.New("Explain needs the scheduler's client and snapshot")
	}
	registerMetrics()
	_, fitOpts := fitoptions.FromGates()
	pl := &Explain{fh: h, args: *args, now: pluginclock.From(ctx, time.Now), fitOpts: fitOpts, out: newWriter(ctx, h), done: ctx.Done()}
	if len(args.Namespaces) > 0 {
		pl.namespaces = sets.New(args.Namespaces...)
	}
	if n := args.MaxPerMinute; n > 0 {
		pl.budget = rate.NewLimiter(rate.Limit(float64(n)/60), int(n))
		pl.nsBudgets = utilcache.NewLRUExpireCache(maxNamespaceBudgets)
	}
	if f := h.SharedInformerFactory(); f == nil {
		pl.out.binding = nil // no pod informer tells a bind: track none
	} else {
		pl.pods = f.Core().V1().Pods().Lister()
		pl.leader = leadership.NewWriter(ctx, f.Core().V1().Pods().Informer().HasSynced)
		pl.leader.OnAllowed(ctx, func() { pl.explainInherited(klog.FromContext(ctx)) })
		// A pending pod that starts asking is brought back for a cycle:
		// an annotation-only update requeues nothing by itself, and the
		// next attempt could be minutes away.
		if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) { pl.podUpdated(klog.FromContext(ctx), oldObj, newObj) },
			DeleteFunc: func(obj any) {
				if p, _, err := schedutil.As[*v1.Pod](obj, nil); err == nil && p != nil {
					pl.forgetAsked(p.UID)
					pl.out.forget(p.UID)
					pl.unreserved.Delete(p.UID)
				}
			},
		}); err != nil {
			return nil, fmt.Errorf("watching pods: %w", err)
		}
	}
	return pl, nil
}

// podUpdated activates a pending pod whose request annotation appeared, and
// remembers that it asked: informers call their handlers in no fixed order,
// so the queue may still hold (and the activated cycle run) the pod object
// from before the annotation.
func (pl *Explain) podUpdated(logger klog.Logger, oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Pod)
	n, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if n.Spec.NodeName != "" {
		if o.Spec.NodeName == "" { // the bind, seen once
			pl.forgetAsked(n.UID)
			pl.out.bound(n.UID)
		}
		return
	}
	startsAsking := o.Annotations[AnnotationRequest] != "true" && n.Annotations[AnnotationRequest] == "true"
	if msg := groupFailure(n); msg != "" && (msg != groupFailure(o) || startsAsking) {
		// A group member's reason is written once per change: one that
		// asks after it failed is explained from the reason it has.
		pl.explainPendingMember(logger, n, msg, 0, false)
	} else if msg := unscheduled(n); n.Spec.SchedulingGroup == nil && msg != "" && msg != unscheduled(o) {
		// A pod a cycle placed and then did not bind (rejected at
		// Permit, its binding failed: Unreserve marked it): no
		// PostFilter saw it. A pod that fit nowhere has no mark (its
		// PostFilter explains it, or chose not to). Not on starting to
		// ask: the activated cycle explains that pod.
		if at, ok := pl.unreserved.Load(n.UID); ok {
			pl.explainPendingMember(logger, n, msg, at.(uint64), false)
			pl.unreserved.CompareAndDelete(n.UID, at)
		} else if !pl.decidedHere(n.UID, true) && unexplainedDecision(n) == msg {
			// A decision without an explanation, and no PostFilter of
			// this replica saw it (a PostFilter runs before the scheduler
			// writes the condition, and decides whether to explain; the
			// condition's first change after it spends its record): the
			// replica that led before made it, and its status write
			// landed after this one took over (a partition that held
			// the write); or no PostFilter ran (no node at all, or a
			// PostFilter plugin named before Explain ended the cycle's
			// PostFilter).
			pl.explainPendingMember(logger, n, msg, 0, true)
		}
	}
	if !startsAsking {
		return
	}
	if pl.namespaces != nil && !pl.namespaces.Has(n.Namespace) {
		return
	}
	if pl.leader == nil || pl.leader.Allowed() {
		// Asking anew: explain it at its next cycle. (Not on a standby,
		// which keeps no record of its own: after a takeover, the
		// explanation the leader before made stands its minute.)
		pl.renewNext(n.UID)
	}
	if _, loaded := pl.asked.LoadOrStore(n.UID, struct{}{}); !loaded {
		pl.nAsked.Add(1)
	}
	logger.V(4).Info("Explain: a pending pod asks for an explanation; activating it", "pod", klog.KObj(n))
	pl.fh.Activate(logger, map[string]*v1.Pod{n.Namespace + "/" + n.Name: n})
}

// groupFailure is, for a pending member of a Kubernetes PodGroup, the
// message of its PodScheduled=False condition, "" for any other pod.
func groupFailure(p *v1.Pod) string {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return unscheduled(p)
}

// unscheduled is the message of the pod's PodScheduled=False condition
// ("" if it has none).
func unscheduled(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// unexplainedDecision is, for a pending pod with no explanation, the
// message of the scheduler's decision that it fits nowhere (PodScheduled
// False, Unschedulable); "" for any other pod. A gated pod, and one whose
// cycle ended in an error (SchedulerError), has no decision to explain.
func unexplainedDecision(p *v1.Pod) string {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Annotations[AnnotationResult] != "" {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// explainInherited runs when this replica comes to lead (or, without
// leader election, may write): each pending pod that asks (or is sampled)
// and has a decision but no explanation is explained from its condition,
// without waiting for its next cycle. The replica that led before made
// those decisions and the explanations it had queued went with it (a
// leader that loses its lease exits); the next cycle of such a pod may be
// minutes away (a takeover tries every pending pod once, hundreds at 1,000
// nodes, and a pod that failed waits out its backoff). The budget and the
// namespaces apply, and a pod whose failure this replica's PostFilter has
// seen is left to it (explainPendingMember); such an explanation does not
// count as the pod's for repeatPending, so the pod's next PostFilter
// explains it in full (a second write, for the pods the leader before left
// unexplained only). The pass leaves half of the write queue to the
// cycles: what it leaves is explained by the pod's next cycle.
func (pl *Explain) explainInherited(logger klog.Logger) {
	defer pl.inheritedPasses.Add(1)
	pods, err := pl.pods.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Explain: listing the pods a new leader explains")
		return
	}
	tried, left := 0, 0
	for _, p := range pods {
		msg := unexplainedDecision(p)
		if msg == "" || p.Spec.SchedulerName != pl.fh.ProfileName() || !pl.wants(p) {
			continue
		}
		if pl.out.room() <= queueSize/2 {
			left++
			continue
		}
		pl.explainPendingMember(logger, p, msg, 0, true)
		tried++
	}
	logger.V(2).Info("Explain: leading; explaining from their condition the decisions the replica before left unexplained",
		"profile", pl.fh.ProfileName(), "tried", tried, "leftToTheirNextCycle", left)
}

// explainPendingMember explains, in the scheduler's own words (the message
// it writes in the pod's PodScheduled=False condition when the cycle ends),
// a pending pod that no PostFilter saw:
//   - a member of a Kubernetes PodGroup that the group's cycle could not
//     place whole. That cycle runs no per-pod PostFilter, and a
//     PodGroupPostFilter plugin is given none of the members' statuses (the
//     member that failed gets its filter message, the others the group's);
//   - a pod a cycle placed and then did not bind: a Permit plugin rejected
//     it (a Coscheduling gang member whose gang timed out or was released),
//     or its binding failed (ConfirmBinder refused the node);
//   - inherited: a pod whose decision the replica that led before made,
//     its explanation lost with it (explainInherited, podUpdated).
//
// The pod informer calls this when the message changes; the rules of a
// pending pod's explanation apply (asking, the namespaces, once every
// repeatPending, the budget).
//
// seq numbers the explanation as of the pod's Unreserve (0: now), so that a
// placement after it supersedes it in the writer's queue.
func (pl *Explain) explainPendingMember(logger klog.Logger, pod *v1.Pod, msg string, seq uint64, inherited bool) {
	if pod.Spec.SchedulerName != pl.fh.ProfileName() || !pl.wants(pod) {
		return
	}
	if pl.leader != nil && !pl.leader.Allowed() {
		return // a standby replica: the scheduling one explains
	}
	if pl.out.isBinding(pod.UID) {
		return // placed since: a late handler's message is stale (no budget spent)
	}
	if pl.pods != nil {
		// A handler may run late: an update the store has moved past (the
		// member was bound since, or failed again) is not explained.
		cur, err := pl.pods.Pods(pod.Namespace).Get(pod.Name)
		if err != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" || unscheduled(cur) != msg {
			return
		}
	}
	now := pl.now()
	if pl.recentlyExplained(pod, now) {
		return
	}
	if inherited {
		// Numbered before the look below: a PostFilter after it queues
		// a newer explanation, which replaces this one.
		seq = pl.out.next()
		if pl.decidedHere(pod.UID, false) {
			// A cycle of this replica took the pod (the takeover's pass
			// runs beside the first cycles): its PostFilter decided.
			// Looked at last, just before the budget is taken.
			return
		}
	}
	ctx := klog.NewContext(context.Background(), logger)
	if !pl.withinBudget(ctx, pod, explainingPending) {
		return
	}
	nodes := 0
	if f := pl.fh.SharedInformerFactory(); f != nil {
		if l, err := f.Core().V1().Nodes().Lister().List(labels.Everything()); err == nil {
			nodes = len(l)
		}
	}
	r := pl.newResult(OutcomePending, nodes)
	summary := ""
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		r.PodGroup = pod.Namespace + "/" + *sg.PodGroupName
		r.GroupFailure = truncate(msg, maxGroupFailure)
		summary = fmt.Sprintf("pending with its pod group %s: %s", r.PodGroup, r.GroupFailure)
	} else if inherited {
		r.Decision = truncate(msg, maxGroupFailure)
		summary = "pending, as the scheduler's condition says: " + r.Decision
	} else {
		r.Rejection = truncate(msg, maxGroupFailure)
		summary = "pending, placed but not bound: " + r.Rejection
	}
	it := item{pod: pod, result: r, summary: summary, seq: seq}
	if inherited && pl.pods != nil {
		it.recheck = func() (*v1.Pod, bool) {
			cur, err := pl.pods.Pods(pod.Namespace).Get(pod.Name)
			if err != nil || cur.UID != pod.UID || unexplainedDecision(cur) != msg || pl.decidedHere(pod.UID, false) {
				return nil, false
			}
			return cur, true
		}
	}
	if pl.out.enqueueItem(ctx, it) && !inherited {
		pl.rememberPending(pod.UID, now)
	}
}

// notExplainedOverBudget: a placement recorded, not explained (Reserve).
const notExplainedOverBudget = "not explained: over the explanation budget (maxPerMinute)"

// placedUnexplained records a placement the budget left unexplained (no
// computation: a write at PreBind) for a pod that asks, so that it has an
// answer naming its node, and for one whose annotation holds an older
// explanation (a sampled pod explained as Pending), which would no longer
// be true once it is bound. Counted in skipped{budget} by withinBudget
// (or at the PodGroup cycle's try), not as an explanation.
func (pl *Explain) placedUnexplained(pod *v1.Pod, nodeName string, s *cycleState) {
	if pod.Annotations[AnnotationRequest] != "true" && pod.Annotations[AnnotationResult] == "" {
		return
	}
	pl.renewNext(pod.UID)
	r := pl.newResult(OutcomePlaced, 0)
	r.Placed = &Placed{Node: nodeName, Unexplained: notExplainedOverBudget}
	if l, err := pl.fh.SnapshotSharedLister().NodeInfos().List(); err == nil {
		r.Nodes = len(l)
	}
	s.placed = &item{pod: pod, result: r, summary: fmt.Sprintf("placed on %s (%s)", nodeName, notExplainedOverBudget), seq: pl.out.next()}
}

// maxGroupFailure bounds the scheduler's message kept in a result.
const maxGroupFailure = 1024

// askedLater reports (once) whether the pod started asking after the object
// the cycle holds was read; one atomic load when no pod did.
func (pl *Explain) askedLater(uid types.UID) bool {
	if pl.nAsked.Load() == 0 {
		return false
	}
	if _, ok := pl.asked.LoadAndDelete(uid); ok {
		pl.nAsked.Add(-1)
		return true
	}
	return false
}

// forgetAsked drops a pod that was bound or deleted: before a cycle read its
// request, or after its explanation as pending.
func (pl *Explain) forgetAsked(uid types.UID) {
	pl.lastPending.Delete(uid)
	pl.decided.Delete(uid)
	pl.askedLater(uid)
}

// wants: the pod asks (or is sampled), in a namespace explanations are for.
func (pl *Explain) wants(pod *v1.Pod) bool {
	if pl.namespaces != nil && !pl.namespaces.Has(pod.Namespace) {
		return false
	}
	if pod.Annotations[AnnotationRequest] == "true" {
		return true
	}
	if n := pl.args.SampleOneIn; n > 0 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(pod.UID))
		return h.Sum32()%uint32(n) == 0
	}
	return false
}

// A namespace's share of maxPerMinute, and how many namespaces' shares are
// remembered (a namespace idle for a minute has its share whole again, so
// one forgotten loses nothing).
const (
	namespaceShareDivisor = 4
	maxNamespaceBudgets   = 4096
)

// withinBudget takes one explanation from the budget, or counts the pod
// skipped and logs it with what would have been explained (placement or
// pending). The budget is the cluster's: while more than half of it is left,
// any namespace takes from it; the last half is taken in shares, a quarter
// of maxPerMinute per namespace, so one namespace whose pods all ask takes
// three quarters of the budget at most and the others keep the rest.
func (pl *Explain) withinBudget(ctx context.Context, pod *v1.Pod, what string) bool {
	if pl.budget == nil {
		return true
	}
	pl.budgetMu.Lock()
	now := pl.now()
	share := pl.namespaceBudget(pod.Namespace)
	var ok bool
	if pl.plenty(now) {
		ok = pl.budget.AllowN(now, 1)
	} else if share.TokensAt(now) >= 1 {
		ok = pl.budget.AllowN(now, 1) && share.AllowN(now, 1)
	}
	pl.budgetMu.Unlock()
	if ok {
		return true
	}
	skipped.WithLabelValues(skippedBudget).Inc()
	// V(2), as upstream logs each failed attempt: the pod's answer to
	// "why was I not explained" (and the soak's per-pod oracle).
	klog.FromContext(ctx).V(2).Info("Explain: over maxPerMinute, or over the namespace's share of its last half; not explaining this cycle", "pod", klog.KObj(pod), "explaining", what)
	return false
}

// What a refusal over the budget would have explained (its log line's
// "explaining" value): a placement (Reserve) or a pending pod's decision.
const (
	explainingPlacement = "placement"
	explainingPending   = "pending"
)

// plenty: more than half of the budget is left (whole explanations).
func (pl *Explain) plenty(now time.Time) bool {
	return math.Floor(pl.budget.TokensAt(now)) > float64(pl.budget.Burst()/2)
}

// namespaceBudget is ns's share of the budget: a quarter of maxPerMinute, at
// least one a minute; remembered while the namespace asks at least once a
// minute (a share forgotten is one refilled: it would be whole by then).
// budgetMu is held.
func (pl *Explain) namespaceBudget(ns string) *rate.Limiter {
	l, ok := pl.nsBudgets.Get(ns)
	if !ok {
		share := max(pl.args.MaxPerMinute/namespaceShareDivisor, 1)
		l = rate.NewLimiter(rate.Limit(float64(share)/60), int(share))
	}
	pl.nsBudgets.Add(ns, l, time.Minute)
	return l.(*rate.Limiter)
}

// cycleState marks a pod to explain and holds what the cycle scored.
type cycleState struct {
	// scored are the nodes the cycle scored (set by PreScore); nil: the
	// cycle did not score.
	scored []string
	// placed is the placement's explanation (set by Reserve), written by
	// PreBind.
	placed *item
	// tried is the explanation of a placement Kubernetes' PodGroup cycle
	// tried (Reserve with IsPodGroupSchedulingCycle): the cycle reverts
	// every member before it reserves them again for binding, and only the
	// try saw the snapshot the member was placed on (the members placed
	// before it included). The binding's Reserve takes it as placed.
	tried *item
	// grouped: a PodGroup cycle tried this pod in this cycle state.
	grouped bool
	// refused: the node a PodGroup cycle's try of this pod found the
	// budget spent on, in this cycle state (refused once per node, as a
	// try is explained once per node).
	refused string
}

// Clone returns the same state: the scored set is written once per cycle.
func (s *cycleState) Clone() fwk.StateData { return s }

// explaining returns the mark of a pod being explained in this cycle, nil if
// PreFilter did not run (or skipped a pod that does not ask).
func explaining(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*cycleState)
	return s
}

// PreFilter marks a pod that asks; every other pod gets Skip. The budget is
// spent where an explanation is computed (Reserve, PostFilter; a PodGroup
// member once per node and cycle state).
func (pl *Explain) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !pl.wants(pod) && !pl.askedLater(pod.UID) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// A pod in a scheduling cycle is not being bound: a placement whose end
	// was never seen would otherwise drop its explanations for good. (In
	// 1.37 a pod's PreFilter never runs between its binding's Reserve and
	// its Unreserve or bind: an assumed pod popped again is skipped before
	// PreFilter, skipPodSchedule and skipPodGroupPodSchedule, and a
	// PodGroup cycle reserves for binding after every PreFilter of the
	// cycle, submitPodGroupAlgorithmResult.)
	pl.out.unplacing(pod.UID)
	state.Write(stateKey, &cycleState{})
	return nil, nil
}

// PreFilterExtensions returns nil.
func (pl *Explain) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PreScore records the nodes the cycle scores (normalisation depends on
// the set); Explain has no Score, so it always returns Skip.
func (pl *Explain) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if s := explaining(state); s != nil && s.scored == nil {
		s.scored = make([]string, len(nodes))
		for i, n := range nodes {
			s.scored[i] = n.Node().Name
		}
	}
	return fwk.NewStatus(fwk.Skip)
}

// Reserve explains the placement, inside the scheduling cycle (Explain must
// be the first Reserve plugin: later ones change state Filter and Score
// read). The result is written off the scheduling goroutine, by PreBind.
func (pl *Explain) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	inGroupCycle := state.IsPodGroupSchedulingCycle()
	if !inGroupCycle {
		// First: whether or not this placement is explained. A PodGroup
		// cycle's try is no placement (it may be reverted): the binding's
		// Reserve marks it, and until then a pending explanation stands.
		// A pod unreserved before: the rejection explanation its
		// informer handler may still queue is older than this placement.
		_, unreserved := pl.unreserved.LoadAndDelete(pod.UID)
		pl.out.placing(pod.UID, unreserved)
	}
	s := explaining(state)
	if s == nil {
		return nil
	}
	s.placed = nil // a Reserve that an earlier Unreserve reverted left nothing behind
	switch {
	case inGroupCycle:
		s.grouped = true
		// A PodGroup cycle, and a pod-group preemption reprieving victims
		// (ElasticQuota's), reserve a member again and again in one cycle:
		// it is explained, and charged, once per node in a cycle state.
		if t := s.tried; t != nil && t.result.Placed != nil && t.result.Placed.Node == nodeName {
			return nil
		}
		if s.refused == nodeName {
			return nil // refused (counted, logged) on this node already
		}
		if !pl.withinBudget(ctx, pod, explainingPlacement) {
			s.refused = nodeName
			return nil
		}
	case s.grouped:
		// Reserved for binding after the PodGroup cycle tried it: the
		// try's explanation (charged then) is the placement's. Without one
		// (the budget was spent, or another node), no explanation: this
		// Reserve's snapshot holds none of the members placed before, and
		// would tell another story. The placement is recorded unexplained
		// for a pod that asks (placedUnexplained).
		tried := s.tried
		s.tried = nil
		if tried != nil && tried.result.Placed != nil && tried.result.Placed.Node == nodeName {
			pl.renewNext(pod.UID)
			explanations.WithLabelValues(tried.result.Outcome).Inc()
			tried.pod = pod
			s.placed = tried
			return nil
		}
		pl.placedUnexplained(pod, nodeName, s)
		return nil
	case !pl.withinBudget(ctx, pod, explainingPlacement):
		pl.placedUnexplained(pod, nodeName, s)
		return nil
	}
	if !inGroupCycle {
		// A try is no placement yet: the pending explanation's pace stays.
		pl.renewNext(pod.UID)
	}
	start := pl.now()
	r, err := pl.explainPlaced(ctx, state, pod, nodeName, s)
	if err != nil {
		explainErrors.Inc()
		klog.FromContext(ctx).Error(err, "Explain: explaining a placement failed", "pod", klog.KObj(pod), "node", nodeName)
		return nil // an explanation never fails the cycle
	}
	explainDuration.WithLabelValues(OutcomePlaced).Observe(pl.now().Sub(start).Seconds())
	it := &item{pod: pod, result: r, summary: summarizePlaced(r), seq: pl.out.next()}
	if inGroupCycle {
		// Counted if the binding takes it.
		s.tried = it
		return nil
	}
	explanations.WithLabelValues(r.Outcome).Inc()
	s.placed = it
	return nil
}

// Unreserve drops the placement's explanation, not yet written: the pod is
// not bound there. A PodGroup cycle's revert of a member it tried keeps
// the try's explanation for the binding's Reserve.
func (pl *Explain) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if s := explaining(state); s != nil {
		s.placed = nil
		if !state.IsPodGroupSchedulingCycle() {
			s.tried = nil
		}
	}
	if state.IsPodGroupSchedulingCycle() {
		return // a PodGroup cycle's revert of a try: no placement was made
	}
	pl.out.unplacing(pod.UID)
	// A placement that will not be bound (a Permit plugin rejected it, or
	// its binding failed): explained from the scheduler's message, if it
	// asks (podUpdated, or explainIfUnchanged).
	if pl.wants(pod) {
		at := pl.out.next()
		pl.unreserved.Store(pod.UID, at)
		pl.explainIfUnchanged(klog.FromContext(ctx), pod, at)
	}
}

// unchangedGrace is how long after an Unreserve explainIfUnchanged waits
// for the scheduler's new PodScheduled message (its status write, then the
// informer's update) before it takes the message the pod has for it.
var unchangedGrace = 10 * time.Second

// explainIfUnchanged explains an unreserved pod whose PodScheduled
// condition already holds a message: the scheduler writes the condition
// only when it changes, so a rejection in the words of the one before (a
// gang member held and released again for the same misfit sibling) reaches
// podUpdated as no update at all, and an explanation of it not made or not
// written the first time (a replica that was not yet leading, the budget,
// the write queue full, a write that failed, a leader lost) would never be
// made again. After unchangedGrace, a pod still pending with the message
// it had at the Unreserve, and not placed again meanwhile, is explained
// from that message, under a pending pod's rules (once every
// repeatPending: an explanation since, by PostFilter or podUpdated, stands).
// A pod placed again at that moment is left to that placement (its next
// Unreserve, if any, arms another timer). A status write slower than
// unchangedGrace leaves the explanation with the message before it, and the
// new message waits for repeatPending and a change.
func (pl *Explain) explainIfUnchanged(logger klog.Logger, pod *v1.Pod, at uint64) {
	if pl.pods == nil {
		return
	}
	cur, err := pl.pods.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || cur.UID != pod.UID {
		return
	}
	before := unscheduled(cur)
	if before == "" {
		return // the scheduler's first message is an update podUpdated sees
	}
	time.AfterFunc(unchangedGrace, func() {
		select {
		case <-pl.done:
			return
		default:
		}
		if v, ok := pl.unreserved.Load(pod.UID); ok && v != at {
			return // unreserved again since: that Unreserve's timer decides
		}
		cur, err := pl.pods.Pods(pod.Namespace).Get(pod.Name)
		if err != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" || unscheduled(cur) != before {
			return // changed: podUpdated explains it (or it was bound, or deleted)
		}
		// Numbered now: not binding (explainPendingMember checks, and the
		// writer drops what is made while it is), so any placement comes
		// after it. The Unreserve's mark, if still there, is spent.
		pl.explainPendingMember(logger, cur, before, 0, false)
		pl.unreserved.CompareAndDelete(pod.UID, at)
	})
}

// PreBindPreFlight: PreBind has work only for a pod explained at Reserve.
// It may run beside other PreBind plugins.
func (pl *Explain) PreBindPreFlight(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	// AllowParallel with Skip too: a skipped plugin that does not allow it
	// splits the parallel group around it.
	if s := explaining(state); s == nil || s.placed == nil {
		return &fwk.PreBindPreFlightResult{AllowParallel: true}, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind writes the placement's explanation in the binding cycle, before
// the bind, retrying transient failures: a pod is never bound with its
// explanation still queued, which a leader that exits in between (its lease
// lost) would leave unwritten for good, as the next leader does not explain
// bound pods. A write that fails is logged and counted; the bind goes on.
func (pl *Explain) PreBind(ctx context.Context, state fwk.CycleState, _ *v1.Pod, _ string) *fwk.Status {
	if s := explaining(state); s != nil && s.placed != nil {
		pl.out.writePlaced(ctx, klog.FromContext(ctx), *s.placed)
	}
	return nil
}

// PostFilter explains why a pod fits nowhere, from the cycle's own
// statuses. Informational: it returns Unschedulable, so the next PostFilter
// plugin (preemption) runs; name Explain before DefaultPreemption. A pod
// whose PreFilter stopped before Explain's (a PreFilter plugin earlier in the
// profile rejected it: a missing claim, a quota) has no mark in the cycle
// state; it is explained if it asks, from the statuses the framework gave
// every node (the rejecting plugin and its message).
func (pl *Explain) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if explaining(state) == nil && !pl.wants(pod) && !pl.askedLater(pod.UID) {
		// Not marked (PreFilter never ran) and does not ask.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// This cycle's failure is explained here (or not, by the rules
	// below), not by an earlier Unreserve's mark nor from the condition
	// the scheduler writes next.
	pl.unreserved.Delete(pod.UID)
	now := pl.now()
	pl.rememberDecided(pod.UID, now)
	// A pending pod is retried every backoff: its explanation is renewed
	// once every repeatPending at most, which spends no budget meanwhile.
	if pl.recentlyExplained(pod, now) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if !pl.withinBudget(ctx, pod, explainingPending) || mutant.On(mutant.ExplainForgetsPending) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	start := pl.now()
	r, err := pl.explainPending(pod, m)
	if err != nil {
		explainErrors.Inc()
		klog.FromContext(ctx).Error(err, "Explain: explaining a pending pod failed", "pod", klog.KObj(pod))
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	explainDuration.WithLabelValues(OutcomePending).Observe(pl.now().Sub(start).Seconds())
	if pl.out.enqueue(ctx, pod, r, summarizePending(r)) {
		pl.rememberPending(pod.UID, now)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// SignPod: a pod that asks is not batched (its explanation must come from a
// cycle that scored); the others sign nothing.
func (pl *Explain) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if pl.wants(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "Explain: a pod being explained is scheduled on its own")
	}
	return nil, nil
}

func (pl *Explain) newResult(outcome string, nodes int) *Result {
	return &Result{Version: ResultVersion, Profile: pl.fh.ProfileName(), Time: metav1.NewTime(pl.now().UTC().Truncate(time.Second)),
		Outcome: outcome, Nodes: nodes}
}

// explainPlaced re-runs Filter over every node and PreScore/Score over the
// nodes the cycle scored, through the handle, on a clone of the cycle's
// state (which holds the real PreFilter results).
func (pl *Explain) explainPlaced(ctx context.Context, state fwk.CycleState, assumed *v1.Pod, chosen string, s *cycleState) (*Result, error) {
	// Reserve is given the assumed pod, whose spec.nodeName names the chosen
	// node; the cycle filtered and scored the pod without it.
	unassumed := *assumed
	unassumed.Spec.NodeName = ""
	pod := &unassumed
	lister := pl.fh.SnapshotSharedLister().NodeInfos()
	nodes, err := lister.List()
	if err != nil {
		return nil, fmt.Errorf("listing the snapshot's nodes: %w", err)
	}
	// Kubernetes' PodGroup cycle adds each member it assumes to the
	// snapshot, for the members after it to see: the cycle filtered and
	// scored this one without itself on the chosen node. (A pod's own cycle
	// assumes it in the cache, not in its snapshot.)
	chosenInfo, err := lister.Get(chosen)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", chosen, err)
	}
	if state.IsPodGroupSchedulingCycle() {
		if nodes, chosenInfo, err = withoutPod(ctx, nodes, chosenInfo, pod); err != nil {
			return nil, err
		}
	}
	clone := state.Clone()
	statuses := make([]*fwk.Status, len(nodes))
	pl.fh.Parallelizer().Until(ctx, len(nodes), func(i int) {
		statuses[i] = pl.fh.RunFilterPluginsWithNominatedPods(ctx, clone, pod, nodes[i])
	}, Name)
	rej := rejections{}
	feasible := 0
	for _, st := range statuses {
		if st.IsSuccess() {
			feasible++
			continue
		}
		rej.add(st.Plugin(), st.Reasons())
	}
	r := pl.newResult(OutcomePlaced, len(nodes))
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		r.PodGroup = pod.Namespace + "/" + *sg.PodGroupName
	}
	r.Rejections = rej.list()
	p := &Placed{Node: chosen, Feasible: feasible}
	r.Placed = p
	if s.scored == nil {
		p.NotScored = "one feasible node: the cycle did not score"
		if pod.Status.NominatedNodeName == chosen {
			p.NotScored = "the pod's nominated node fits: the cycle did not score"
		}
		pl.redact(r, nodes, sets.New(chosen))
		return r, nil
	}
	scoredNodes := make([]fwk.NodeInfo, 0, len(s.scored))
	for _, name := range s.scored {
		ni, err := lister.Get(name)
		if err != nil {
			return nil, fmt.Errorf("node %s the cycle scored: %w", name, err)
		}
		if name == chosen {
			ni = chosenInfo
		}
		scoredNodes = append(scoredNodes, ni)
	}
	if st := pl.fh.RunPreScorePlugins(ctx, clone, pod, scoredNodes); !st.IsSuccess() {
		return nil, fmt.Errorf("re-running PreScore: %w", st.AsError())
	}
	scores, st := pl.fh.RunScorePlugins(ctx, clone, pod, scoredNodes)
	if !st.IsSuccess() {
		return nil, fmt.Errorf("re-running Score: %w", st.AsError())
	}
	p.Scored, p.ScoredNodes = true, len(scores)
	sort.SliceStable(scores, func(i, j int) bool {
		if scores[i].TotalScore != scores[j].TotalScore {
			return scores[i].TotalScore > scores[j].TotalScore
		}
		return scores[i].Name < scores[j].Name
	})
	var chosenScore *fwk.NodePluginScores
	for i := range scores {
		if scores[i].Name == chosen {
			chosenScore = &scores[i]
		}
	}
	if chosenScore == nil {
		return nil, fmt.Errorf("node %s is not among the %d nodes the cycle scored", chosen, len(scores))
	}
	tied := 0
	for _, sc := range scores {
		if sc.TotalScore > chosenScore.TotalScore {
			p.Rank++
		}
		if sc.TotalScore == scores[0].TotalScore {
			tied++
		}
	}
	p.Rank++
	switch {
	case p.Rank > 1:
		p.Note = fmt.Sprintf("the chosen node ranks %d in the re-run: a plugin's score changed since the cycle (state outside the cycle's CycleState)", p.Rank)
	case tied > 1:
		p.Note = fmt.Sprintf("%d nodes tied at the top; the cycle picked one at random", tied)
	}
	if feasible > len(scores) {
		note := fmt.Sprintf("the cycle scored %d of the %d feasible nodes (percentageOfNodesToScore); the rank is among those", len(scores), feasible)
		p.Note = strings.TrimPrefix(p.Note+"; "+note, "; ")
	}
	top := int(pl.args.TopNodes)
	for i, sc := range scores {
		if i < top || sc.Name == chosen {
			p.Top = append(p.Top, nodeScore(sc))
		}
	}
	pl.redact(r, nodes, sets.New(chosen))
	return r, nil
}

// withoutPod returns nodes and chosen with pod taken off chosen, on copies,
// if chosen holds it.
func withoutPod(ctx context.Context, nodes []fwk.NodeInfo, chosen fwk.NodeInfo, pod *v1.Pod) ([]fwk.NodeInfo, fwk.NodeInfo, error) {
	for _, pi := range chosen.GetPods() {
		if pi.GetPod().UID != pod.UID {
			continue
		}
		without := chosen.Snapshot()
		if err := without.RemovePod(klog.FromContext(ctx), pi.GetPod()); err != nil {
			return nil, nil, fmt.Errorf("node %s without the pod: %w", chosen.Node().Name, err)
		}
		nodes = slices.Clone(nodes)
		for i := range nodes {
			if nodes[i].Node().Name == chosen.Node().Name {
				nodes[i] = without
			}
		}
		return nodes, without, nil
	}
	return nodes, chosen, nil
}

func nodeScore(sc fwk.NodePluginScores) NodeScore {
	ns := NodeScore{Node: sc.Name, Total: sc.TotalScore, Plugins: make(map[string]int64, len(sc.Scores))}
	for _, ps := range sc.Scores {
		ns.Plugins[ps.Name] = ps.Score
	}
	return ns
}

// explainPending reads the cycle's statuses of every node and, for nodes
// NodeResourcesFit rejected, what they lack.
func (pl *Explain) explainPending(pod *v1.Pod, m fwk.NodeToStatusReader) (*Result, error) {
	nodes, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fmt.Errorf("listing the snapshot's nodes: %w", err)
	}
	r := pl.newResult(OutcomePending, len(nodes))
	rej := rejections{}
	type near struct {
		Nearest
		distance float64
	}
	var nearest []near
	for _, ni := range nodes {
		st := m.Get(ni.Node().Name)
		if st.IsSuccess() {
			continue
		}
		rej.add(st.Plugin(), st.Reasons())
		if st.Plugin() != noderesources.Name {
			continue
		}
		insufficient := noderesources.Fits(pod, ni, pl.fh.SharedDRAManager(), pl.fitOpts)
		if len(insufficient) == 0 {
			continue
		}
		n := near{Nearest: Nearest{Node: ni.Node().Name, Plugin: noderesources.Name, Short: map[string]string{}}}
		for _, in := range insufficient {
			short := in.Requested + in.Used - in.Capacity
			n.Short[string(in.ResourceName)] = quantity(in.ResourceName, short)
			if in.Capacity > 0 {
				n.distance += float64(short) / float64(in.Capacity)
			} else {
				n.distance++
			}
		}
		nearest = append(nearest, n)
	}
	sort.SliceStable(nearest, func(i, j int) bool {
		if nearest[i].distance != nearest[j].distance {
			return nearest[i].distance < nearest[j].distance
		}
		return nearest[i].Node < nearest[j].Node
	})
	for i := 0; i < len(nearest) && i < int(pl.args.TopNodes); i++ {
		r.Nearest = append(r.Nearest, nearest[i].Nearest)
	}
	r.Rejections = rej.list()
	pl.redact(r, nodes, nil)
	return r, nil
}

// quantity formats an amount of resource as the API does.
func quantity(name v1.ResourceName, v int64) string {
	switch name {
	case v1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	default:
		return resource.NewQuantity(v, resource.DecimalSI).String()
	}
}

// redact, with redactNodes, replaces the names of the snapshot's nodes not
// kept (the pod's own node, if placed) everywhere in the result: in the
// reasons (every occurrence, see redactWords), the top nodes and the nearest
// nodes.
func (pl *Explain) redact(r *Result, nodes []fwk.NodeInfo, keep sets.Set[string]) {
	if !pl.args.RedactNodes {
		return
	}
	names := make(sets.Set[string], len(nodes))
	for _, ni := range nodes {
		if n := ni.Node().Name; !keep.Has(n) {
			names.Insert(n)
		}
	}
	for i := range r.Rejections {
		for j := range r.Rejections[i].Reasons {
			rc := &r.Rejections[i].Reasons[j]
			rc.Reason = redactWords(rc.Reason, names)
		}
	}
	if r.Placed != nil {
		for i := range r.Placed.Top {
			if names.Has(r.Placed.Top[i].Node) {
				r.Placed.Top[i].Node = redacted
			}
		}
	}
	for i := range r.Nearest {
		if names.Has(r.Nearest[i].Node) {
			r.Nearest[i].Node = redacted
		}
	}
}

// redactWords replaces every occurrence in s of one of names. A name is
// matched as a whole: a run of the characters node names are made of
// (lower-case letters, digits, '-', '.': DNS-1123), or a part of such a run between dots, so
// that "node=gpu-1", "nodes/gpu-1/" and "gpu-1." lose the name while gpu-10
// keeps its own; at each part the longest name wins (a dotted name is
// replaced whole). Everything else in s is kept.
func redactWords(s string, names sets.Set[string]) string {
	nameChar := func(c byte) bool {
		return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.'
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !nameChar(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && nameChar(s[j]) {
			j++
		}
		b.WriteString(redactRun(s[i:j], names))
		i = j
	}
	return b.String()
}

// redactRun is redactWords for one run of name characters.
func redactRun(run string, names sets.Set[string]) string {
	if names.Has(run) {
		return redacted
	}
	if !strings.Contains(run, ".") {
		return run
	}
	parts := strings.Split(run, ".")
	out := make([]string, 0, len(parts))
	for i := 0; i < len(parts); {
		next := i + 1
		part := parts[i]
		for j := len(parts); j > i; j-- {
			if names.Has(strings.Join(parts[i:j], ".")) {
				next, part = j, redacted
				break
			}
		}
		out = append(out, part)
		i = next
	}
	return strings.Join(out, ".")
}

// summarizePlaced is the event's one line: the winner's margin over the
// runner-up and the plugins that made it.
func summarizePlaced(r *Result) string {
	if r.PodGroup != "" {
		return summarizeOnePlacement(r) + "; placed with its pod group " + r.PodGroup + ", the members before it counted"
	}
	return summarizeOnePlacement(r)
}

func summarizeOnePlacement(r *Result) string {
	p := r.Placed
	if !p.Scored {
		return fmt.Sprintf("placed on %s: %s (%d of %d nodes feasible)", p.Node, p.NotScored, p.Feasible, r.Nodes)
	}
	head := fmt.Sprintf("placed on %s, rank %d of %d scored (%d of %d nodes feasible)", p.Node, p.Rank, p.ScoredNodes, p.Feasible, r.Nodes)
	var win, next *NodeScore
	for i := range p.Top {
		switch {
		case p.Top[i].Node == p.Node:
			win = &p.Top[i]
		case next == nil:
			next = &p.Top[i]
		}
	}
	if win == nil || next == nil {
		return head
	}
	type diff struct {
		plugin string
		d      int64
	}
	var diffs []diff
	for name, v := range win.Plugins {
		if d := v - next.Plugins[name]; d != 0 {
			diffs = append(diffs, diff{name, d})
		}
	}
	sort.Slice(diffs, func(i, j int) bool {
		if a, b := abs(diffs[i].d), abs(diffs[j].d); a != b {
			return a > b
		}
		return diffs[i].plugin < diffs[j].plugin
	})
	parts := make([]string, 0, 3)
	for i := 0; i < len(diffs) && i < 3; i++ {
		parts = append(parts, fmt.Sprintf("%s %+d", diffs[i].plugin, diffs[i].d))
	}
	var rel string
	switch margin := win.Total - next.Total; {
	case margin > 0:
		rel = fmt.Sprintf("won by %d over %s", margin, next.Node)
	case margin == 0:
		rel = fmt.Sprintf("tied with %s (the scheduler picks among equal totals at random)", next.Node)
	default: // not ranked first (Note says why)
		rel = fmt.Sprintf("%d below %s", -margin, next.Node)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s: %s, equal on every plugin", head, rel)
	}
	return fmt.Sprintf("%s: %s: %s", head, rel, strings.Join(parts, ", "))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// summarizePending is the event's one line for a pod that fits nowhere.
func summarizePending(r *Result) string {
	parts := make([]string, 0, 3)
	for i := 0; i < len(r.Rejections) && i < 3; i++ {
		rj := r.Rejections[i]
		reason := ""
		if len(rj.Reasons) > 0 {
			reason = " (" + rj.Reasons[0].Reason + ")"
		}
		parts = append(parts, fmt.Sprintf("%s %d%s", rj.Plugin, rj.Nodes, reason))
	}
	s := fmt.Sprintf("fits none of %d nodes: %s", r.Nodes, strings.Join(parts, ", "))
	if len(r.Nearest) > 0 {
		n := r.Nearest[0]
		short := make([]string, 0, len(n.Short))
		for res, q := range n.Short {
			short = append(short, q+" "+res)
		}
		sort.Strings(short)
		s += fmt.Sprintf("; nearest %s: short %s", n.Node, strings.Join(short, ", "))
	}
	return s
}
