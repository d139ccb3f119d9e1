package coscheduling

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"github.com/berth-scheduler/berth/internal/preemptible"
	"github.com/berth-scheduler/berth/internal/quantity"
)

// Coscheduling's PostFilter: yielding to a higher-ranked gang the room that
// lower-ranked gangs hold at Permit, and the dry run that decides whether
// the profile's preemption may make room for a member (the gang would then
// complete), apart from the plugin's other extension points, as upstream
// keeps defaultpreemption apart from the plugins that use it.

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
		sh.mgr.markFailed(key, fmt.Sprintf("pod group %s could not be placed at %s; waiting for a change in the cluster", key, sh.mgr.now().UTC().Format(time.RFC3339)))
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
	members, nominated := pl.dryRunMembers(pod, key, needed, nodes)
	same := make(map[*v1.Pod]bool, len(members))
	for _, m := range members {
		same[m] = m == pod || sameShape(m, pod)
		if !same[m] && dependsOnOtherPods(m) {
			return false, 0, fmt.Sprintf("member %s needs other pods placed around it (required inter-pod affinity, spread constraints or host ports), which the dry run cannot simulate", m.Name)
		}
	}
	slices.SortStableFunc(members, func(a, b *v1.Pod) int { return compareSize(b, a) })
	// What each member shaped unlike pod asks of the resources every node
	// states, once: a node it exceeds no eviction opens, and a member that
	// exceeds every node declines the gang before any simulation.
	reqs := make(map[*v1.Pod]coreRequest, len(members))
	for _, m := range members {
		if same[m] {
			continue // the cycle's statuses say where pod is unresolvable
		}
		c := pl.coreRequestOf(m)
		reqs[m] = c
		if len(nodes) > 0 && !slices.ContainsFunc(nodes, func(ni fwk.NodeInfo) bool { return !c.exceeds(ni) }) {
			return false, 0, fmt.Sprintf("member %s asks for more CPU, memory or ephemeral storage than any node has allocatable", m.Name)
		}
	}
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
		if !same[m] && reqs[m].exceeds(ni) {
			return false, true // no eviction makes room for more than the node has
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

// dryRunMembers is the dry run's first step: the members it places, pod
// and the unplaced siblings toPlace names (shaped as pod where there are
// fewer), needed in all, less the siblings a preemption already nominated
// (their room is promised there, and RunFilterPluginsWithNominatedPods
// counts them), whose number it returns. The scheduler's nominator says a
// sibling is nominated at once; this plugin's pod informer only once the
// nomination is written and watched back, and a sibling counted both placed
// here and nominated there made the dry run decline a gang that fits,
// release its held members and let the borrower refill the room (issue 51,
// item 1).
func (pl *Coscheduling) dryRunMembers(pod *v1.Pod, key string, needed int, nodes []fwk.NodeInfo) ([]*v1.Pod, int) {
	members := pl.shared.mgr.toPlace(key, pod)
	if len(members) == 0 {
		members = []*v1.Pod{pod}
	}
	for len(members) < needed {
		members = append(members, pod)
	}
	members = members[:needed]
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
	return members, nominated
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

// coreRequest is what a member asks of the resources every node states
// allocatable, as NodeResourcesFit computes a pod's requests.
type coreRequest struct{ milliCPU, memory, ephemeral int64 }

func (pl *Coscheduling) coreRequestOf(p *v1.Pod) coreRequest {
	r := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{
		SkipPodLevelResources:                    !pl.fitOpts.EnablePodLevelResources,
		UseDRANodeAllocatableResourceClaimStatus: pl.fitOpts.EnableDRANodeAllocatableResources,
	})
	return coreRequest{milliCPU: r.Cpu().MilliValue(), memory: r.Memory().Value(), ephemeral: r.StorageEphemeral().Value()}
}

// exceeds: the request asks more of a resource than the node has
// allocatable, so with every pod evicted it still does not fit there
// (NodeResourcesFit's Unresolvable, which upstream's preemption skips).
func (c coreRequest) exceeds(ni fwk.NodeInfo) bool {
	a := ni.GetAllocatable()
	return c.milliCPU > a.GetMilliCPU() || c.memory > a.GetMemory() || c.ephemeral > a.GetEphemeralStorage()
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
