package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	utilstrings "k8s.io/utils/strings"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	spinformers "github.com/berth-scheduler/berth/internal/spclient/informers/externalversions"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

// Bounds of the invariants: how long a state may last before it is a
// violation. Generous on purpose (two cores run the whole cluster): a
// violation is a decision that stays wrong, not a slow one.
const (
	gangPartialBound = 45 * time.Second
	quotaMinBound    = 90 * time.Second
	// livenessBound counts leader time: the time some replica led (or
	// might have: one did not answer its scrape).
	livenessBound = 90 * time.Second
	// gangLivenessBound: a gang whose pending members fit the cluster's
	// free room and its quota's min whole is placed (leader time). Longer
	// than a pod's: its members wait for each other at Permit.
	gangLivenessBound  = 150 * time.Second
	explainBound       = 30 * time.Second
	orphanBound        = 120 * time.Second
	unconditionedBound = 120 * time.Second
	// refusalTTL is AdmissionFeedback's (manifests/examples/all-plugins.yaml
	// keeps the default).
	refusalTTL = 5 * time.Minute
	// refusalInFlight: a pod bound this long after a refusal was seen was
	// decided after it (2 s for the scheduler's informer, and
	// ConfirmBinder's default confirmTimeout, 5 s, which bounds the wait
	// for its per-node lock and confirmation before the bind).
	refusalInFlight = 7 * time.Second
	// settle: after an object's own spec change (its quota, its
	// PodGroup) the clocks of the checks that depend on it pause this long
	// (the scheduler learns of a change within a second or two).
	settle = 15 * time.Second
	// leaderlessBound: no replica leads for longer than this while the
	// replicas run is a violation (an outage fault holds the API away for
	// at most 30 s, a lease lasts 15 s, a replica restarts in seconds).
	leaderlessBound = 120 * time.Second
	// statusBound: an ElasticQuota's status.used equals one of the sums of
	// its namespace's active pods seen in the last statusBound.
	statusBound = 60 * time.Second
	// nodeGoneSlack: a bind observed this long after its node's deletion
	// was observed is a bind to a deleted node (the scheduler's informer
	// had that long to see the deletion).
	nodeGoneSlack = 10 * time.Second
	// backlogPods: a leader whose active queue holds more pods than this is
	// catching up (two cores run the cluster: it schedules a few dozen pods
	// a second under the soak). A pod in that queue waits its turn, which
	// is slowness, not a wrong decision: the clocks of the liveness oracles
	// (4, 3b, gang liveness, no PodScheduled condition) pause meanwhile,
	// and a pod forgotten outside the queue is judged once the queue is
	// short again (the drain makes it so). backlogBound: a leader that does
	// not catch up within this much of its own leadership is a violation (a
	// hot loop of retries would otherwise hide behind it). A new leader
	// starts its own count: it puts every pending pod in its active queue
	// and tries each once, which is the takeover's cost, not a failure to
	// catch up (with a fault every 20 s at 1,000 nodes, leaders changed
	// before their first pass ended and one count ran across many of
	// them).
	backlogPods  = 100
	backlogBound = 5 * time.Minute
	// backlogAcrossBound: however often the leader changes, a backlog no
	// leader ends within this much leader time is a violation (the
	// liveness oracles' clocks pause all the while).
	backlogAcrossBound = 3 * backlogBound
	// stallBound: a backlogged leader that makes no scheduling attempt
	// for this much leader time is stalled (an API outage costs the lease
	// within about 15 s; a slow API's attempts take seconds each).
	stallBound = time.Minute
	// backlogShort: a backlog ends when the queue has stayed short this
	// long (one short reading in a long backlog does not end it).
	backlogShort = 30 * time.Second
)

// violation is one broken invariant, with the objects involved.
type violation struct {
	At        float64  `json:"atSeconds"`
	Invariant string   `json:"invariant"`
	Message   string   `json:"message"`
	Objects   []string `json:"objects"`
}

// watcher checks the invariants from the API alone (informers on a direct
// connection, never the scheduler's memory). Every invariant is on all the
// time: an object is spared only within its own grace (its spec changed,
// it lost members), and bounds that need a scheduler running count leader
// time, so a fault can delay a verdict but never switch a check off. The
// meters say how much each invariant judged.
type watcher struct {
	start  time.Time
	client kubernetes.Interface
	pods   cache.Indexer
	nodes  cache.Indexer
	groups cache.Indexer
	// nativeGroups: Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1).
	nativeGroups cache.Indexer
	quotas       cache.Indexer
	pdbs         cache.Indexer

	mu sync.Mutex
	// violations, and the keys already reported (one report per episode).
	violations []violation
	reported   map[string]bool
	// first is closed at the first violation.
	first  chan struct{}
	meters map[string]*meter
	// lastCheck and dt: the previous check and the seconds since it.
	lastCheck time.Time
	dt        float64
	// leaderless: at the last check every running replica answered and
	// none led (a paused one counts as not leading), or the API server was
	// down; leaderlessFor is how long that has held, apiDown says the
	// latter.
	leaderless    bool
	leaderlessFor time.Duration
	apiDown       bool
	// backlogged: the leader's active queue held more than backlogPods at
	// the last check that read it; backlogFor: leader time since it last
	// stayed short for backlogShort; shortFor: how long it has been short.
	backlogged           bool
	backlogFor, shortFor time.Duration
	// term names the leader whose backlog is counted (replica and process
	// start); "" before the first. terms: every term seen (a paused leader
	// that resumes may say it leads until its lease's renewal fails: its
	// term does not come back). backlogAcross: the backlog across terms;
	// stalledFor: backlogged leader time with no attempt made, attempts
	// the term's count at the last reading (-1: none yet).
	term                      string
	terms                     map[string]bool
	backlogAcross, stalledFor time.Duration
	attempts                  float64
	// disturbed: faults that can cut a leader's work short (disturbance).
	disturbed spans
	// auditGaps: API server restarts, around which the audit log may
	// lack an event (1-overcommit/confirmed counts, does not judge).
	auditGaps spans
	// created and bound times per pod UID, for latency and liveness.
	firstSeen map[types.UID]time.Time
	boundAt   map[types.UID]time.Time
	latencies []time.Duration
	// refusals per controller UID and node: when each was seen.
	refusals     map[string][]time.Time
	refusedNodes map[string]time.Time
	refusalCount int
	// groupLoss: when a PodGroup last lost a placed member (preemption,
	// node loss, a deletion); quotaChanged, groupChanged: when a quota's
	// (by namespace) or a PodGroup's spec last changed.
	groupLoss    map[string]time.Time
	partialSince map[string]time.Time
	quotaChanged map[string]time.Time
	groupChanged map[string]time.Time
	// groupRaced: when the foreign binder last bound beside a waiting
	// member of a PodGroup; foreignPins, foreignOverruns: its bindings, and
	// overcommits its pods caused (foreign.go).
	groupRaced                   map[string]time.Time
	foreignPins, foreignOverruns int
	// readLatencies: the API's latency for ConfirmBinder's reads, as the
	// foreign binder timed them (foreign.go's race window); maxLatency the
	// slowest.
	readLatencies []latencySample
	maxLatency    time.Duration
	// delays: the replicas' path delayed (slow-api, leader-partition:
	// foreign.go's race window, AdmissionFeedback's in-flight pods);
	// raceVerdicts: whether a Berth pod's overcommit beside a foreign pod
	// was a race, and why not, once decided (foreignOverrun).
	delays       []delaySpan
	raceVerdicts map[types.UID]raceVerdict
	// foreignStored: when each foreign pod's create returned; audit: the
	// API server's audit log of the replicas' LISTs and bindings (nil
	// without one).
	foreignStored map[types.UID]time.Time
	audit         *auditTrail
	// pins: raced members, to the node raced; what became of them once
	// bound (foreignRaces: bound within the race window); nominatedSince:
	// when an unbound pod's nominated node was first seen.
	pins                              map[types.UID]string
	foreignSameNode, foreignElsewhere int
	foreignRaces                      int
	nominatedSince                    map[types.UID]time.Time
	nominationEnded                   map[types.UID]time.Time
	// nodeGone: when the deletion of a node was observed.
	nodeGone map[string]time.Time
	// gone keeps deleted pods a while: an eviction's event arrives after
	// its victim left.
	gone map[types.UID]gonePod
	// usedHistory: each quota namespace's active requests at recent
	// checks, for the status.used invariant.
	usedHistory map[string][]usedSample
	// t: how long each state a bound applies to has held.
	t *timers
	// created, bound, deleted counts; what KWOK's kubelets did: pods
	// Running, Succeeded, Failed (crashes), graceful deletions finished.
	podsCreated, podsBound, podsDeleted    int
	podsRunning, podsSucceeded, podsFailed int
	gracefulDeletions                      int
	evictions, pdbEvictions                int
	// budgetRefusals: Explain's per-pod refusals over its budget, read
	// from the replicas' logs (nil: none read).
	budgetRefusals *refusals
	// queueFor: queue time without a break, to the last check.
	queueFor time.Duration
	// unjudgedEvictions: the evictions 8 did not judge, by why.
	unjudgedEvictions           map[string]int
	reclaims, reclaimsByHistory int
	victims                     []victimRecord
	evictionQueue               []evictionEvent
	seenRunning                 map[types.UID]bool
}

type gonePod struct {
	pod *v1.Pod
	at  time.Time
}

type usedSample struct {
	at time.Time
	// used: active pods not being deleted; all: every active pod.
	used, all v1.ResourceList
}

func newWatcher(ctx context.Context, c kubernetes.Interface, sp versioned.Interface) (*watcher, error) {
	w := &watcher{
		start: time.Now(), client: c, reported: map[string]bool{}, meters: map[string]*meter{}, first: make(chan struct{}),
		firstSeen: map[types.UID]time.Time{}, boundAt: map[types.UID]time.Time{},
		refusals: map[string][]time.Time{}, refusedNodes: map[string]time.Time{},
		groupLoss: map[string]time.Time{}, partialSince: map[string]time.Time{}, groupRaced: map[string]time.Time{},
		pins: map[types.UID]string{}, raceVerdicts: map[types.UID]raceVerdict{}, foreignStored: map[types.UID]time.Time{}, nominatedSince: map[types.UID]time.Time{}, nominationEnded: map[types.UID]time.Time{},
		quotaChanged: map[string]time.Time{}, groupChanged: map[string]time.Time{}, unjudgedEvictions: map[string]int{},
		nodeGone: map[string]time.Time{}, gone: map[types.UID]gonePod{}, usedHistory: map[string][]usedSample{},
		t: newTimers(), seenRunning: map[types.UID]bool{},
	}
	f := informers.NewSharedInformerFactory(c, 0)
	podInf := f.Core().V1().Pods().Informer()
	nodeInf := f.Core().V1().Nodes().Informer()
	pdbInf := f.Policy().V1().PodDisruptionBudgets().Informer()
	// Preemption's events name the preemptor (upstream's executor:
	// reason Preempted, "Preempted by pod <uid> on node <node>").
	ef := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=Preempted"
	}))
	eventInf := ef.Core().V1().Events().Informer()
	sf := spinformers.NewSharedInformerFactory(sp, 0)
	groupInf := sf.Scheduling().V1alpha1().PodGroups().Informer()
	nativeInf := f.Scheduling().V1beta1().PodGroups().Informer()
	quotaInf := sf.Scheduling().V1alpha1().ElasticQuotas().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.podChanged(nil, o.(*v1.Pod)) },
		UpdateFunc: func(old, o any) { w.podChanged(old.(*v1.Pod), o.(*v1.Pod)) },
		DeleteFunc: w.podDeleted,
	}); err != nil {
		return nil, err
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: w.nodeDeleted}); err != nil {
		return nil, err
	}
	if _, err := eventInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { w.preempted(o.(*v1.Event)) }}); err != nil {
		return nil, err
	}
	// A PodGroup's creation starts no grace (its bounds count from it); a
	// quota's does (the scheduler may have decided a bind by none).
	specHandler := func(changed map[string]time.Time, byNamespace, onAdd bool, prefix string) cache.ResourceEventHandlerFuncs {
		note := func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			m, ok := o.(metav1.Object)
			if !ok {
				return
			}
			key := m.GetNamespace() + "/" + prefix + m.GetName()
			if byNamespace {
				key = m.GetNamespace()
			}
			w.mu.Lock()
			changed[key] = time.Now()
			w.mu.Unlock()
		}
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if onAdd {
					note(o)
				}
			},
			UpdateFunc: func(old, o any) {
				if old.(metav1.Object).GetGeneration() != o.(metav1.Object).GetGeneration() {
					note(o)
				}
			},
			DeleteFunc: note,
		}
	}
	if _, err := groupInf.AddEventHandler(specHandler(w.groupChanged, false, false, "")); err != nil {
		return nil, err
	}
	if _, err := nativeInf.AddEventHandler(specHandler(w.groupChanged, false, false, nativePrefix)); err != nil {
		return nil, err
	}
	if _, err := quotaInf.AddEventHandler(specHandler(w.quotaChanged, true, true, "")); err != nil {
		return nil, err
	}
	w.pods, w.nodes, w.groups, w.quotas, w.pdbs = podInf.GetIndexer(), nodeInf.GetIndexer(), groupInf.GetIndexer(), quotaInf.GetIndexer(), pdbInf.GetIndexer()
	w.nativeGroups = nativeInf.GetIndexer()
	f.Start(ctx.Done())
	ef.Start(ctx.Done())
	sf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced, pdbInf.HasSynced, eventInf.HasSynced, groupInf.HasSynced, nativeInf.HasSynced, quotaInf.HasSynced) {
		return nil, fmt.Errorf("the watcher's informers did not sync")
	}
	return w, nil
}

func (w *watcher) elapsed() float64 { return time.Since(w.start).Seconds() }

// violate records a violation once per key (an episode).
func (w *watcher) violate(key, invariant, msg string, objects ...string) {
	if w.reported[key] {
		return
	}
	w.reported[key] = true
	if len(w.violations) == 0 {
		close(w.first)
	}
	v := violation{At: w.elapsed(), Invariant: invariant, Message: msg, Objects: objects}
	w.violations = append(w.violations, v)
	fmt.Printf("VIOLATION [%s] at %.0fs: %s (%s)\n", invariant, v.At, msg, strings.Join(objects, ", "))
}

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// active: counted by the kubelet on its node (terminating pods too).
func active(p *v1.Pod) bool { return p.Spec.NodeName != "" && !terminal(p) }

func isRefusal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && (p.Status.Reason == sandbox.ReasonUnexpectedAdmissionError || strings.HasPrefix(p.Status.Reason, "OutOf"))
}

func (w *watcher) podChanged(old, p *v1.Pod) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if old == nil {
		if _, seen := w.firstSeen[p.UID]; !seen {
			w.firstSeen[p.UID] = now
			w.podsCreated++
		}
	}
	w.nominated(old, p)
	if p.Spec.NodeName != "" {
		if _, ok := w.boundAt[p.UID]; !ok {
			w.boundAt[p.UID] = now
			w.podsBound++
			w.pinnedBound(p)
			if cond := scheduledCondition(p); cond != nil && cond.Status == v1.ConditionTrue {
				w.latencies = append(w.latencies, cond.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
			w.checkQuotaMaxLocked(p, now)
			// 7. No bind to a node whose deletion the scheduler could
			// have seen.
			// The bind's time is the API server's (PodScheduled True),
			// not when this informer delivered it.
			gone, deleted := w.nodeGone[p.Spec.NodeName]
			cond := scheduledCondition(p)
			judged := cond != nil && cond.Status == v1.ConditionTrue
			w.event("7-nothing-lost/bound-to-deleted-node", string(p.UID), judged)
			if judged && deleted && cond.LastTransitionTime.Sub(gone) > nodeGoneSlack {
				w.violate("bound-to-deleted/"+string(p.UID), "7-nothing-lost",
					fmt.Sprintf("pod %s/%s bound to node %s %.0fs after the node's deletion was observed", p.Namespace, p.Name, p.Spec.NodeName, cond.LastTransitionTime.Sub(gone).Seconds()),
					"pod "+p.Namespace+"/"+p.Name, "node "+p.Spec.NodeName)
			}
		}
	}
	if p.Status.Phase == v1.PodRunning && !w.seenRunning[p.UID] {
		w.seenRunning[p.UID] = true
		w.podsRunning++
	}
	if old != nil && old.Status.Phase != p.Status.Phase {
		switch {
		case p.Status.Phase == v1.PodSucceeded:
			w.podsSucceeded++
		case p.Status.Phase == v1.PodFailed && !isRefusal(p):
			w.podsFailed++
		}
	}
	if isRefusal(p) && (old == nil || !isRefusal(old)) {
		w.refusalCount++
		ref := metav1.GetControllerOf(p)
		if ref != nil {
			key := string(ref.UID) + "|" + p.Spec.NodeName
			// Only a pod decided after an earlier refusal was visible
			// counts: a refusing node looks empty to every scheduler, and
			// a pod decided before is in flight until it is bound, which
			// ConfirmBinder's per-node confirmation (its lock and checks,
			// within confirmTimeout) can make seconds later. A pod bound
			// while the replicas' path was slowed is not judged.
			bound, ok := w.boundAt[p.UID]
			w.event("5-admission-feedback", string(p.UID), ok && !w.slowAt(bound))
			for _, t := range w.refusals[key] {
				if ok && bound.After(t.Add(refusalInFlight)) && !w.slowAt(bound) && now.Sub(t) < refusalTTL {
					w.violate("refusal/"+key+"/"+string(p.UID), "5-admission-feedback",
						fmt.Sprintf("a second refusal of %s %s's pods by node %s %.0fs after the last, within the refusal TTL (%s)", ref.Kind, ref.Name, p.Spec.NodeName, now.Sub(t).Seconds(), refusalTTL),
						"pod "+p.Namespace+"/"+p.Name, "node "+p.Spec.NodeName)
				}
			}
			w.refusals[key] = append(w.refusals[key], now)
		}
		w.refusedNodes[p.Spec.NodeName] = now
	}
	// A gang loses a placed member when it is deleted or fails; one that
	// completes stays placed (the partial-gang check counts it).
	if g := gangKey(p); g != "" && old != nil && active(old) &&
		(p.DeletionTimestamp != nil && old.DeletionTimestamp == nil || p.Status.Phase == v1.PodFailed) {
		w.groupLoss[g] = now
	}
}

func (w *watcher) nodeDeleted(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if n, ok := o.(*v1.Node); ok {
		w.mu.Lock()
		w.nodeGone[n.Name] = time.Now()
		w.mu.Unlock()
	}
}

func (w *watcher) podDeleted(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*v1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.podsDeleted++
	if p.DeletionTimestamp != nil && p.Spec.NodeName != "" && ptr.Deref(p.Spec.TerminationGracePeriodSeconds, 0) > 0 {
		w.gracefulDeletions++
	}
	delete(w.seenRunning, p.UID)
	if g := gangKey(p); g != "" && p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded {
		w.groupLoss[g] = time.Now()
	}
	delete(w.firstSeen, p.UID)
	delete(w.nominatedSince, p.UID)
	delete(w.nominationEnded, p.UID)
	delete(w.raceVerdicts, p.UID)
	delete(w.foreignStored, p.UID)
	delete(w.pins, p.UID)
	w.gone[p.UID] = gonePod{pod: p, at: time.Now()}
}

func scheduledCondition(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podRequests(p *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// nodeUse is what the kubelet of a node counts: requests of its active
// pods, their number and their host ports; and the CPU they use, as KWOK's
// kubelet reports it (a pod's usage annotation, 1m without one).
type nodeUse struct {
	req      v1.ResourceList
	pods     int
	ports    map[string][]string
	names    []string
	cpuUsage int64 // millicores
}

// hotShare: a node whose pods use more than this share of its CPU may be
// one LoadAware's filter (threshold 80 %, on metrics-server's samples,
// which lag) rejects: the liveness oracles do not count it as fitting.
const hotShare = 0.6

// podCPUUsage is what KWOK's kubelet reports a pod uses, in millicores.
func podCPUUsage(p *v1.Pod) int64 {
	if a, ok := p.Annotations[sandbox.UsageCPUAnnotation]; ok {
		if q, err := resource.ParseQuantity(a); err == nil {
			return q.MilliValue()
		}
	}
	return 1
}

func (w *watcher) usage() map[string]*nodeUse {
	use := map[string]*nodeUse{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if !active(p) {
			continue
		}
		u := use[p.Spec.NodeName]
		if u == nil {
			u = &nodeUse{req: v1.ResourceList{}, ports: map[string][]string{}}
			use[p.Spec.NodeName] = u
		}
		addTo(u.req, podRequests(p))
		u.cpuUsage += podCPUUsage(p)
		u.pods++
		u.names = append(u.names, p.Namespace+"/"+p.Name)
		for _, k := range hostPorts(p) {
			u.ports[k] = append(u.ports[k], p.Namespace+"/"+p.Name)
		}
	}
	return use
}

func addTo(dst, src v1.ResourceList) {
	for k, q := range src {
		cur := dst[k]
		cur.Add(q)
		dst[k] = cur
	}
}

// check runs every invariant once. leader names the replica (and its
// process start) that said it leads, "" if none did; known: every running
// replica answered its scrape.
// active is the leader's active queue, or -1 when no leader answered its
// scrape (a starved leader: the last reading stands).
func (w *watcher) check(leader string, known bool, active, attempts float64) {
	leads := leader != ""
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !w.lastCheck.IsZero() {
		w.dt = now.Sub(w.lastCheck).Seconds()
	}
	w.lastCheck = now
	w.t.next()
	if w.budgetRefusals != nil {
		w.budgetRefusals.read(now)
		w.budgetRefusals.sweep(func(id string) bool {
			_, ok, _ := w.pods.GetByKey(id)
			return ok
		})
	}
	if w.audit != nil {
		if err := w.audit.read(); err != nil && !w.reported["audit-read"] {
			w.reported["audit-read"] = true
			logf("watcher: reading the audit log: %v (overcommits beside foreign pods are judged by the time window)", err)
		}
		w.checkConfirmed(false)
	}
	// No replica leads, or the API server is down (a restart: nothing can
	// be scheduled, and scrapes fail as its authorization does).
	w.leaderless = known && !leads || w.apiDown
	// 9. Some replica leads: a cluster without a leader schedules nothing.
	if w.leaderless {
		w.leaderlessFor += time.Duration(w.dt * float64(time.Second))
	} else {
		w.leaderlessFor = 0
	}
	w.observe("9-leadership/leader", "lease", true)
	if w.leaderlessFor > leaderlessBound {
		w.violate(fmt.Sprintf("leaderless/%d", int(now.Sub(w.start).Seconds())/int(leaderlessBound.Seconds())), "9-leadership",
			fmt.Sprintf("no replica has led for %.0fs", w.leaderlessFor.Seconds()))
	}
	for uid, g := range w.gone {
		if now.Sub(g.at) > 10*time.Minute {
			delete(w.gone, uid)
		}
	}
	lt := w.leaderTime()
	w.noteQueue(lt, time.Duration(w.dt*float64(time.Second)), active, leader, attempts)
	w.observe("9-leadership/backlog", "queue", lt)
	if w.backlogFor > backlogBound {
		w.violate(fmt.Sprintf("backlog/%d", int(now.Sub(w.start).Seconds())/int(backlogBound.Seconds())), "9-leadership",
			fmt.Sprintf("the leader's active queue has held more than %d pods for %.0fs of its leadership (%.0f now): it does not catch up", backlogPods, w.backlogFor.Seconds(), active))
	}
	if w.backlogAcross > backlogAcrossBound {
		w.violate(fmt.Sprintf("backlog-across/%d", int(now.Sub(w.start).Seconds())/int(backlogAcrossBound.Seconds())), "9-leadership",
			fmt.Sprintf("the leaders' active queue has held more than %d pods for %.0fs of leader time across leader changes: none catches up", backlogPods, w.backlogAcross.Seconds()))
	}
	if w.stalledFor > stallBound {
		w.violate(fmt.Sprintf("stalled/%d", int(now.Sub(w.start).Seconds())/int(stallBound.Seconds())), "9-leadership",
			fmt.Sprintf("the leader (%s) has made no scheduling attempt for %.0fs of leader time with %.0f pods in its active queue: it is stalled", w.term, w.stalledFor.Seconds(), active))
	}
	qt := w.queueTime()
	if qt {
		w.queueFor += time.Duration(w.dt * float64(time.Second))
	} else {
		w.queueFor = 0
	}
	for _, inv := range []string{"1-overcommit", "3-quota/status", "7-nothing-lost/orphan", "9-leadership/leader"} {
		w.tick(inv, true)
	}
	for _, inv := range []string{"2-gang", "6-explain", "9-leadership/backlog"} {
		w.tick(inv, lt)
	}
	for _, inv := range []string{"2-gang/liveness", "3-quota/min", "4-liveness", "7-nothing-lost/unconditioned"} {
		w.tick(inv, qt)
	}
	use := w.usage()
	nodes := map[string]*v1.Node{}
	for _, o := range w.nodes.List() {
		n := o.(*v1.Node)
		nodes[n.Name] = n
	}
	w.checkOvercommit(nodes, use)
	w.checkGangs(now)
	// The oracles of liveness and reclaim count a pending pod nominated to
	// a node (a preemptor waiting for its victims to leave) as using it:
	// the scheduler keeps that room for it.
	planned := w.withNominated(use)
	w.checkPods(now, nodes, planned)
	w.checkQuotaMin(now, nodes, planned)
	w.checkQuotaStatus(now)
	w.checkGangLiveness(now, nodes, planned)
	w.judgeEvictions(now)
	keep := w.victims[:0]
	for _, v := range w.victims {
		if now.Sub(v.at) < 10*time.Minute {
			keep = append(keep, v)
		}
	}
	w.victims = keep
}

// disturbance marks a fault that can cut a leader's work short (a kill, a
// pause, a partition, a slow API, an outage, an API server or etcd
// restart) beginning or ending; an end counts for linger more (the
// leader's in-flight work). Scheduling state a fault leaves behind (a gang
// bound in part by a leader cut off mid-binding, a pod bound after
// Explain's write timed out, which its README documents) is spared by the
// invariants it would trip, per object: by when that object's state began.
func (w *watcher) disturbance(begins bool, linger time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.disturbed.mark(begins, time.Now(), disturbanceLinger+linger)
}

// disturbanceLinger: a fault's effects on in-flight work last this long
// after it ends.
const disturbanceLinger = 10 * time.Second

// disturbedAt: t fell within a disturbance (or its linger).
func (w *watcher) disturbedAt(t time.Time) bool { return w.disturbed.at(t, time.Second) }

// spans records periods that faults open and close, overlapping ones
// merged: open counts those under way since from; done are the ended ones.
type spans struct {
	open int
	from time.Time
	done [][2]time.Time
}

// mark opens a span, or closes one; the last to close ends the merged span
// linger after now.
func (s *spans) mark(begins bool, now time.Time, linger time.Duration) {
	if begins {
		if s.open == 0 {
			s.from = now
		}
		s.open++
		return
	}
	if s.open > 0 {
		s.open--
	}
	if s.open == 0 {
		s.done = append(s.done, [2]time.Time{s.from, now.Add(linger)})
	}
}

// at reports whether t fell within a span, counting lead before its start.
func (s *spans) at(t time.Time, lead time.Duration) bool {
	if s.open > 0 && !t.Before(s.from.Add(-lead)) {
		return true
	}
	for _, d := range s.done {
		if !t.Before(d[0].Add(-lead)) && !t.After(d[1]) {
			return true
		}
	}
	return false
}

// auditGap marks an API server restart beginning or ending.
func (w *watcher) auditGap(begins bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.auditGaps.mark(begins, time.Now(), disturbanceLinger)
}

// checkConfirmed: 1. every binding a replica made was confirmed (the
// profile's ConfirmBinder runs with the chart's confirm: Always): the
// audit log has that replica's LIST of the node's pods answered before the
// binding and after its previous binding onto the node. Outcome checks
// (1's overcommit beside a foreign pod) need a race the workload may not
// make; an unconfirmed binding is what would let one through, and shows
// at every binding. Bindings around an API server restart (whose audit
// log may lack an event) are counted, not judged. all: the run is over,
// every binding read is judged (see finalConfirmed).
func (w *watcher) checkConfirmed(all bool) {
	for _, b := range w.audit.settled(all) {
		key := "confirmed/" + string(b.uid)
		judged := !w.auditGaps.at(b.received, 5*time.Second)
		w.event("1-overcommit/confirmed", key, judged)
		if !judged {
			continue
		}
		if _, why := w.audit.confirmation(b); why != "" {
			id := string(b.uid)
			if p := w.podByUID(b.uid, "", ""); p != nil {
				id = p.Namespace + "/" + p.Name
			}
			w.violate(key, "1-overcommit", fmt.Sprintf("pod %s %s", id, why), "pod "+id, "node "+b.node)
		}
	}
}

// finalConfirmed reads the audit log to its end once the run is over and
// judges the bindings not yet judged (the last ones have no later answer
// to settle them).
func (w *watcher) finalConfirmed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.audit == nil {
		return
	}
	if err := w.audit.read(); err != nil {
		logf("watcher: reading the audit log: %v", err)
	}
	w.checkConfirmed(true)
}

// setAPIDown marks an API server or etcd restart under way.
func (w *watcher) setAPIDown(down bool) {
	w.mu.Lock()
	w.apiDown = down
	w.mu.Unlock()
}

// noteQueue follows the leader's backlog over dt (lt: some replica led):
// active is its active queue, or -1 when unread (the last reading stands),
// leader the replica that said it leads ("": none answered), attempts the
// scheduling attempts it has made (-1: unread). A backlog lasts from the
// first long reading until the queue has stayed short for backlogShort; a
// leader's own count (backlogFor) starts anew when another leader takes
// over, the count across leaders (backlogAcross) does not, and a
// backlogged leader whose attempts do not grow is stalling (stalledFor).
func (w *watcher) noteQueue(lt bool, dt time.Duration, active float64, leader string, attempts float64) {
	if leader != "" && leader != w.term && !w.terms[leader] {
		if w.terms == nil {
			w.terms = map[string]bool{}
		}
		w.terms[leader] = true
		w.term = leader
		w.backlogFor, w.stalledFor, w.attempts = 0, 0, -1
	}
	if active >= 0 && (leader == "" || leader == w.term) {
		// (a leader that lost its term, resumed from a pause, may answer
		// first: its queue is not the leader's)
		w.backlogged = active > backlogPods
	}
	// A term's first reading progresses (its count starts at -1).
	read := leader == w.term && attempts >= 0
	progressed := read && attempts > w.attempts
	if read {
		w.attempts = attempts
	}
	switch {
	case !lt:
		// No leader: the backlog neither grows nor ends.
	case w.backlogged:
		w.backlogFor += dt
		w.backlogAcross += dt
		w.shortFor = 0
		if progressed {
			w.stalledFor = 0
		} else if read {
			w.stalledFor += dt
		}
	case w.backlogFor > 0 || w.backlogAcross > 0:
		w.backlogFor += dt
		w.backlogAcross += dt
		w.stalledFor = 0
		if w.shortFor += dt; w.shortFor >= backlogShort {
			w.backlogFor, w.backlogAcross, w.shortFor = 0, 0, 0
		}
	default:
		w.stalledFor = 0
	}
}

// leaderTime: the bounds that need a scheduler count this check's seconds.
func (w *watcher) leaderTime() bool { return !w.leaderless }

// caughtUpFor: how long, to the last check, a leader has run without a
// backlog (queue time without a break).
func (w *watcher) caughtUpFor() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queueFor
}

// queueTime: the bounds of the liveness oracles count this check's seconds
// (a leader that is not catching up on a backlog).
func (w *watcher) queueTime() bool { return !w.leaderless && !w.backlogged }

// withNominated is use plus the requests of pending pods nominated to each
// node.
func (w *watcher) withNominated(use map[string]*nodeUse) map[string]*nodeUse {
	out := make(map[string]*nodeUse, len(use))
	for name, u := range use {
		out[name] = u
	}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		n := p.Status.NominatedNodeName
		if n == "" || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) {
			continue
		}
		u := &nodeUse{req: v1.ResourceList{}, ports: map[string][]string{}}
		if cur := out[n]; cur != nil {
			u.req, u.pods, u.ports, u.cpuUsage = cur.req.DeepCopy(), cur.pods, cur.ports, cur.cpuUsage
		}
		addTo(u.req, podRequests(p))
		u.pods++
		out[n] = u
	}
	return out
}

// 1. No node overcommitted by the kubelet's rule.
func (w *watcher) checkOvercommit(nodes map[string]*v1.Node, use map[string]*nodeUse) {
	for name, u := range use {
		n := nodes[name]
		if n == nil {
			continue
		}
		w.observe("1-overcommit", name, true)
		for r, q := range u.req {
			alloc, ok := n.Status.Allocatable[r]
			if q.IsZero() {
				continue
			}
			if !ok || q.Cmp(alloc) > 0 {
				foreign, who, later := w.foreignOverrun(name, r, alloc)
				if later {
					continue // judged once the reads around its binding are timed
				}
				if foreign {
					// Counted once per pod, not judged.
					key := "foreign-overrun/" + name + "/" + string(r) + "/" + who
					if !w.reported[key] {
						w.reported[key] = true
						if strings.HasSuffix(who, " (a race)") {
							w.foreignRaces++
						} else {
							w.foreignOverruns++
						}
					}
					continue
				}
				msg := fmt.Sprintf("node %s: %s requested %s, allocatable %s", name, r, q.String(), alloc.String())
				if who != "" {
					msg += "; " + who
				}
				w.violate("overcommit/"+name+"/"+string(r), "1-overcommit", msg,
					append([]string{"node " + name}, u.names...)...)
			}
		}
		if pods := n.Status.Allocatable.Pods(); int64(u.pods) > pods.Value() {
			w.violate("overcommit/"+name+"/pods", "1-overcommit", fmt.Sprintf("node %s: %d pods, allocatable %d", name, u.pods, pods.Value()), "node "+name)
		}
		for port, holders := range u.ports {
			if len(holders) > 1 {
				w.violate("overcommit/"+name+"/port/"+port, "1-overcommit", fmt.Sprintf("node %s: host port %s held by %d pods", name, port, len(holders)), holders...)
			}
		}
	}
}

// 2. A PodGroup never has between 1 and minMember-1 members placed (bound,
// or completed after being bound) for longer than gangPartialBound of
// leader time, unless it lost members since it was last whole (attrition,
// not the scheduler's doing) or its spec changed within settle.
func (w *watcher) checkGangs(now time.Time) {
	members := map[string][]*v1.Pod{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if g := gangKey(p); g != "" {
			members[g] = append(members[g], p)
		}
	}
	for _, pg := range w.gangs() {
		key := pg.key
		placed, live := 0, 0
		// never: a live member fits no node, so the gang could never have
		// been released whole.
		never := false
		var names []string
		for _, p := range members[key] {
			if p.DeletionTimestamp != nil || p.Status.Phase == v1.PodFailed {
				continue
			}
			live++
			never = never || p.Labels[fitsNoNodeLabel] != ""
			if p.Spec.NodeName != "" {
				placed++
				names = append(names, p.Name+"@"+p.Spec.NodeName)
			}
		}
		min := pg.min
		// A minMember above the members that exist (an edit raised it) can
		// never be met: upstream's rule then holds the members back.
		partial := placed > 0 && placed < min && min <= live
		if !partial {
			delete(w.partialSince, key)
			w.t.add("gang/"+key, false, false, 0)
			continue
		}
		since, ok := w.partialSince[key]
		if !ok {
			since = now
			w.partialSince[key] = now
		}
		// Its own grace, until it is whole or empty again: it lost a
		// member (attrition), or its spec changed (a minMember raised
		// over what was placed whole), since it was last not partial,
		// it became partial during a fault that cut a leader off while it
		// bound the gang (the next leader completes it if room allows).
		// Or the foreign binder took a waiting member's room: ConfirmBinder
		// refuses that member's binding after its gang was released, and
		// it finds another node (foreign.go).
		// A gang one of whose members fits no node was never releasable
		// (unless its min changed): only a spec change spares it.
		exempt := !w.groupChanged[key].Before(since.Add(-gangPartialBound)) || !never &&
			(!w.groupLoss[key].Before(since.Add(-gangPartialBound)) || !w.groupRaced[key].Before(since.Add(-gangPartialBound)) || w.disturbedAt(since))
		w.observe("2-gang", key, !exempt && w.leaderTime())
		if d := w.t.add("gang/"+key, !exempt, w.leaderTime(), w.dt); d > gangPartialBound {
			sort.Strings(names)
			w.violate("gang/"+key+"/"+since.String(), "2-gang",
				fmt.Sprintf("PodGroup %s: %d of min %d placed for %.0fs of leader time", key, placed, min, d.Seconds()),
				append([]string{"podgroup " + key}, names...)...)
		}
	}
}

// quotaOf is the namespace's ElasticQuota (the first, as the plugin takes one).
func (w *watcher) quotaOf(ns string) *schedv1alpha1.ElasticQuota {
	objs, _ := w.quotas.ByIndex(cache.NamespaceIndex, ns)
	if len(objs) == 0 {
		return nil
	}
	return objs[0].(*schedv1alpha1.ElasticQuota)
}

func (w *watcher) namespaceUse(ns string) v1.ResourceList {
	used := v1.ResourceList{}
	objs, _ := w.pods.ByIndex(cache.NamespaceIndex, ns)
	for _, o := range objs {
		if p := o.(*v1.Pod); active(p) {
			addTo(used, podRequests(p))
		}
	}
	return used
}

// 3a. No namespace's use exceeds its max: checked when a pod is bound,
// unless its quota changed in the 10 s before (the scheduler may have
// decided by the old one).
func (w *watcher) checkQuotaMaxLocked(p *v1.Pod, now time.Time) {
	q := w.quotaOf(p.Namespace)
	if q == nil {
		return
	}
	judged := now.Sub(w.quotaChanged[p.Namespace]) >= 10*time.Second
	w.event("3-quota/max", string(p.UID), judged)
	if !judged {
		return
	}
	used := w.namespaceUse(p.Namespace)
	for r, max := range q.Spec.Max {
		if u := used[r]; u.Cmp(max) > 0 {
			w.violate("quota-max/"+p.Namespace+"/"+string(p.UID), "3-quota",
				fmt.Sprintf("namespace %s uses %s %s after %s was bound, over its max %s", p.Namespace, u.String(), r, p.Name, max.String()),
				"pod "+p.Namespace+"/"+p.Name, "elasticquota "+q.Namespace+"/"+q.Name)
		}
	}
}

// fitsIn: req ≤ room for every resource req names.
func fitsIn(req, room v1.ResourceList) bool {
	for r, q := range req {
		if q.IsZero() {
			continue
		}
		have, ok := room[r]
		if !ok || q.Cmp(have) > 0 {
			return false
		}
	}
	return true
}

func sub(a, b v1.ResourceList) v1.ResourceList {
	out := a.DeepCopy()
	for r, q := range b {
		cur := out[r]
		cur.Sub(q)
		out[r] = cur
	}
	return out
}

// schedulable: Ready, not cordoned.
func schedulable(n *v1.Node) bool {
	return sandbox.NodeReady(n) && !n.Spec.Unschedulable
}

// eligible is the liveness oracle's node filter: the pod tolerates the
// node's taints, matches its selector and required affinity, is allowed by
// the CEL rule of all-plugins.yaml (GPU nodes only for GPU pods), and the
// node has not refused a pod in the last refusal TTL.
func (w *watcher) eligible(p *v1.Pod, n *v1.Node, now time.Time) bool {
	if !schedulable(n) {
		return false
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, p.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok {
		return false
	}
	if _, gpuNode := n.Labels[gpuLabel]; gpuNode && !wantsGPU(p) {
		return false
	}
	if t, ok := w.refusedNodes[n.Name]; ok && now.Sub(t) < refusalTTL {
		return false
	}
	return true
}

func wantsGPU(p *v1.Pod) bool {
	q := podRequests(p)[gpuResource]
	return !q.IsZero()
}

func (w *watcher) room(n *v1.Node, u *nodeUse) (v1.ResourceList, int64) {
	free := n.Status.Allocatable.DeepCopy()
	pods := n.Status.Allocatable.Pods().Value()
	if u != nil {
		free = sub(free, u.req)
		pods -= int64(u.pods)
	}
	return free, pods
}

// hot: the node's pods use more than hotShare of its CPU.
func hot(n *v1.Node, u *nodeUse) bool {
	alloc := n.Status.Allocatable[v1.ResourceCPU]
	return alloc.MilliValue() > 0 && float64(u.cpuUsage) > hotShare*float64(alloc.MilliValue())
}

// portTaken: a host port p asks for is held on the node.
func portTaken(u *nodeUse, p *v1.Pod) bool {
	for _, hp := range hostPorts(p) {
		if len(u.ports[hp]) > 0 {
			return true
		}
	}
	return false
}

// nodeWithRoom is an eligible node with room for req and at least minSlots
// free pod slots, counting extra[node] as free too (reclaimable requests);
// "" if none.
func (w *watcher) nodeWithRoom(p *v1.Pod, req v1.ResourceList, nodes map[string]*v1.Node, use map[string]*nodeUse, extra map[string]v1.ResourceList, minSlots int64, now time.Time) string {
	for name, n := range nodes {
		if !w.eligible(p, n, now) {
			continue
		}
		if u := use[name]; u != nil && (portTaken(u, p) || hot(n, u)) {
			continue
		}
		free, pods := w.room(n, use[name])
		if r := extra[name]; r != nil {
			addTo(free, r)
		}
		if pods >= minSlots && fitsIn(req, free) {
			return name
		}
	}
	return ""
}

// quotaView is what the quota oracles read in one check: each quota
// namespace's use (active pods and pending pods nominated to a node, as
// the plugin counts them) and the totals its borrowing rule compares.
type quotaView struct {
	used               map[string]v1.ResourceList
	totalUsed, totalMn v1.ResourceList
}

func (w *watcher) quotaView() *quotaView {
	v := &quotaView{used: map[string]v1.ResourceList{}, totalUsed: v1.ResourceList{}, totalMn: v1.ResourceList{}}
	for _, o := range w.quotas.List() {
		q := o.(*schedv1alpha1.ElasticQuota)
		if _, seen := v.used[q.Namespace]; seen {
			continue
		}
		v.used[q.Namespace] = v1.ResourceList{}
		addTo(v.totalMn, q.Spec.Min)
	}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		u := v.used[p.Namespace]
		if u == nil || terminal(p) || (p.Spec.NodeName == "" && (p.Status.NominatedNodeName == "" || p.DeletionTimestamp != nil)) {
			continue
		}
		req := podRequests(p)
		addTo(u, req)
		addTo(v.totalUsed, req)
	}
	return v
}

// admits is ElasticQuota's rule for req in ns: within max, and within min
// or within the unused min of all quotas together. A namespace without a
// quota is admitted (namespacesWithoutQuota: Unlimited).
func (w *watcher) admits(v *quotaView, ns string, req v1.ResourceList) bool {
	q := w.quotaOf(ns)
	if q == nil {
		return true
	}
	used := v.used[ns]
	for r, x := range req {
		if x.IsZero() {
			continue
		}
		after := used[r].DeepCopy()
		after.Add(x)
		if mx, ok := q.Spec.Max[r]; ok && after.Cmp(mx) > 0 {
			return false
		}
		if mn, ok := q.Spec.Min[r]; ok && after.Cmp(mn) > 0 {
			total := v.totalUsed[r].DeepCopy()
			total.Add(x)
			if total.Cmp(v.totalMn[r]) > 0 {
				return false
			}
		}
	}
	return true
}

// explained is the pod's Explain result, nil if none or unreadable.
func explained(p *v1.Pod) *explain.Result {
	raw := p.Annotations[explain.AnnotationResult]
	if raw == "" {
		return nil
	}
	r := &explain.Result{}
	if json.Unmarshal([]byte(raw), r) != nil {
		return nil
	}
	return r
}

// hostPorts are the host ports a pod asks for, as nodeUse keys them.
func hostPorts(p *v1.Pod) []string {
	var out []string
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					out = append(out, fmt.Sprintf("%s/%d", port.Protocol, port.HostPort))
				}
			}
		}
	}
	return out
}

// hasRequiredPodAffinity: the pod's placement depends on other pods
// (required pod affinity or anti-affinity), which the liveness oracle does
// not model: such pods are out of its scope.
func hasRequiredPodAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 ||
		a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)
}

// 4, 6, 7: per pod.
func (w *watcher) checkPods(now time.Time, nodes map[string]*v1.Node, use map[string]*nodeUse) {
	lt, qt := w.leaderTime(), w.queueTime()
	// members: the live members of each PodGroup (Coscheduling's count).
	members := map[string]int{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if g := gangKey(p); g != "" && p.DeletionTimestamp == nil && !terminal(p) {
			members[g]++
		}
	}
	qv := w.quotaView()
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		id := p.Namespace + "/" + p.Name
		uid := string(p.UID)
		if p.DeletionTimestamp != nil || terminal(p) {
			for _, k := range []string{"live/", "explain/", "explain-node/", "unconditioned/"} {
				w.t.add(k+uid, false, false, 0)
			}
			continue
		}
		// 7. No pod bound to a node that no longer exists (PodGC's job).
		if p.Spec.NodeName != "" {
			key := "orphan/" + uid
			w.observe("7-nothing-lost/orphan", uid, true)
			if d := w.t.add(key, nodes[p.Spec.NodeName] == nil, true, w.dt); d > orphanBound {
				w.violate(key, "7-nothing-lost", fmt.Sprintf("pod %s bound to node %s, which does not exist, for %.0fs", id, p.Spec.NodeName, d.Seconds()), "pod "+id)
			}
		}
		// 6. Every pod that asked has an explanation (a pending one
		// unless Explain logged its refusal over the budget), and a
		// bound pod's names the node it is bound to.
		if p.Annotations[explain.AnnotationRequest] == "true" {
			// A pod held before the queue (a scheduling gate, a
			// PreEnqueue plugin: PodScheduled False, SchedulingGated) has
			// had no scheduling cycle to explain.
			// A cycle that ended in an error (SchedulerError: a plugin's
			// Error, a fenced binding) decided nothing: Explain explains
			// decisions (placed, or unschedulable at PostFilter).
			if cond := scheduledCondition(p); cond != nil && cond.Reason != v1.PodReasonSchedulingGated && cond.Reason != v1.PodReasonSchedulerError {
				// A pod bound during a fault may have been bound after
				// Explain's write timed out (documented: the bind goes
				// on), and the next leader does not explain bound pods.
				// A pending pod Explain refused over its budget (its
				// replica logged it; documented) waits for its next
				// attempt. A bound pod refused at its Reserve still has a
				// result naming its node (placed, unexplained).
				judged := (cond.Status != v1.ConditionTrue || !w.disturbedAt(cond.LastTransitionTime.Time)) &&
					(cond.Status == v1.ConditionTrue || w.budgetRefusals == nil || !w.budgetRefusals.exempt(id, cond.Message, nativeMember(p), now))
				// A pending pod whose decision's explanation was lost
				// (with the leader that made it: its status write can
				// land after that leader is gone) is explained at its
				// next cycle, which waits its turn in the queue: its
				// clock counts queue time. A bound pod's was written
				// before its bind: leader time.
				clock := lt
				if cond.Status != v1.ConditionTrue {
					clock = qt
				}
				w.observe("6-explain", uid, judged && clock)
				r := explained(p)
				key := "explain/" + uid
				if d := w.t.add(key, judged && r == nil, clock, w.dt); d > explainBound {
					// The condition's reason and message say which
					// decision went unexplained (a PostFilter's, a
					// Permit rejection's, a failed binding's).
					w.violate(key, "6-explain", fmt.Sprintf("pod %s asked for an explanation and has none after %.0fs of leader (or, pending, queue) time (PodScheduled=%s since %s, %s: %q)", id, d.Seconds(), cond.Status,
						cond.LastTransitionTime.UTC().Format(time.TimeOnly), cond.Reason, utilstrings.ShortenString(cond.Message, 300)), "pod "+id)
				}
				wrong := r != nil && p.Spec.NodeName != "" && (r.Outcome != explain.OutcomePlaced || r.Placed == nil || r.Placed.Node != p.Spec.NodeName)
				key = "explain-node/" + uid
				if d := w.t.add(key, judged && wrong, lt, w.dt); d > explainBound {
					said := r.Outcome
					if r.Placed != nil {
						said += " on " + r.Placed.Node
					}
					w.violate(key, "6-explain", fmt.Sprintf("pod %s is bound to %s and its explanation says %s", id, p.Spec.NodeName, said), "pod "+id)
				}
			}
		}
		if p.Spec.NodeName != "" || p.Spec.SchedulerName != schedulerName {
			w.t.add("live/"+uid, false, false, 0)
			continue
		}
		// 7. Every pending pod has a reason (PodScheduled False) once
		// the scheduler had time to try it; a gang member Coscheduling
		// keeps out of the queue (no PodGroup, or fewer members than
		// minMember) is never tried, so it has none.
		held := w.heldBeforeQueue(p, members)
		w.observe("7-nothing-lost/unconditioned", uid, !held && qt)
		if d := w.t.add("unconditioned/"+uid, scheduledCondition(p) == nil && !held, qt, w.dt); d > unconditionedBound {
			w.violate("unconditioned/"+uid, "7-nothing-lost", fmt.Sprintf("pod %s pending %.0fs of queue time with no PodScheduled condition", id, d.Seconds()), "pod "+id)
		}
		// 4. Liveness: a pod that is no gang's member and depends on no
		// other pod, which its quota admits, is bound when a node fits
		// it; gated pods wait for their gates.
		key := "live/" + uid
		req := podRequests(p)
		if gangKey(p) != "" || hasRequiredPodAffinity(p) || len(p.Spec.SchedulingGates) > 0 || !w.admits(qv, p.Namespace, req) {
			w.t.add(key, false, false, 0)
			continue
		}
		fits := w.nodeWithRoom(p, req, nodes, use, nil, 1, now)
		if fits != "" {
			w.observe("4-liveness", uid, qt)
		}
		if d := w.t.add(key, fits != "", qt, w.dt); d > livenessBound {
			w.violate(key, "4-liveness", fmt.Sprintf("pod %s pending %.0fs of queue time while node %s fits it (requests %s)", id, d.Seconds(), fits, resources(req)), "pod "+id, "node "+fits)
		}
	}
}

// heldBeforeQueue: a gang member whose PodGroup does not exist or has fewer
// live members than its min (Coscheduling's and GangScheduling's PreEnqueue
// hold it).
func (w *watcher) heldBeforeQueue(p *v1.Pod, members map[string]int) bool {
	key := gangKey(p)
	if key == "" {
		return false
	}
	g, ok := w.gangOf(p)
	if !ok {
		return true
	}
	return members[key] < g.min
}

// 3b. A namespace below its min with a pending pod that fits its min gets
// it within quotaMinBound, where reclaim can make room: some node's free
// room plus what borrowers (namespaces above their min) hold there fits it.
func (w *watcher) checkQuotaMin(now time.Time, nodes map[string]*v1.Node, use map[string]*nodeUse) {
	lt := w.queueTime()
	// used: each quota namespace's use; staying: the same without pods
	// being deleted (the plugin's borrowing test subtracts those).
	used, staying := map[string]v1.ResourceList{}, map[string]v1.ResourceList{}
	for _, o := range w.quotas.List() {
		q := o.(*schedv1alpha1.ElasticQuota)
		used[q.Namespace] = w.namespaceUse(q.Namespace)
		staying[q.Namespace] = v1.ResourceList{}
	}
	// The pods of quota namespaces per node, least important first (lower
	// priority, then started later), the order the plugin takes victims in.
	quotaPods := map[string]map[string][]quotaPod{} // node -> namespace -> pods
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if !active(p) || p.DeletionTimestamp != nil || used[p.Namespace] == nil {
			continue
		}
		req := podRequests(p)
		addTo(staying[p.Namespace], req)
		if quotaPods[p.Spec.NodeName] == nil {
			quotaPods[p.Spec.NodeName] = map[string][]quotaPod{}
		}
		qp := quotaPod{req: req, priority: corev1helpers.PodPriority(p), started: p.CreationTimestamp.Time}
		if p.Status.StartTime != nil {
			qp.started = p.Status.StartTime.Time
		}
		quotaPods[p.Spec.NodeName][p.Namespace] = append(quotaPods[p.Spec.NodeName][p.Namespace], qp)
	}
	for _, byNS := range quotaPods {
		for _, pods := range byNS {
			sort.SliceStable(pods, func(i, j int) bool {
				if pods[i].priority != pods[j].priority {
					return pods[i].priority < pods[j].priority
				}
				return pods[i].started.After(pods[j].started)
			})
		}
	}
	// What reclaim frees depends on the pending pod's namespace and the
	// resources it asks for: computed once per such pair in a check.
	cache := map[string]map[string]v1.ResourceList{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		key := "min/" + string(p.UID)
		q := w.quotaOf(p.Namespace)
		if q == nil || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) || gangKey(p) != "" ||
			hasRequiredPodAffinity(p) || len(p.Spec.SchedulingGates) > 0 {
			w.t.add(key, false, false, 0)
			continue
		}
		req := podRequests(p)
		if !fitsIn(req, sub(q.Spec.Min, used[p.Namespace])) {
			w.t.add(key, false, false, 0)
			continue
		}
		// Its own grace: its quota changed within settle.
		judged := now.Sub(w.quotaChanged[p.Namespace]) >= settle
		ck := p.Namespace + "|" + requested(req)
		extra, ok := cache[ck]
		if !ok {
			extra = w.reclaimable(p.Namespace, req, quotaPods, staying)
			cache[ck] = extra
		}
		room := w.nodeWithRoom(p, req, nodes, use, extra, 0, now)
		if room != "" {
			w.observe("3-quota/min", string(p.UID), judged && lt)
		}
		// A quota change pauses the clock (the scheduler may still act on
		// the old quota), it does not restart it.
		if d := w.t.add(key, room != "", judged && lt, w.dt); d > quotaMinBound {
			w.violate(key, "3-quota", fmt.Sprintf("pod %s/%s pending %.0fs of leader time while its namespace is below min (uses %s of min %s) and node %s has room with reclaim",
				p.Namespace, p.Name, d.Seconds(), resources(used[p.Namespace]), resources(q.Spec.Min), room),
				"pod "+p.Namespace+"/"+p.Name, "elasticquota "+q.Namespace+"/"+q.Name, "node "+room)
		}
	}
}

// quotaPod is a bound pod of a quota namespace, as reclaim orders victims.
type quotaPod struct {
	req      v1.ResourceList
	priority int32
	started  time.Time
}

// requested names the resources req asks for, sorted.
func requested(req v1.ResourceList) string {
	var names []string
	for r, q := range req {
		if !q.IsZero() {
			names = append(names, string(r))
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// reclaimable is, per node, what ElasticQuota's reclaim may free there for a
// pending pod of namespace ns asking for req, by the plugin's rule: another
// namespace's pod may be taken while that namespace (without its pods
// being deleted: staying) is above its min in a resource the pod asks for,
// counting the pods taken before it there, least important first (the last
// one taken may leave it below its min; what it frees in other resources is
// a side effect). Victims the plugin would take on other nodes for the same
// preemptor are not counted against the namespace: an upper bound per node.
func (w *watcher) reclaimable(ns string, req v1.ResourceList, quotaPods map[string]map[string][]quotaPod, staying map[string]v1.ResourceList) map[string]v1.ResourceList {
	out := map[string]v1.ResourceList{}
	for node, byNS := range quotaPods {
		freed := v1.ResourceList{}
		for other, pods := range byNS {
			q := w.quotaOf(other)
			if other == ns || q == nil {
				continue
			}
			taken := v1.ResourceList{}
			borrows := func() bool {
				for r, min := range q.Spec.Min {
					if want := req[r]; want.IsZero() {
						continue
					}
					left := staying[other][r].DeepCopy()
					left.Sub(taken[r])
					if left.Cmp(min) > 0 {
						return true
					}
				}
				return false
			}
			for _, qp := range pods {
				if !borrows() {
					break
				}
				addTo(taken, qp.req)
			}
			addTo(freed, taken)
		}
		out[node] = freed
	}
	return out
}

func resources(rl v1.ResourceList) string {
	var parts []string
	for r, q := range rl {
		parts = append(parts, fmt.Sprintf("%s=%s", r, q.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
