package elasticquota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/berth-scheduler/berth/internal/mutant"
	"github.com/berth-scheduler/berth/internal/preemptible"
)

// Candidate nodes dry-run per preemption: DefaultPreemption's defaults.
const (
	minCandidateNodesPercentage = 10
	minCandidateNodesAbsolute   = 100
)

// PostFilter preempts on upstream's evaluator with ElasticQuota's victim
// selection (SelectVictimsOnNode).
func (pl *ElasticQuota) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(state)
	if err != nil {
		// Another PreFilter plugin rejected the pod before ElasticQuota's
		// ran (the framework stops at the first rejection): take the quota
		// arithmetic now, for the victim selection.
		s = pl.shared.mgr.snapshot(pod, podRequest(pod), corev1helpers.PodPriority(pod))
		pl.addGang(s, nil)
		state.Write(stateKey, s)
	}
	kind := kindNoQuota
	switch vs := s.victimState(); {
	case s.hasQuota && vs.withinMin:
		kind = kindReclaim
	case s.hasQuota:
		kind = kindOwnNamespace
	}
	chosen := &victimLog{byNode: map[string][]*v1.Pod{}}
	state.Write(victimsKey, chosen)
	result, status := pl.evaluator.Preempt(ctx, state, pod, m)
	if status.IsSuccess() {
		preemptionsTotal.WithLabelValues(kind).Inc()
		if result != nil {
			// The victims count as leaving from now on, before the
			// informer sees them deleted: a concurrent or next preemption
			// must not take the same room again.
			pl.shared.mgr.markPreempted(chosen.on(result.NominatedNodeName))
		}
	}
	if msg := status.Message(); msg != "" {
		return result, fwk.NewStatus(status.Code(), "ElasticQuota preemption: "+msg)
	}
	return result, status
}

// victimsKey holds the victims SelectVictimsOnNode chose on each candidate
// node of one PostFilter, so that those of the node preemption picks are
// known when it returns.
const victimsKey fwk.StateKey = "PostFilter" + Name

// victimLog is shared by every clone of the cycle state (the evaluator
// clones it per candidate node and dry-runs the nodes in parallel).
type victimLog struct {
	mu     sync.Mutex
	byNode map[string][]*v1.Pod
}

// Clone returns the log itself: the clones record into one log.
func (l *victimLog) Clone() fwk.StateData { return l }

func (l *victimLog) record(node string, pods []*v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byNode[node] = pods
}

func (l *victimLog) on(node string) []*v1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byNode[node]
}

// Kinds of preemption, the label of the preemptions metric.
const (
	kindReclaim      = "reclaim"       // within min: borrowers' pods may go
	kindOwnNamespace = "own-namespace" // beyond min: only its own namespace's lower-priority pods
	kindNoQuota      = "no-quota"      // no quota: lower-priority pods of namespaces without one
)

// GetOffsetAndNumCandidates: DefaultPreemption's defaults.
func (pl *ElasticQuota) GetOffsetAndNumCandidates(n int32) (int32, int32) {
	num := n * minCandidateNodesPercentage / 100
	num = max(num, minCandidateNodesAbsolute)
	num = min(num, n)
	return rand.Int32N(n), num //nolint:gosec // a random start, not a secret
}

// CandidatesToVictimsMap maps each candidate node to its victims.
func (pl *ElasticQuota) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// PodEligibleToPreemptOthers: not with preemptionPolicy Never, and not again
// while victims of an earlier preemption are terminating on its nominated node.
func (pl *ElasticQuota) PodEligibleToPreemptOthers(_ context.Context, pod *v1.Pod, nominatedNodeStatus *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	nom := pod.Status.NominatedNodeName
	if nom == "" || nominatedNodeStatus.Code() == fwk.UnschedulableAndUnresolvable {
		return true, ""
	}
	if ni, _ := pl.fh.SnapshotSharedLister().NodeInfos().Get(nom); ni != nil {
		for _, p := range ni.GetPods() {
			if preemption.PodTerminatingByPreemption(p.GetPod()) {
				return false, "not eligible due to a terminating pod on the nominated node."
			}
		}
	}
	return true, ""
}

// OrderedScoreFuncs: upstream's defaults.
func (pl *ElasticQuota) OrderedScoreFuncs(context.Context, map[string]*extenderv1.Victims) []func(string) int64 {
	return nil
}

// SelectVictimsOnNode picks the fewest victims on a node that let the pod fit
// both the node and its quota. A gang's member preempts only if its gang's
// quota would admit the members it still needs together once every pod they
// may preempt in the cluster is gone (gangFitsWithoutVictims), and victims
// are those the gang may take (its arithmetic decides whether it reclaims).
// Eligible victims (see eligibleVictims) are all
// removed, then reprieved most important first — own-namespace pods before
// borrowers', PDB-violating before others — while the pod still fits.
func (pl *ElasticQuota) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *v1.Pod, nodeInfo fwk.NodeInfo,
	allPossibleVictims []*preemption.DomainVictim, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	logger := klog.FromContext(ctx)
	s, err := readState(state)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	if s.gang != nil && s.gang.admit() != nil {
		// The gang's quota refuses it: preempt for a member only if the
		// gang would be admitted once every pod it may preempt anywhere is
		// gone (each member then frees its own node's share).
		if d := s.room.check(func() *denial { return pl.gangFitsWithoutVictims(s) }); d != nil {
			return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "the pod group's quota does not admit it even without every pod it may preempt: "+d.msg)
		}
	}
	potential := eligibleVictims(pl.shared.mgr, s.victimState(), allPossibleVictims, true)
	if len(potential) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}
	mainNode := nodeInfo.Node().Name
	// As upstream: only the main node's NodeInfo changes; pods of a victim on
	// other nodes go through the PreFilter extensions alone.
	apply := func(v *preemption.DomainVictim, add bool) error {
		for _, pi := range v.Pods() {
			ni := nodeInfo
			if pi.GetPod().Spec.NodeName != mainNode {
				ni = v.AffectedNodes()[pi.GetPod().Spec.NodeName]
			}
			var st *fwk.Status
			if add {
				if pi.GetPod().Spec.NodeName == mainNode {
					nodeInfo.AddPodInfo(pi)
				}
				st = pl.fh.RunPreFilterExtensionAddPod(ctx, state, preemptor, pi, ni)
			} else {
				if pi.GetPod().Spec.NodeName == mainNode {
					if err := nodeInfo.RemovePod(logger, pi.GetPod()); err != nil {
						return err
					}
				}
				st = pl.fh.RunPreFilterExtensionRemovePod(ctx, state, preemptor, pi, ni)
			}
			if !st.IsSuccess() {
				return st.AsError()
			}
		}
		return nil
	}
	fits := func() (bool, *fwk.Status) {
		if s.hasQuota && s.admit() != nil {
			return false, nil
		}
		st := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, preemptor, nodeInfo)
		return st.IsSuccess(), st
	}

	for _, v := range potential {
		if err := apply(v, false); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if ok, st := fits(); !ok {
		if st == nil {
			st = fwk.NewStatus(fwk.Unschedulable, "the pod's ElasticQuota does not admit it even without the eligible victims")
		}
		return nil, 0, st
	}

	violating, nonViolating := preemption.FilterVictimsWithPDBViolation(potential, pdbs)
	var victims []*preemption.DomainVictim
	reprieve := func(v *preemption.DomainVictim) (bool, error) {
		if err := apply(v, true); err != nil {
			return false, err
		}
		if ok, _ := fits(); ok {
			return true, nil
		}
		if err := apply(v, false); err != nil {
			return false, err
		}
		victims = append(victims, v)
		return false, nil
	}
	numViolating := 0
	for _, v := range violating {
		kept, err := reprieve(v.Victim)
		if err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if !kept {
			numViolating += v.ViolateCount
		}
	}
	for _, v := range nonViolating {
		if _, err := reprieve(v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	var pods []*v1.Pod
	for _, v := range victims {
		for _, pi := range v.Pods() {
			pods = append(pods, pi.GetPod())
		}
	}
	if d, err := state.Read(victimsKey); err == nil {
		if l, ok := d.(*victimLog); ok {
			l.record(mainNode, pods)
		}
	}
	if loggerV := logger.V(5); loggerV.Enabled() {
		loggerV.Info("ElasticQuota victims on node", "pod", klog.KObj(preemptor), "node", mainNode, "victims", klog.KObjSlice(pods))
	}
	return pods, numViolating, nil
}

// gangFitsWithoutVictims: the denial of the gang of s by its quota with
// every pod the gang may preempt, on any node, gone (nil: it would be
// admitted). No member evicts anything for a gang that could never be
// admitted (scheduler-plugins' CapacityScheduling re-checks its preemptor's
// quota without its victims likewise).
func (pl *ElasticQuota) gangFitsWithoutVictims(s *preFilterState) *denial {
	nodes, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return &denial{reason: reasonMax, msg: fmt.Sprintf("listing the snapshot's nodes: %v", err)}
	}
	m := pl.shared.mgr
	without := s.gang.Clone().(*preFilterState)
	m.mu.RLock()
	r := newVictimRule(m, s.gang)
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			ok, req := r.eligible(p)
			if !ok {
				continue
			}
			if req != nil {
				r.take(p.Namespace, req)
			}
			without.adjust(p.Namespace, podRequest(p), m.quotas[p.Namespace] != nil, -1)
		}
	}
	m.mu.RUnlock()
	return without.admit()
}

// eligibleVictims applies ElasticQuota's rules to the node's possible victims
// and orders them most important first (the reprieve order):
//   - a pod of the preemptor's own namespace: if of lower priority;
//   - a pod of another namespace with a quota: only if the preemptor stays
//     within its min and that namespace is above its min in a resource the
//     preemptor asks for (it borrows) — whatever its priority, lowest first,
//     and only while that namespace is still above its min in one of those
//     resources, counting the victims taken before it and pods already
//     leaving (what it frees in other resources is a side effect);
//   - a pod of a namespace without a quota: if of lower priority, and the
//     preemptor is within its min or has no quota either.
//
// A victim that is a pod group is eligible only if all its pods are. A pod
// group that preempts (PodGroupPostFilter) is one preemptor: s is the
// arithmetic of its members together.
//
// Uncapped (capped false), a borrower's pods are all eligible while it is
// above its min, without counting those taken before: the caller does not
// know yet which of them it needs (a pod group, placed once every eligible
// pod is gone), and applies the floor itself while it reprieves.
func eligibleVictims[V preemption.Victim](m *manager, s *preFilterState, all []V, capped bool) []V {
	ns := s.pod.Namespace

	// Least important first, so the cap on borrowers takes the right ones.
	sorted := append([]V(nil), all...)
	sort.SliceStable(sorted, func(i, j int) bool { return preemption.MoreImportantVictim(sorted[j], sorted[i]) })

	m.mu.RLock()
	defer m.mu.RUnlock()
	r := newVictimRule(m, s)
	var own, others []V
	for _, v := range sorted {
		ok := true
		var borrowed map[string]vec
		for _, pi := range v.Pods() {
			p := pi.GetPod()
			var req vec
			if ok, req = r.eligible(p); !ok {
				break
			}
			if req != nil {
				if borrowed == nil {
					borrowed = map[string]vec{}
				}
				if borrowed[p.Namespace] == nil {
					borrowed[p.Namespace] = vec{}
				}
				borrowed[p.Namespace].add(req, 1)
			}
		}
		if !ok {
			continue
		}
		if capped {
			for other, req := range borrowed {
				r.take(other, req)
			}
		}
		if v.Pods()[0].GetPod().Namespace == ns {
			own = append(own, v)
		} else {
			others = append(others, v)
		}
	}
	// Reprieve order: most important first; own-namespace pods are kept in
	// preference to borrowers'.
	byImportance := func(vs []V) {
		sort.SliceStable(vs, func(i, j int) bool { return preemption.MoreImportantVictim(vs[i], vs[j]) })
	}
	byImportance(own)
	byImportance(others)
	return append(own, others...)
}

// victimRule is ElasticQuota's rule for one preemptor (see eligibleVictims),
// with the borrowers' requests taken so far. m.mu must be held while it is
// used.
type victimRule struct {
	m     *manager
	s     *preFilterState
	taken map[string]vec // borrowers' requests already taken, by namespace
}

func newVictimRule(m *manager, s *preFilterState) *victimRule {
	return &victimRule{m: m, s: s, taken: map[string]vec{}}
}

// borrows: other is above its min in a resource the preemptor asks for,
// counting pods already leaving (victims of this or a concurrent
// preemption, pods being deleted) and the victims taken so far. What a
// victim frees in other resources is a side effect: a pod is indivisible,
// and a team using less than its memory min must still give back the CPU it
// borrowed.
func (r *victimRule) borrows(other string, q *quota) bool {
	if mutant.On(mutant.ReclaimIgnoresMin) {
		return true
	}
	used, leaving := r.m.nsUsed[other], r.m.nsLeaving[other]
	for name, mn := range q.min {
		if r.s.req[name] > 0 && used[name]-leaving[name]-r.taken[other][name] > mn {
			return true
		}
	}
	return false
}

// eligible reports whether p may be a victim; req is what it takes from a
// borrowing namespace (to be counted with take once the victim is taken),
// nil when it takes nothing from a quota's min.
func (r *victimRule) eligible(p *v1.Pod) (ok bool, req vec) {
	s, m := r.s, r.m
	pp := corev1helpers.PodPriority(p)
	switch q := m.quotas[p.Namespace]; {
	case p.Namespace == s.pod.Namespace:
		return pp < s.prio || mutant.On(mutant.PreemptsHigherPriority), nil
	case !s.hasQuota:
		return q == nil && pp < s.prio, nil
	case q == nil:
		return s.withinMin && pp < s.prio, nil
	case !r.lends(p):
		// Already leaving (another preemption's victim, or being deleted):
		// its room is already off the namespace's usage, so taking it takes
		// nothing more from the namespace.
		return s.withinMin, nil
	default:
		if s.withinMin && r.borrows(p.Namespace, q) {
			return true, podRequest(p)
		}
		return false, nil
	}
}

// lends: taking p takes from its namespace's borrowing — p is a pod of
// another namespace with a quota, not already leaving, and the preemptor has
// a quota (what victimRule.taken counts).
func (r *victimRule) lends(p *v1.Pod) bool {
	if !r.s.hasQuota || p.Namespace == r.s.pod.Namespace || r.m.quotas[p.Namespace] == nil {
		return false
	}
	e := r.m.pods[p.UID]
	return e == nil || !e.leaving
}

func (r *victimRule) take(ns string, req vec) { r.takeSigned(ns, req, 1) }

func (r *victimRule) takeSigned(ns string, req vec, sign int64) {
	if r.taken[ns] == nil {
		r.taken[ns] = vec{}
	}
	r.taken[ns].add(req, sign)
}

// rule is ElasticQuota's preemptible.Rule, for other plugins' dry runs
// (Coscheduling's: would the whole gang fit once preemption made room): the
// preemptors' arithmetic is taken for all of them together (their summed
// requests: whether the gang stays within its min, and which resources it
// needs), and a victim taken counts against its namespace's borrowing.
func (pl *ElasticQuota) rule(preemptors []*v1.Pod) preemptible.Victims {
	m := pl.shared.mgr
	if len(preemptors) == 0 {
		return preemptible.LowerPriority(nil)
	}
	req := vec{}
	for _, p := range preemptors {
		req.add(podRequest(p), 1)
	}
	s := m.snapshotExcluding(preemptors[0], req, corev1helpers.PodPriority(preemptors[0]), preemptors, nil)
	return &dryRunVictims{m: m, r: newVictimRule(m, s)}
}

// dryRunVictims is victimRule behind the manager's read lock, per call.
type dryRunVictims struct {
	m *manager
	r *victimRule
}

func (d *dryRunVictims) Eligible(p *v1.Pod) bool {
	d.m.mu.RLock()
	defer d.m.mu.RUnlock()
	ok, _ := d.r.eligible(p)
	return ok
}

func (d *dryRunVictims) Take(p *v1.Pod)    { d.count(p, 1) }
func (d *dryRunVictims) Release(p *v1.Pod) { d.count(p, -1) }

// count adds (sign 1) or removes (-1) p's request to what its namespace gave
// up, if p takes from a quota's borrowing (victimRule.lends).
func (d *dryRunVictims) count(p *v1.Pod, sign int64) {
	d.m.mu.RLock()
	defer d.m.mu.RUnlock()
	if d.r.lends(p) {
		d.r.takeSigned(p.Namespace, podRequest(p), sign)
	}
}
