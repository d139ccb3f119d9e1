package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
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
	gangPartialBound = 20 * time.Second
	quotaMinBound    = 90 * time.Second
	livenessBound    = 60 * time.Second
	explainBound     = 30 * time.Second
	// explainBudget is Explain's maxPerMinute (all-plugins.yaml keeps
	// the default): a leader explains at most this many pods a minute, and
	// the pods beyond it are counted, not explained (documented).
	explainBudget      = 60
	orphanBound        = 120 * time.Second
	unconditionedBound = 120 * time.Second
	// refusalTTL is AdmissionFeedback's (manifests/examples/all-plugins.yaml
	// keeps the default).
	refusalTTL = 5 * time.Minute
	// settle: after a spec change (quota, PodGroup) or a fault that
	// changes what fits, the checks that depend on it wait this long.
	settle = 30 * time.Second
)

// violation is one broken invariant, with the objects involved.
type violation struct {
	At        float64  `json:"atSeconds"`
	Invariant string   `json:"invariant"`
	Message   string   `json:"message"`
	Objects   []string `json:"objects"`
}

// watcher checks the invariants from the API alone (informers on a direct
// connection, never the scheduler's memory).
type watcher struct {
	start  time.Time
	client kubernetes.Interface
	pods   cache.Indexer
	nodes  cache.Indexer
	groups cache.Indexer
	quotas cache.Indexer

	mu sync.Mutex
	// violations, and the keys already reported (one report per episode).
	violations []violation
	reported   map[string]bool
	// created and bound times per pod UID, for latency and liveness.
	firstSeen map[types.UID]time.Time
	boundAt   map[types.UID]time.Time
	latencies []time.Duration
	// refusals per controller UID and node: when each was seen.
	refusals     map[string][]time.Time
	refusedNodes map[string]time.Time
	refusalCount int
	// groupLoss: when a PodGroup last lost a bound member (completion,
	// crash, preemption, node loss); partialSince: since when it has been
	// partly bound.
	groupLoss    map[string]time.Time
	partialSince map[string]time.Time
	specChanged  map[string]time.Time
	// since: the first time a pod was seen in a state that a bound applies to.
	since map[string]time.Time
	// created, bound, deleted counts; what KWOK's kubelets did: pods
	// Running, Succeeded, Failed (crashes), graceful deletions finished.
	podsCreated, podsBound, podsDeleted    int
	podsRunning, podsSucceeded, podsFailed int
	gracefulDeletions                      int
	seenRunning                            map[types.UID]bool
	// quiet is when the last fault that changes what fits ended (outage,
	// leader change); liveness checks wait for settle after it.
	quiet time.Time
}

func newWatcher(ctx context.Context, c kubernetes.Interface, sp versioned.Interface) (*watcher, error) {
	w := &watcher{
		start: time.Now(), client: c, reported: map[string]bool{},
		firstSeen: map[types.UID]time.Time{}, boundAt: map[types.UID]time.Time{},
		refusals: map[string][]time.Time{}, refusedNodes: map[string]time.Time{},
		groupLoss: map[string]time.Time{}, partialSince: map[string]time.Time{},
		specChanged: map[string]time.Time{}, since: map[string]time.Time{},
		seenRunning: map[types.UID]bool{},
	}
	f := informers.NewSharedInformerFactory(c, 0)
	podInf := f.Core().V1().Pods().Informer()
	nodeInf := f.Core().V1().Nodes().Informer()
	sf := spinformers.NewSharedInformerFactory(sp, 0)
	groupInf := sf.Scheduling().V1alpha1().PodGroups().Informer()
	quotaInf := sf.Scheduling().V1alpha1().ElasticQuotas().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.podChanged(nil, o.(*v1.Pod)) },
		UpdateFunc: func(old, o any) { w.podChanged(old.(*v1.Pod), o.(*v1.Pod)) },
		DeleteFunc: w.podDeleted,
	}); err != nil {
		return nil, err
	}
	specHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { w.noteSpec(o) },
		UpdateFunc: func(old, o any) {
			if old.(metav1.Object).GetGeneration() != o.(metav1.Object).GetGeneration() {
				w.noteSpec(o)
			}
		},
		DeleteFunc: func(o any) { w.noteSpec(o) },
	}
	if _, err := groupInf.AddEventHandler(specHandler); err != nil {
		return nil, err
	}
	if _, err := quotaInf.AddEventHandler(specHandler); err != nil {
		return nil, err
	}
	w.pods, w.nodes, w.groups, w.quotas = podInf.GetIndexer(), nodeInf.GetIndexer(), groupInf.GetIndexer(), quotaInf.GetIndexer()
	f.Start(ctx.Done())
	sf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced, groupInf.HasSynced, quotaInf.HasSynced) {
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
	v := violation{At: w.elapsed(), Invariant: invariant, Message: msg, Objects: objects}
	w.violations = append(w.violations, v)
	fmt.Printf("VIOLATION [%s] at %.0fs: %s (%s)\n", invariant, v.At, msg, strings.Join(objects, ", "))
}

func (w *watcher) noteSpec(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, ok := o.(metav1.Object)
	if !ok {
		return
	}
	w.mu.Lock()
	w.specChanged[m.GetNamespace()+"/"+m.GetName()] = time.Now()
	w.specChanged[m.GetNamespace()] = time.Now()
	w.mu.Unlock()
}

// faultEnded marks the end of a fault after which scheduling needs time to
// catch up (leader change, outage).
func (w *watcher) faultEnded() {
	w.mu.Lock()
	w.quiet = time.Now()
	w.mu.Unlock()
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
	if p.Spec.NodeName != "" {
		if _, ok := w.boundAt[p.UID]; !ok {
			w.boundAt[p.UID] = now
			w.podsBound++
			if cond := scheduledCondition(p); cond != nil && cond.Status == v1.ConditionTrue {
				w.latencies = append(w.latencies, cond.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
			w.checkQuotaMaxLocked(p)
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
			// Only a pod bound after an earlier refusal was visible counts:
			// pods bound before it are in flight, and a refusing node
			// looks empty to every scheduler.
			bound, ok := w.boundAt[p.UID]
			for _, t := range w.refusals[key] {
				if ok && bound.After(t.Add(2*time.Second)) && now.Sub(t) < refusalTTL {
					w.violate("refusal/"+key+"/"+string(p.UID), "5-admission-feedback",
						fmt.Sprintf("a second refusal of %s %s's pods by node %s %.0fs after the last, within the refusal TTL (%s)", ref.Kind, ref.Name, p.Spec.NodeName, now.Sub(t).Seconds(), refusalTTL),
						"pod "+p.Namespace+"/"+p.Name, "node "+p.Spec.NodeName)
				}
			}
			w.refusals[key] = append(w.refusals[key], now)
		}
		w.refusedNodes[p.Spec.NodeName] = now
	}
	if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" && old != nil && active(old) && (!active(p) || p.DeletionTimestamp != nil) {
		w.groupLoss[p.Namespace+"/"+g] = now
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
	if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" && p.Spec.NodeName != "" {
		w.groupLoss[p.Namespace+"/"+g] = time.Now()
	}
	delete(w.firstSeen, p.UID)
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
// pods, their number and their host ports.
type nodeUse struct {
	req   v1.ResourceList
	pods  int
	ports map[string][]string
	names []string
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
		u.pods++
		u.names = append(u.names, p.Namespace+"/"+p.Name)
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					k := fmt.Sprintf("%s/%d", port.Protocol, port.HostPort)
					u.ports[k] = append(u.ports[k], p.Namespace+"/"+p.Name)
				}
			}
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

// check runs every invariant once.
func (w *watcher) check(replicasLeader bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !replicasLeader {
		// No replica leads: the time without a leader is part of the
		// fault (a kill, an outage, a lost lease), and the checks that
		// wait after a fault wait from its end.
		w.quiet = now
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
	w.checkPods(now, nodes, planned, replicasLeader)
	w.checkQuotaMin(now, nodes, planned, replicasLeader)
}

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
		u := &nodeUse{req: v1.ResourceList{}}
		if cur := out[n]; cur != nil {
			u.req, u.pods = cur.req.DeepCopy(), cur.pods
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
		for r, q := range u.req {
			alloc, ok := n.Status.Allocatable[r]
			if q.IsZero() {
				continue
			}
			if !ok || q.Cmp(alloc) > 0 {
				w.violate("overcommit/"+name+"/"+string(r), "1-overcommit",
					fmt.Sprintf("node %s: %s requested %s, allocatable %s", name, r, q.String(), alloc.String()),
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

// 2. A PodGroup never has between 1 and minMember-1 members bound for
// longer than gangPartialBound (unless it lost members since it was whole).
func (w *watcher) checkGangs(now time.Time) {
	members := map[string][]*v1.Pod{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" {
			members[p.Namespace+"/"+g] = append(members[p.Namespace+"/"+g], p)
		}
	}
	for _, o := range w.groups.List() {
		pg := o.(*schedv1alpha1.PodGroup)
		key := pg.Namespace + "/" + pg.Name
		bound := 0
		var names []string
		for _, p := range members[key] {
			if active(p) && p.DeletionTimestamp == nil {
				bound++
				names = append(names, p.Name+"@"+p.Spec.NodeName)
			}
		}
		// A minMember above the members that exist (an edit raised it) can
		// never be met: upstream's rule then holds the members back.
		if bound == 0 || bound >= int(pg.Spec.MinMember) || int(pg.Spec.MinMember) > len(members[key]) {
			delete(w.partialSince, key)
			continue
		}
		since, ok := w.partialSince[key]
		if !ok {
			w.partialSince[key] = now
			continue
		}
		if loss := w.groupLoss[key]; !loss.Before(since.Add(-gangPartialBound)) {
			continue // it lost members: partial by attrition, not by the scheduler
		}
		if ch := w.specChanged[key]; now.Sub(ch) < settle {
			continue
		}
		// A leader killed or cut off while it bound the members leaves the
		// rest to the next leader: the bound counts from the fault's end.
		if now.Sub(w.quiet) < settle {
			continue
		}
		if w.quiet.After(since) {
			since = w.quiet
		}
		if now.Sub(since) > gangPartialBound {
			sort.Strings(names)
			w.violate("gang/"+key+"/"+since.String(), "2-gang",
				fmt.Sprintf("PodGroup %s: %d of minMember %d bound for %.0fs", key, bound, pg.Spec.MinMember, now.Sub(since).Seconds()),
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

// 3a. No namespace's use exceeds its max: checked when a pod is bound.
func (w *watcher) checkQuotaMaxLocked(p *v1.Pod) {
	q := w.quotaOf(p.Namespace)
	if q == nil || time.Since(w.specChanged[p.Namespace]) < 10*time.Second {
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

// held is how long the state key names has held (zero the first time it is
// seen); a state that no longer holds is forgotten.
func (w *watcher) held(key string, holds bool, now time.Time) time.Duration {
	if !holds {
		delete(w.since, key)
		return 0
	}
	t, ok := w.since[key]
	if !ok {
		w.since[key] = now
		return 0
	}
	return now.Sub(t)
}

// nodeWithRoom is an eligible node with room for req and at least minSlots
// free pod slots, counting extra[node] as free too (reclaimable requests);
// "" if none.
func (w *watcher) nodeWithRoom(p *v1.Pod, req v1.ResourceList, nodes map[string]*v1.Node, use map[string]*nodeUse, extra map[string]v1.ResourceList, minSlots int64, now time.Time) string {
	for name, n := range nodes {
		if !w.eligible(p, n, now) {
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

// 4, 6, 7: per pod.
func (w *watcher) checkPods(now time.Time, nodes map[string]*v1.Node, use map[string]*nodeUse, leader bool) {
	settled := now.Sub(w.quiet) > settle && leader
	// asked counts the pods that asked for an explanation and had a
	// scheduling attempt (PodScheduled set) in the minute up to t.
	type ask struct {
		at time.Time
		ns string
	}
	var askedAt []ask
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if p.Annotations[explain.AnnotationRequest] == "true" {
			if cond := scheduledCondition(p); cond != nil {
				askedAt = append(askedAt, ask{cond.LastTransitionTime.Time, p.Namespace})
			}
		}
	}
	// asked counts them, in all and in ns.
	asked := func(t time.Time, ns string) (all, inNS int) {
		for _, a := range askedAt {
			if !a.at.After(t) && t.Sub(a.at) < time.Minute {
				all++
				if a.ns == ns {
					inNS++
				}
			}
		}
		return all, inNS
	}
	// overBudget: Explain may have left the pod unexplained (documented):
	// the budget was spent, or its last half, which goes only to
	// namespaces within their quarter share, and the pod's namespace had
	// spent its share.
	overBudget := func(t time.Time, ns string) bool {
		all, inNS := asked(t, ns)
		return all >= explainBudget || all >= explainBudget/2 && inNS >= explainBudget/4
	}
	// members: the live members of each PodGroup (Coscheduling's count).
	members := map[string]int{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" && p.DeletionTimestamp == nil && !terminal(p) {
			members[p.Namespace+"/"+g]++
		}
	}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		id := p.Namespace + "/" + p.Name
		if p.DeletionTimestamp != nil || terminal(p) {
			delete(w.since, "live/"+string(p.UID))
			continue
		}
		// 7. No pod bound to a node that no longer exists (PodGC's job).
		if p.Spec.NodeName != "" {
			key := "orphan/" + string(p.UID)
			if d := w.held(key, nodes[p.Spec.NodeName] == nil, now); d > orphanBound {
				w.violate(key, "7-nothing-lost", fmt.Sprintf("pod %s bound to node %s, which does not exist, for %.0fs", id, p.Spec.NodeName, d.Seconds()), "pod "+id)
			}
		}
		// 6. Every pod that asked has an explanation, unless more pods
		// than Explain's budget (or its namespace's share) asked within
		// the minute before it.
		if p.Annotations[explain.AnnotationRequest] == "true" && p.Annotations[explain.AnnotationResult] == "" {
			cond := scheduledCondition(p)
			if cond != nil && settled && now.Sub(cond.LastTransitionTime.Time) > explainBound && now.Sub(w.quiet) > explainBound &&
				!overBudget(cond.LastTransitionTime.Time, p.Namespace) {
				w.violate("explain/"+string(p.UID), "6-explain",
					fmt.Sprintf("pod %s asked for an explanation and has none %.0fs after PodScheduled=%s", id, now.Sub(cond.LastTransitionTime.Time).Seconds(), cond.Status), "pod "+id)
			}
		}
		if p.Spec.NodeName != "" || p.Spec.SchedulerName != schedulerName {
			continue
		}
		// 7. Every pending pod has a reason (PodScheduled False) once
		// the scheduler had time to try it; a gang member Coscheduling
		// keeps out of the queue (no PodGroup, or fewer members than
		// minMember) is never tried, so it has none.
		if cond := scheduledCondition(p); cond == nil && settled && now.Sub(p.CreationTimestamp.Time) > unconditionedBound && now.Sub(w.quiet) > unconditionedBound && !w.heldBeforeQueue(p, members) {
			w.violate("unconditioned/"+string(p.UID), "7-nothing-lost", fmt.Sprintf("pod %s pending %.0fs with no PodScheduled condition", id, now.Sub(p.CreationTimestamp.Time).Seconds()), "pod "+id)
		}
		// 4. Liveness: a pod in the namespace without quota, gang or
		// rule constraint, with a node that fits it, is bound.
		if p.Namespace != freeNamespace || p.Labels[schedv1alpha1.PodGroupLabel] != "" {
			continue
		}
		key := "live/" + string(p.UID)
		req := podRequests(p)
		fits := w.nodeWithRoom(p, req, nodes, use, nil, 1, now)
		if d := w.held(key, fits != "" && settled, now); d > livenessBound {
			w.violate(key, "4-liveness", fmt.Sprintf("pod %s pending %.0fs while node %s fits it (requests %s)", id, d.Seconds(), fits, resources(req)), "pod "+id, "node "+fits)
		}
	}
}

// heldBeforeQueue: a gang member whose PodGroup does not exist or has fewer
// live members than minMember (Coscheduling's PreEnqueue holds it).
func (w *watcher) heldBeforeQueue(p *v1.Pod, members map[string]int) bool {
	g := p.Labels[schedv1alpha1.PodGroupLabel]
	if g == "" {
		return false
	}
	o, ok, _ := w.groups.GetByKey(p.Namespace + "/" + g)
	if !ok {
		return true
	}
	return members[p.Namespace+"/"+g] < int(o.(*schedv1alpha1.PodGroup).Spec.MinMember)
}

// 3b. A namespace below its min with a pending pod that fits its min gets
// it within quotaMinBound, where reclaim can make room: some node's free
// room plus what borrowers (namespaces above their min) hold there fits it.
func (w *watcher) checkQuotaMin(now time.Time, nodes map[string]*v1.Node, use map[string]*nodeUse, leader bool) {
	if now.Sub(w.quiet) < settle || !leader {
		for k := range w.since {
			if strings.HasPrefix(k, "min/") {
				delete(w.since, k)
			}
		}
		return
	}
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
		if q == nil || p.Spec.NodeName != "" || p.DeletionTimestamp != nil || terminal(p) || p.Labels[schedv1alpha1.PodGroupLabel] != "" || now.Sub(w.specChanged[p.Namespace]) < settle {
			delete(w.since, key)
			continue
		}
		req := podRequests(p)
		if !fitsIn(req, sub(q.Spec.Min, used[p.Namespace])) {
			delete(w.since, key)
			continue
		}
		ck := p.Namespace + "|" + requested(req)
		extra, ok := cache[ck]
		if !ok {
			extra = w.reclaimable(p.Namespace, req, quotaPods, staying)
			cache[ck] = extra
		}
		room := w.nodeWithRoom(p, req, nodes, use, extra, 0, now)
		if d := w.held(key, room != "", now); d > quotaMinBound {
			w.violate(key, "3-quota", fmt.Sprintf("pod %s/%s pending %.0fs while its namespace is below min (uses %s of min %s) and node %s has room with reclaim",
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
