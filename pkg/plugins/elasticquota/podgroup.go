package elasticquota

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// PodGroupPostFilter preempts for a pod group that Kubernetes' PodGroup
// cycle (GenericWorkload) could not place, by ElasticQuota's rule (see
// eligibleVictims), with the group as one preemptor: its members' requests
// together decide whether it stays within its namespace's min, and so
// whether borrowers' pods may go. It follows upstream's pod-group preemption
// (DefaultPreemption's, which knows nothing of quotas and is off beside
// ElasticQuota):
//
//  1. every eligible victim (all of a borrower's pods while it is above its
//     min: where the group goes is not known yet) is removed from the
//     cycle's snapshot (the framework's mutable lister) and from the quota
//     arithmetic the members' PreFilter takes (through the context), and
//     the group is scheduled again (pgSchedulingFunc, the cycle's own
//     algorithm); if it still does not fit, nothing is preempted;
//  2. victims are reprieved most important first (PDB-violating ones
//     first) while the whole group still fits its quota and every placed
//     member still passes Filter on its node; one the group needs is taken
//     only while its namespace stays at or above its min (the floor). A
//     placement that needs more is tried again with what the floor kept in
//     place, maxFloorTries placements at most;
//  3. the rest are preempted through upstream's executor (DisruptionTarget
//     condition, deletion, event), counted as leaving at once, and the
//     members are nominated to the nodes of the simulation.
//
// A victim is a unit: a native pod group with disruption mode All, or a
// scheduler-plugins gang (bound members of one PodGroup label), goes whole or
// not at all; another pod goes alone.
func (pl *ElasticQuota) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (res *fwk.PodGroupPostFilterResult, status *fwk.Status) {
	defer func() {
		// Upstream's pod-group preemption counts its attempts so.
		metrics.WorkloadPreemptionAttempts.WithLabelValues(status.Code().String()).Inc()
	}()
	res, status = pl.preemptForGroup(ctx, pgInfo, schedule)
	if msg := status.Message(); msg != "" {
		status = fwk.NewStatus(status.Code(), "ElasticQuota pod group preemption: "+msg)
	}
	return res, status
}

func (pl *ElasticQuota) preemptForGroup(ctx context.Context, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	members := pgInfo.GetUnscheduledPods()
	pg := pgInfo.GetPodGroup()
	if len(members) == 0 || pg == nil {
		// A composite pod group (CompositePodGroup, alpha) is left alone.
		return nil, fwk.NewStatus(fwk.Unschedulable, "no pod group with members to place")
	}
	if neverPreempts(pg, members, pl.fts.EnablePodGroupPreemptionPolicy) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "not eligible due to preemptionPolicy=Never.")
	}
	lister := pl.fh.MutableSnapshotSharedLister()
	nodes, err := lister.NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if nominated, ok := ongoingPreemption(lister, members); ok {
		return &fwk.PodGroupPostFilterResult{NominatingInfos: nominated}, fwk.NewStatus(fwk.Success, "ongoing preemption on nominated nodes")
	}

	m := pl.shared.mgr
	// Priorities are pods' throughout, as in ElasticQuota's per-pod
	// preemption and in the members' own PreFilter (which counts nominated
	// pods of no lower priority): a gang's members share one.
	prio := corev1helpers.PodPriority(members[0])
	req := vec{}
	for _, p := range members {
		req.add(podRequest(p), 1)
	}
	s := m.snapshotExcluding(members[0], req, prio, members, nil)
	eligible := eligibleVictims(m, s, victimUnits(nodes, lister.PodGroups(), pg), false)
	if len(eligible) == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no preemption victims found for the pod group")
	}
	pdbs, err := pl.fh.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("listing PodDisruptionBudgets: %w", err))
	}

	// A placement the min floor refuses (it needs a borrower below its min)
	// is tried again with the victims the floor kept left in place, so the
	// group's scheduling looks elsewhere; a few tries at most.
	var sel *groupSelection
	for try := 1; ; try++ {
		if err := lister.StartMutations(); err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("starting snapshot mutations: %w", err))
		}
		var kept []preemption.Victim
		var status *fwk.Status
		sel, kept, status = pl.selectGroupVictims(ctx, lister, s, members, eligible, pdbs, schedule)
		if err := lister.EndMutations(); err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("ending snapshot mutations: %w", err))
		}
		if !status.IsSuccess() {
			return nil, status
		}
		if len(kept) == 0 {
			break
		}
		if try == maxFloorTries {
			return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("after %d placements the pod group still fits only if namespaces that borrow give up more than they borrow (below their min)", try))
		}
		eligible = slices.DeleteFunc(eligible, func(v preemption.Victim) bool {
			return slices.ContainsFunc(kept, func(k preemption.Victim) bool { return k.Pods()[0].GetPod().UID == v.Pods()[0].GetPod().UID })
		})
		if len(eligible) == 0 {
			return nil, fwk.NewStatus(fwk.Unschedulable, "the pod group fits only if namespaces that borrow give up more than they borrow (below their min)")
		}
	}

	kind := kindNoQuota
	switch {
	case s.hasQuota && s.withinMin:
		kind = kindReclaim
	case s.hasQuota:
		kind = kindOwnNamespace
	}
	m.markPreempted(sel.victims.Pods)
	if err := pl.actuate(ctx, &groupPreemptor{pg: pg, pods: members}, sel); err != nil {
		return nil, fwk.AsStatus(err)
	}
	preemptionsTotal.WithLabelValues(kind).Inc()
	// Upstream's pod-group preemption metrics, as its executor observes them.
	metrics.WorkloadPreemptionVictims.Observe(float64(len(sel.victims.Pods)))
	if sel.disruptions > 0 {
		metrics.PreemptionWorkloadDisruptions.WithLabelValues(string(fwk.PodGroupKeyType)).Observe(float64(sel.disruptions))
	}
	if n := sel.victims.NumPDBViolations; n > 0 {
		metrics.PreemptionPDBViolations.WithLabelValues(string(fwk.PodGroupKeyType)).Add(float64(n))
	}
	if loggerV := logger.V(2); loggerV.Enabled() {
		loggerV.Info("ElasticQuota preempted for a pod group", "podGroup", klog.KObj(pg), "kind", kind, "victims", klog.KObjSlice(sel.victims.Pods))
	}
	return &fwk.PodGroupPostFilterResult{NominatingInfos: sel.nominated},
		fwk.NewStatus(fwk.Success, fmt.Sprintf("found a placement for the pod group, preempting %d pods", len(sel.victims.Pods)))
}

// maxFloorTries bounds the placements PodGroupPostFilter tries when the min
// floor keeps victims a placement needs.
const maxFloorTries = 3

// groupSelection is what selectGroupVictims chose: the pods to preempt and
// where the members go once they are gone.
type groupSelection struct {
	victims     *extenderv1.Victims
	disruptions int // victims that are pod groups
	nominated   map[types.NamespacedName]*fwk.NominatingInfo
}

// selectGroupVictims is steps 1 and 2 of PodGroupPostFilter, on a mutable
// snapshot the caller started and ends (which undoes every change here).
func (pl *ElasticQuota) selectGroupVictims(ctx context.Context, lister fwk.MutableSnapshotSharedLister, s *preFilterState, members []*v1.Pod,
	eligible []preemption.Victim, pdbs []*policy.PodDisruptionBudget, schedule fwk.PodGroupSchedulingFunc) (*groupSelection, []preemption.Victim, *fwk.Status) {
	logger := klog.FromContext(ctx)
	m := pl.shared.mgr
	gone := sets.New[types.UID]()
	for _, v := range eligible {
		for _, pi := range v.Pods() {
			if err := lister.RemovePod(logger, pi.GetPod(), pi.GetPod().Spec.NodeName); err != nil {
				return nil, nil, fwk.AsStatus(err)
			}
			gone.Insert(pi.GetPod().UID)
		}
	}
	assignments, status := schedule(withGone(ctx, gone))
	if status.IsError() {
		return nil, nil, status
	}
	if !status.IsSuccess() {
		return nil, nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("the pod group does not fit even without the %d pods it may preempt: %s", gone.Len(), status.Message()))
	}
	var placed []fwk.ProposedAssignment
	req := vec{}
	for _, a := range assignments.ProposedAssignments {
		if a.GetNodeName() != "" {
			placed = append(placed, a)
			req.add(podRequest(a.GetPod()), 1)
		}
	}
	// The quota arithmetic of the placed members together, without the
	// victims: a victim is reprieved only if the group still fits with it.
	gs := m.snapshotExcluding(s.pod, req, s.prio, members, gone)

	// move adds a victim's pods back (sign 1) or takes them out again (-1),
	// in the snapshot, the members' cycle states and the group's quota.
	move := func(v preemption.Victim, sign int64) error {
		for _, pi := range v.Pods() {
			p := pi.GetPod()
			if sign > 0 {
				if err := lister.AddPod(pi, p.Spec.NodeName); err != nil {
					return err
				}
			} else if err := lister.RemovePod(logger, p, p.Spec.NodeName); err != nil {
				return err
			}
			ni, err := lister.NodeInfos().Get(p.Spec.NodeName)
			if err != nil {
				return err
			}
			for _, a := range placed {
				var st *fwk.Status
				if sign > 0 {
					st = pl.fh.RunPreFilterExtensionAddPod(ctx, a.GetCycleState(), a.GetPod(), pi, ni)
				} else {
					st = pl.fh.RunPreFilterExtensionRemovePod(ctx, a.GetCycleState(), a.GetPod(), pi, ni)
				}
				if !st.IsSuccess() {
					return st.AsError()
				}
			}
			gs.adjust(p.Namespace, podRequest(p), m.hasQuota(p.Namespace), sign)
		}
		return nil
	}
	// fits: the group's quota admits the placed members together, and each
	// passes Filter on its node with the members before it placed there (as
	// upstream's reprieve does, Reserve included for stateful plugins).
	fits := func() (ok bool, err error) {
		if gs.hasQuota && gs.admit() != nil {
			return false, nil
		}
		var undo []func() error
		defer func() {
			for i := len(undo) - 1; i >= 0; i-- {
				err = errors.Join(err, undo[i]())
			}
		}()
		for _, a := range placed {
			ni, err := lister.NodeInfos().Get(a.GetNodeName())
			if err != nil {
				return false, err
			}
			if st := pl.fh.RunFilterPluginsWithNominatedPods(ctx, a.GetCycleState(), a.GetPod(), ni); !st.IsSuccess() {
				return false, nil
			}
			if err := lister.AddPod(a.GetPodInfo(), a.GetNodeName()); err != nil {
				return false, err
			}
			pl.fh.RunReservePluginsReserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
			undo = append(undo, func() error {
				pl.fh.RunReservePluginsUnreserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
				return lister.RemovePod(logger, a.GetPod(), a.GetNodeName())
			})
		}
		return true, nil
	}

	sel := &groupSelection{victims: &extenderv1.Victims{}, nominated: map[types.NamespacedName]*fwk.NominatingInfo{}}
	preempt := func(v preemption.Victim) {
		if v.Type() == fwk.PodGroupKeyType {
			sel.disruptions++
		}
		for _, pi := range v.Pods() {
			sel.victims.Pods = append(sel.victims.Pods, pi.GetPod())
		}
	}
	reprieve := func(v preemption.Victim) (bool, error) {
		if err := move(v, 1); err != nil {
			return false, err
		}
		ok, err := fits()
		if err != nil || ok {
			return ok, err
		}
		return false, move(v, -1)
	}
	// The min floor: a borrower's pods were all candidates (the group could
	// go anywhere); now that the group is placed, a victim it needs is taken
	// only while its namespace stays at or above its min, counting the
	// victims taken before it. One the floor keeps goes back, and the group
	// must then fit with it.
	floor := &dryRunVictims{m: m, r: newVictimRule(m, s)}
	var kept []preemption.Victim
	take := func(v preemption.Victim) (bool, error) {
		for _, pi := range v.Pods() {
			if !floor.Eligible(pi.GetPod()) {
				kept = append(kept, v)
				return false, move(v, 1)
			}
		}
		for _, pi := range v.Pods() {
			floor.Take(pi.GetPod())
		}
		preempt(v)
		return true, nil
	}
	violating, nonViolating := preemption.FilterVictimsWithPDBViolation(eligible, pdbs)
	for _, v := range violating {
		reprieved, err := reprieve(v.Victim)
		if err != nil {
			return nil, nil, fwk.AsStatus(err)
		}
		if reprieved {
			continue
		}
		taken, err := take(v.Victim)
		if err != nil {
			return nil, nil, fwk.AsStatus(err)
		}
		if taken {
			sel.victims.NumPDBViolations += int64(v.ViolateCount)
		}
	}
	for _, v := range nonViolating {
		reprieved, err := reprieve(v)
		if err != nil {
			return nil, nil, fwk.AsStatus(err)
		}
		if !reprieved {
			if _, err := take(v); err != nil {
				return nil, nil, fwk.AsStatus(err)
			}
		}
	}
	if len(kept) > 0 {
		// This placement needs what the floor keeps: the caller tries
		// another with those victims in place.
		return nil, kept, nil
	}
	for _, a := range placed {
		p := a.GetPod()
		sel.nominated[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{
			NominatingMode: fwk.ModeOverride, NominatedNodeName: a.GetNodeName()}
	}
	return sel, nil, nil
}

// actuate preempts the victims through upstream's executor (DisruptionTarget
// condition, then deletion; a waiting or binding victim is stopped in
// memory), in parallel, before the cycle ends.
func (pl *ElasticQuota) actuate(ctx context.Context, preemptor preemption.ExecutorPreemptor, sel *groupSelection) error {
	c := &groupCandidate{victims: sel.victims, disruptions: sel.disruptions}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := parallelize.NewResultChannel[error]()
	pods := sel.victims.Pods
	pl.fh.Parallelizer().Until(ctx, len(pods), func(i int) {
		if pods[i].DeletionTimestamp != nil {
			return
		}
		if _, err := pl.executor.PreemptPod(ctx, c, preemptor, pods[i], Name); err != nil {
			errs.SendWithCancel(err, cancel)
		}
	}, Name)
	return errs.Receive()
}

// neverPreempts: the group's preemption policy is Never, resolved as
// upstream's pod-group preemption resolves it (resolvePreemptionPolicy):
// with the PodGroupPreemptionPolicy gate, the PodGroup's own field (an API
// server with the gate defaults it); without, Never if any member says so.
func neverPreempts(pg *schedulingv1beta1.PodGroup, members []*v1.Pod, groupPolicy bool) bool {
	if groupPolicy {
		return pg.Spec.PreemptionPolicy != nil && *pg.Spec.PreemptionPolicy == schedulingv1beta1.PreemptNever
	}
	for _, p := range members {
		if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == v1.PreemptNever {
			return true
		}
	}
	return false
}

// ongoingPreemption: a member is nominated to a node where a victim of a
// preemption is still terminating; the group waits for it, keeping its
// nominations, rather than preempting again.
func ongoingPreemption(lister fwk.SharedLister, members []*v1.Pod) (map[types.NamespacedName]*fwk.NominatingInfo, bool) {
	waiting := false
	nominated := map[types.NamespacedName]*fwk.NominatingInfo{}
	for _, p := range members {
		node := p.Status.NominatedNodeName
		if node == "" {
			continue
		}
		nominated[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node}
		if ni, err := lister.NodeInfos().Get(node); err == nil && !waiting {
			for _, pi := range ni.GetPods() {
				if preemption.PodTerminatingByPreemption(pi.GetPod()) {
					waiting = true
					break
				}
			}
		}
	}
	return nominated, waiting
}

// victimUnits groups the pods on the nodes into preemption units: the bound
// pods of a native pod group with disruption mode All, or of one
// scheduler-plugins PodGroup, are one unit (its priority is its pods'
// highest); any other pod is one alone. The preempting group's own bound
// members are no victims. Units are built with preemption.NewVictim alone,
// whose signature Kubernetes 1.38 keeps.
func victimUnits(nodes []fwk.NodeInfo, pgs fwk.PodGroupLister, self *schedulingv1beta1.PodGroup) []preemption.Victim {
	type unit struct {
		pods []fwk.PodInfo
		prio int32
		kind fwk.EntityKeyType
	}
	units := map[string]*unit{}
	var order []string
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			key, kind := "pod/"+string(p.UID), fwk.PodKeyType
			if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
				if p.Namespace == self.Namespace && *sg.PodGroupName == self.Name {
					continue
				}
				if pg, err := pgs.Get(p.Namespace, *sg.PodGroupName); err == nil && pg != nil && pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil {
					key, kind = "native/"+p.Namespace+"/"+pg.Name, fwk.PodGroupKeyType
				}
			} else if name := p.Labels[schedv1alpha1.PodGroupLabel]; name != "" {
				key, kind = "gang/"+p.Namespace+"/"+name, fwk.PodGroupKeyType
			}
			u := units[key]
			if u == nil {
				u = &unit{prio: corev1helpers.PodPriority(p), kind: kind}
				units[key] = u
				order = append(order, key)
			}
			u.prio = max(u.prio, corev1helpers.PodPriority(p))
			u.pods = append(u.pods, pi)
		}
	}
	out := make([]preemption.Victim, 0, len(order))
	for _, key := range order {
		u := units[key]
		if v, err := preemption.NewVictim(u.pods, u.prio, u.kind); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// groupCandidate is the preemption's candidate for the executor: the whole
// cluster, as upstream's pod-group preemption names it.
type groupCandidate struct {
	victims     *extenderv1.Victims
	disruptions int
}

func (c *groupCandidate) Victims() *extenderv1.Victims { return c.victims }
func (c *groupCandidate) Name() string                 { return "cluster" }
func (c *groupCandidate) NumPodGroupDisruptions() int  { return c.disruptions }

// groupPreemptor is the pod group as the executor's preemptor (its events
// and the victims' DisruptionTarget condition name it).
type groupPreemptor struct {
	pg   *schedulingv1beta1.PodGroup
	pods []*v1.Pod
}

func (p *groupPreemptor) GetName() string       { return p.pg.Name }
func (p *groupPreemptor) GetNamespace() string  { return p.pg.Namespace }
func (p *groupPreemptor) UID() types.UID        { return p.pg.UID }
func (p *groupPreemptor) SchedulerName() string { return p.pods[0].Spec.SchedulerName }
func (p *groupPreemptor) Obj() runtime.Object   { return p.pg }
func (p *groupPreemptor) Priority() int32 {
	if p.pg.Spec.Priority != nil {
		return *p.pg.Spec.Priority
	}
	return 0
}
func (p *groupPreemptor) Type() string { return string(fwk.PodGroupKeyType) }
func (p *groupPreemptor) Pods() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod, len(p.pods))
	for _, pod := range p.pods {
		out[pod.Name] = pod
	}
	return out
}

// goneKey carries, through the pod group scheduling a preemption runs, the
// pods it removed from the snapshot: the members' PreFilter leaves them out
// of the quota arithmetic too.
type goneKey struct{}

func withGone(ctx context.Context, gone sets.Set[types.UID]) context.Context {
	return context.WithValue(ctx, goneKey{}, gone)
}

func goneFrom(ctx context.Context) sets.Set[types.UID] {
	gone, _ := ctx.Value(goneKey{}).(sets.Set[types.UID])
	return gone
}
