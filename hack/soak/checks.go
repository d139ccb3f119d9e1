package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// 3c. Each ElasticQuota's status.used (the resources its min or max names)
// stays within what its namespace's pods account for, as the plugin counts
// them: at least the requests of the active pods not being deleted as one
// of the checks of the last statusBound saw them, at most the most seen of
// all active pods plus every pending pod's (the plugin counts the pods it reserved, which wait at Permit or
// bind in flight). A status outside that range for statusBound of leader
// time is usage counted wrong (a pod counted twice, or never released).
func (w *watcher) checkQuotaStatus(now time.Time) {
	lt := w.leaderTime()
	for _, o := range w.quotas.List() {
		q := o.(*schedv1alpha1.ElasticQuota)
		ns := q.Namespace
		if w.quotaOf(ns) != q {
			continue // a second quota in the namespace: the plugin takes one
		}
		names := map[v1.ResourceName]bool{}
		for r := range q.Spec.Min {
			names[r] = true
		}
		for r := range q.Spec.Max {
			names[r] = true
		}
		// staying: active pods not being deleted (the plugin may already
		// have let a leaving pod go: a preemption's victim past its grace);
		// bound: every active pod; pending: pods it may hold reserved.
		staying, bound, pending := v1.ResourceList{}, v1.ResourceList{}, v1.ResourceList{}
		objs, _ := w.pods.ByIndex(cache.NamespaceIndex, ns)
		for _, o := range objs {
			p := o.(*v1.Pod)
			switch {
			case active(p):
				addTo(bound, only(podRequests(p), names))
				if p.DeletionTimestamp == nil {
					addTo(staying, only(podRequests(p), names))
				}
			case mayBeReserved(p):
				addTo(pending, only(podRequests(p), names))
			}
		}
		w.usedHistory[ns] = append(w.usedHistory[ns], usedSample{at: now, used: staying, all: bound})
		hist := w.usedHistory[ns]
		for len(hist) > 0 && now.Sub(hist[0].at) > statusBound {
			hist = hist[1:]
		}
		w.usedHistory[ns] = hist
		low, high := v1.ResourceList{}, v1.ResourceList{}
		for r := range names {
			for i, h := range hist {
				x, y := h.used[r], h.all[r]
				if l := low[r]; i == 0 || x.Cmp(l) < 0 {
					low[r] = x.DeepCopy()
				}
				if hi := high[r]; i == 0 || y.Cmp(hi) > 0 {
					high[r] = y.DeepCopy()
				}
			}
			hi := high[r]
			hi.Add(pending[r])
			high[r] = hi
		}
		out := ""
		for r := range names {
			x, l, h := q.Status.Used[r], low[r], high[r]
			if x.Cmp(l) < 0 || x.Cmp(h) > 0 {
				out = fmt.Sprintf("%s %s outside [%s, %s]", r, x.String(), l.String(), h.String())
			}
		}
		w.observe("3-quota/status", ns, lt)
		key := "status/" + ns
		if d := w.t.add(key, out != "", lt, w.dt); d > statusBound {
			w.violate(key+"/"+q.ResourceVersion, "3-quota",
				fmt.Sprintf("ElasticQuota %s/%s: status.used %s for %.0fs of leader time (its active pods' requests over the last %s, plus its pending pods')", ns, q.Name, out, d.Seconds(), statusBound),
				"elasticquota "+ns+"/"+q.Name)
		}
	}
}

// mayBeReserved: a pending pod the scheduler may hold reserved (at Permit,
// or in a binding cycle), which ElasticQuota counts in its namespace's use
// and the API does not show bound: not gated, not ended, and not one that
// fits no node (never reserved).
func mayBeReserved(p *v1.Pod) bool {
	return p.Spec.NodeName == "" && !terminal(p) && len(p.Spec.SchedulingGates) == 0 && p.Labels[fitsNoNodeLabel] == ""
}

// only is rl limited to names.
func only(rl v1.ResourceList, names map[v1.ResourceName]bool) v1.ResourceList {
	out := v1.ResourceList{}
	for r, x := range rl {
		if names[r] {
			out[r] = x
		}
	}
	return out
}

// 2b. Gang liveness: a PodGroup with all its members created, whose members
// still to place fit the cluster's free room together (first fit, each on a
// node it is eligible for) and which its quota admits whole, is placed
// within gangLivenessBound of leader time, unless its spec or its quota
// changed within settle. A gang that cannot fit whole is out of scope.
func (w *watcher) checkGangLiveness(now time.Time, nodes map[string]*v1.Node, use map[string]*nodeUse) {
	lt := w.queueTime()
	members := map[string][]*v1.Pod{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if g := gangKey(p); g != "" && p.DeletionTimestamp == nil && !terminal(p) {
			members[g] = append(members[g], p)
		}
	}
	qv := w.quotaView()
	var free map[string]v1.ResourceList // computed once, if any gang needs it
	for _, pg := range w.gangs() {
		key := pg.key
		var pending []*v1.Pod
		placed := 0
		for _, p := range members[key] {
			if p.Spec.NodeName != "" {
				placed++
			} else {
				pending = append(pending, p)
			}
		}
		need := pg.min - placed
		tkey := "gang-live/" + key
		if need <= 0 || len(members[key]) < pg.min || len(pending) < need {
			w.t.add(tkey, false, false, 0)
			continue
		}
		if free == nil {
			free = map[string]v1.ResourceList{}
			for name, n := range nodes {
				room, pods := w.room(n, use[name])
				room[v1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
				free[name] = room
			}
		}
		fits, sum := w.gangFits(pending[:need], nodes, free, use, now)
		if fits && pg.minResources != nil {
			total := v1.ResourceList{}
			for _, r := range free {
				addTo(total, r)
			}
			fits = fitsIn(pg.minResources, total)
		}
		fits = fits && w.admits(qv, pg.namespace, sum)
		judged := now.Sub(w.groupChanged[key]) >= settle && now.Sub(w.quotaChanged[pg.namespace]) >= settle
		if fits {
			w.observe("2-gang/liveness", key, judged && lt)
		}
		if d := w.t.add(tkey, fits, judged && lt, w.dt); d > gangLivenessBound {
			w.violate(tkey+"/"+pg.resourceVersion, "2-gang",
				fmt.Sprintf("PodGroup %s: %d of min %d placed, and the %d to place have fitted the cluster's free room and the quota for %.0fs of leader time", key, placed, pg.min, need, d.Seconds()),
				"podgroup "+key)
		}
	}
}

// gangFits places pods by first fit on copies of free (each on a node it is
// eligible for, with room, a pod slot and its host ports free); it reports
// whether all fit and what they request together.
func (w *watcher) gangFits(pods []*v1.Pod, nodes map[string]*v1.Node, free map[string]v1.ResourceList, use map[string]*nodeUse, now time.Time) (bool, v1.ResourceList) {
	sum := v1.ResourceList{}
	taken := map[string]v1.ResourceList{}
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	// Largest first, as first-fit decreasing.
	sorted := append([]*v1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := podRequests(sorted[i])[v1.ResourceCPU], podRequests(sorted[j])[v1.ResourceCPU]
		return a.Cmp(b) > 0
	})
	for _, p := range sorted {
		req := podRequests(p)
		addTo(sum, req)
		withSlot := req.DeepCopy()
		withSlot[v1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		placed := false
		for _, name := range names {
			if !w.eligible(p, nodes[name], now) || use[name] != nil && (portTaken(use[name], p) || hot(nodes[name], use[name])) {
				continue
			}
			room := free[name]
			if t := taken[name]; t != nil {
				room = sub(room, t)
			}
			if fitsIn(withSlot, room) {
				if taken[name] == nil {
					taken[name] = v1.ResourceList{}
				}
				addTo(taken[name], withSlot)
				placed = true
				break
			}
		}
		if !placed {
			return false, sum
		}
	}
	return true, sum
}

// preemptedBy reads upstream's event message: "Preempted by <type> <uid> on
// node <node>", the type "pod" or, for a PodGroup's preemption,
// "podgroup".
var preemptedBy = regexp.MustCompile(`^Preempted by (\S+) ([0-9a-f-]{36}) on node (\S+)`)

// 8. Every eviction was legal, judged from the event upstream's preemption
// records on each victim, evictionDelay after it (so that the preemptor's
// other victims' events are in): the victim's priority is below its
// preemptor's, unless ElasticQuota reclaimed it for a preemptor of another
// namespace with a quota, and then the victim's namespace was above its
// min in a resource the preemptor asks for, counting as still there every
// pod a preemption evicted around then and the pods it had reserved
// (pending, nominated), at its largest in the evictionWindow before the
// event (the decision came before it). An eviction within settle of either namespace's
// quota changing is counted, not judged (decided by the old quota).
func (w *watcher) preempted(e *v1.Event) {
	if e.Reason != "Preempted" || e.InvolvedObject.Kind != "Pod" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evictions++
	ev := evictionEvent{victim: e.InvolvedObject.UID, ns: e.InvolvedObject.Namespace, name: e.InvolvedObject.Name, at: time.Now()}
	if m := preemptedBy.FindStringSubmatch(e.Message); m != nil {
		ev.preemptor, ev.preemptorType = types.UID(m[2]), m[1]
	}
	if v := w.podByUID(ev.victim, ev.ns, ev.name); v != nil {
		ev.victimPod = v
		if v.Spec.NodeName != "" {
			w.victims = append(w.victims, victimRecord{victim: ev.victim, preemptor: ev.preemptor, at: ev.at})
		}
	}
	switch {
	case ev.preemptor == "":
	case ev.preemptorType == "podgroup":
		ev.preemptorPod, ev.preemptorName = w.groupPreemptor(ev.preemptor, e.Related)
	default:
		ev.preemptorPod = w.podByUID(ev.preemptor, "", "")
	}
	w.evictionQueue = append(w.evictionQueue, ev)
}

// groupPreemptor stands a Kubernetes PodGroup that preempted (uid; the
// event's related object names it) in for its preemptor pod: one of its
// members (the requests of a group's members say which resources it asks
// for) at the group's priority, as upstream's preemption compares it
// (util.PodGroupPriority: spec.priority, 0 without). nil if the watcher
// holds neither the group nor a member.
func (w *watcher) groupPreemptor(uid types.UID, related *v1.ObjectReference) (*v1.Pod, string) {
	var pg *schedulingv1beta1.PodGroup
	if related != nil && related.Kind == "PodGroup" {
		if o, ok, _ := w.nativeGroups.GetByKey(related.Namespace + "/" + related.Name); ok && o.(*schedulingv1beta1.PodGroup).UID == uid {
			pg = o.(*schedulingv1beta1.PodGroup)
		}
	}
	if pg == nil {
		for _, o := range w.nativeGroups.List() {
			if g := o.(*schedulingv1beta1.PodGroup); g.UID == uid {
				pg = g
			}
		}
	}
	if pg == nil {
		return nil, ""
	}
	objs, _ := w.pods.ByIndex(cache.NamespaceIndex, pg.Namespace)
	for _, o := range objs {
		p := o.(*v1.Pod)
		if sg := p.Spec.SchedulingGroup; sg != nil && ptr.Deref(sg.PodGroupName, "") == pg.Name {
			stand := p.DeepCopy()
			stand.Spec.Priority = ptr.To(ptr.Deref(pg.Spec.Priority, 0))
			return stand, fmt.Sprintf("PodGroup %s/%s", pg.Namespace, pg.Name)
		}
	}
	return nil, ""
}

// evictionEvent is one victim's event, waiting to be judged.
type evictionEvent struct {
	victim, preemptor       types.UID
	ns, name                string
	at                      time.Time
	victimPod, preemptorPod *v1.Pod
	// preemptorType: upstream's, "pod" or "podgroup"; preemptorName, for
	// a group, names it (preemptorPod is one of its members then).
	preemptorType, preemptorName string
}

// evictionDelay: how long an eviction waits for its preemptor's other
// victims' events before it is judged.
const evictionDelay = 5 * time.Second

// judgeEvictions judges the evictions seen at least evictionDelay ago.
func (w *watcher) judgeEvictions(now time.Time) {
	keep := w.evictionQueue[:0]
	for _, ev := range w.evictionQueue {
		if now.Sub(ev.at) < evictionDelay {
			keep = append(keep, ev)
			continue
		}
		w.judgeEviction(ev)
	}
	w.evictionQueue = keep
}

func (w *watcher) judgeEviction(ev evictionEvent) {
	key := string(ev.victim)
	victim, preemptor := ev.victimPod, ev.preemptorPod
	why := ""
	switch {
	case victim == nil:
		why = "victim not seen"
	case preemptor == nil:
		why = fmt.Sprintf("preemptor not seen (%s)", ev.preemptorType)
	case ev.at.Sub(w.quotaChanged[victim.Namespace]) < settle || ev.at.Sub(w.quotaChanged[preemptor.Namespace]) < settle:
		why = "a quota edited within " + settle.String()
	}
	if why != "" {
		w.unjudgedEvictions[why]++
		w.event("8-eviction", key, false)
		return
	}
	w.event("8-eviction", key, true)
	vid, pid := victim.Namespace+"/"+victim.Name, "pod "+preemptor.Namespace+"/"+preemptor.Name
	if ev.preemptorName != "" {
		pid = ev.preemptorName
	}
	vp, pp := corev1helpers.PodPriority(victim), corev1helpers.PodPriority(preemptor)
	if w.blockingPDB(victim) != "" {
		// Counted, not judged: whether another choice existed is a
		// property of the whole victim set upstream's reprieve chose.
		w.pdbEvictions++
	}
	q := w.quotaOf(victim.Namespace)
	reclaim := victim.Namespace != preemptor.Namespace && q != nil && w.quotaOf(preemptor.Namespace) != nil
	if reclaim && leavingBefore(victim, ev.at) {
		// Already being deleted (its Job or ReplicaSet gone) before the
		// preemption: its room was leaving anyway, and ElasticQuota's
		// rule takes such a pod without counting it against its
		// namespace's min.
		return
	}
	if !reclaim {
		if vp >= pp {
			w.violate("eviction/"+key, "8-eviction", fmt.Sprintf("pod %s (priority %d) evicted for %s (priority %d)", vid, vp, pid, pp), "pod "+vid, pid)
		}
		return
	}
	// The namespace's use when the preemption decided, generously: its
	// pods not being deleted, every pod a preemption evicted within
	// evictionWindow of this one (a victim of this round or a concurrent
	// one), this victim, and its pending pods nominated to a node then (a
	// gang member held at Permit counts in the plugin's use; its
	// nomination is cleared when its gang is released or rejected).
	before := v1.ResourceList{}
	counted := map[types.UID]bool{}
	evictedNear := func(uid types.UID) bool {
		for _, v := range w.victims {
			if v.victim == uid && absDuration(v.at.Sub(ev.at)) < evictionWindow {
				return true
			}
		}
		return false
	}
	objs, _ := w.pods.ByIndex(cache.NamespaceIndex, victim.Namespace)
	for _, o := range objs {
		p := o.(*v1.Pod)
		switch {
		case active(p) && (p.DeletionTimestamp == nil || evictedNear(p.UID) || preemptedRecently(p, ev.at)):
		case p.Spec.NodeName == "" && w.nominatedAround(p, ev.at, evictionWindow) && p.DeletionTimestamp == nil && !terminal(p):
		default:
			continue
		}
		addTo(before, podRequests(p))
		counted[p.UID] = true
	}
	for uid, g := range w.gone {
		if g.pod.Namespace == victim.Namespace && !counted[uid] && g.pod.Spec.NodeName != "" && (evictedNear(uid) || preemptedRecently(g.pod, ev.at)) {
			addTo(before, podRequests(g.pod))
			counted[uid] = true
		}
	}
	if !counted[victim.UID] {
		addTo(before, podRequests(victim))
	}
	w.reclaims++
	aboveMin := func(use v1.ResourceList) bool {
		for r, x := range podRequests(preemptor) {
			mn, ok := q.Spec.Min[r]
			if b := use[r]; !x.IsZero() && ok && b.Cmp(mn) > 0 {
				return true
			}
		}
		return false
	}
	now := before.DeepCopy()
	// The preemption decided before its event arrived, by up to
	// evictionWindow on a throttled replica, and a pod of the namespace
	// may have ended in between (a Job's pod completing, a deletion): its
	// use at each check within that window before the event bounds the use
	// the plugin saw too. The active pods not being deleted: the plugin
	// counts a pod being deleted as leaving, not as the namespace's use.
	for _, h := range w.usedHistory[victim.Namespace] {
		if h.at.After(ev.at) || ev.at.Sub(h.at) > evictionWindow {
			continue
		}
		for r, x := range h.used {
			if b, ok := before[r]; !ok || x.Cmp(b) > 0 {
				before[r] = x.DeepCopy()
			}
		}
	}
	if aboveMin(before) {
		if !aboveMin(now) {
			w.reclaimsByHistory++
			logf("eviction of %s for %s: legal by %s's use in the %s before the event (%s; %s when judged)", vid, pid, victim.Namespace, evictionWindow, resources(before), resources(now))
		}
		return
	}
	// Pending pods the scheduler may have held reserved then (a gang's
	// members at Permit, a binding waiting on the client's rate limiter):
	// not counted, named in the violation's message.
	var pending []string
	for _, o := range objs {
		if p := o.(*v1.Pod); mayBeReserved(p) && !counted[p.UID] && p.DeletionTimestamp == nil && p.CreationTimestamp.Time.Before(ev.at) {
			pending = append(pending, fmt.Sprintf("%s (%s)", p.Name, resources(podRequests(p))))
		}
	}
	sort.Strings(pending)
	listed := len(pending)
	if len(pending) > maxListed {
		pending = append(pending[:maxListed], "...")
	}
	w.violate("eviction/"+key, "8-eviction", fmt.Sprintf("pod %s of namespace %s evicted to reclaim for %s, but %s used %s, not above its min %s in a resource %s asks for (%s); its pending pods then, not counted: %d %v",
		vid, victim.Namespace, pid, victim.Namespace, resources(before), resources(q.Spec.Min), pid, resources(podRequests(preemptor)), listed, pending), "pod "+vid, pid, "elasticquota "+q.Namespace+"/"+q.Name)
}

// leavingBefore: p's deletion was requested more than 2 s before at (its
// deletionTimestamp less its grace period).
func leavingBefore(p *v1.Pod, at time.Time) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	requested := p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
	return requested.Before(at.Add(-2 * time.Second))
}

// maxListed: the pending pods a violation's message names at most.
const maxListed = 10

// evictionWindow: evictions this close together may be one preemption's.
const evictionWindow = 15 * time.Second

// preemptedRecently: p carries upstream's DisruptionTarget condition of a
// preemption set within evictionWindow of at.
func preemptedRecently(p *v1.Pod, at time.Time) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Reason == v1.PodReasonPreemptionByScheduler && absDuration(c.LastTransitionTime.Sub(at)) < evictionWindow {
			return true
		}
	}
	return false
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// victimRecord: a victim and its preemptor.
type victimRecord struct {
	victim, preemptor types.UID
	at                time.Time
}

// podByUID finds a pod in the informer or among the recently deleted.
func (w *watcher) podByUID(uid types.UID, ns, name string) *v1.Pod {
	if name != "" {
		if o, ok, _ := w.pods.GetByKey(ns + "/" + name); ok && o.(*v1.Pod).UID == uid {
			return o.(*v1.Pod)
		}
	} else {
		for _, o := range w.pods.List() {
			if p := o.(*v1.Pod); p.UID == uid {
				return p
			}
		}
	}
	if g, ok := w.gone[uid]; ok {
		return g.pod
	}
	return nil
}

// blockingPDB names a PodDisruptionBudget that selects p and allows no
// disruption now ("" if none).
func (w *watcher) blockingPDB(p *v1.Pod) string {
	objs, _ := w.pdbs.ByIndex(cache.NamespaceIndex, p.Namespace)
	for _, o := range objs {
		pdb := o.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed <= 0 {
			return pdb.Namespace + "/" + pdb.Name
		}
	}
	return ""
}

// nonLeaderGrace: how long after it last led a replica may still finish
// what it had in flight.
const nonLeaderGrace = 15 * time.Second

// nonLeaderScheduled: 9. A replica that does not lead schedules nothing
// (upstream runs scheduling cycles only under the lease): its attempts
// count grew between two samples in which it did not lead.
func (w *watcher) nonLeaderScheduled(name string, prev, last sample, ledUntil float64) {
	// A replica that just lost its lease finishes the cycles and bindings
	// it had in flight before it exits (upstream's, seen at 1,000 nodes):
	// judged from nonLeaderGrace after it last led.
	if prev.Start != last.Start || prev.Leader || last.Leader || prev.At-ledUntil < nonLeaderGrace.Seconds() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var grew []string
	for result, n := range last.Attempts {
		if n > prev.Attempts[result] {
			grew = append(grew, fmt.Sprintf("%s +%.0f", result, n-prev.Attempts[result]))
		}
	}
	w.event("9-leadership/non-leader", name, true)
	if len(grew) > 0 {
		sort.Strings(grew)
		w.violate(fmt.Sprintf("non-leader/%s/%d", name, last.Start), "9-leadership",
			fmt.Sprintf("replica %s scheduled while not leading (attempts %s between %.0fs and %.0fs)", name, strings.Join(grew, ", "), prev.At, last.At), "replica "+name)
	}
}

// judgeDrained is the verdict after the drain: a pod a node fits (4, an
// exact oracle) or a partial gang (2) that has waited at least drainJudged
// of leader time is a violation, whether or not its bound has passed: with
// every fault healed and no new work, nothing is left to wait for. The
// oracles that are upper bounds (3's reclaim room, per node; 2's whole-gang
// first fit) are judged by their own bounds only, which the drain outlasts.
func (w *watcher) judgeDrained() {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The evictions seen in the last evictionDelay: their preemptors'
	// other events had the drain to arrive.
	w.judgeEvictions(time.Now().Add(evictionDelay))
	// The liveness clocks pause while the leader catches up: one that has
	// not caught up by the end of the drain could hide a stall.
	if w.backlogged {
		w.violate("drained/backlog", "9-leadership", fmt.Sprintf("the leader's active queue still held more than %d pods at the end of the drain (for %.0fs of its leadership)", backlogPods, w.backlogFor.Seconds()))
	}
	for key, x := range w.t.m {
		d := x.d
		var inv, what string
		switch {
		case strings.HasPrefix(key, "live/"):
			inv = "4-liveness"
			what = "pod " + w.podName(types.UID(strings.TrimPrefix(key, "live/")))
		case strings.HasPrefix(key, "gang/"):
			inv = "2-gang"
			what = "partial PodGroup " + strings.TrimPrefix(key, "gang/")
		default:
			continue
		}
		if d >= drainJudged {
			w.violate("drained/"+key, inv, fmt.Sprintf("%s still waiting at the end of the drain after %.0fs of leader time in which it could have been placed", what, d.Seconds()), what)
		}
	}
}

// podName is a pod's namespace/name by UID ("uid <uid>" if gone).
func (w *watcher) podName(uid types.UID) string {
	if p := w.podByUID(uid, "", ""); p != nil {
		return p.Namespace + "/" + p.Name
	}
	return "uid " + string(uid)
}

// drainJudged: see judgeDrained.
const drainJudged = 30 * time.Second
