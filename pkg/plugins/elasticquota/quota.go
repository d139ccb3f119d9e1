package elasticquota

import (
	"maps"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/quantity"
)

// vec is a resource list in integers: milli-units for cpu, units for the rest.
type vec map[v1.ResourceName]int64

func fmtQ(name v1.ResourceName, v int64) string { return quantity.FromScaled(name, v).String() }

func toVec(list v1.ResourceList) vec {
	out := make(vec, len(list))
	for name, q := range list {
		out[name] = quantity.Scaled(name, q)
	}
	return out
}

// podRequest is what a pod counts against its quota: the requests the
// scheduler and kubelet use (init and sidecar containers, pod overhead), and
// one "pods".
func podRequest(pod *v1.Pod) vec {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	out := make(vec, len(reqs)+1)
	for name, q := range reqs {
		if v := quantity.Scaled(name, q); v != 0 {
			out[name] = v
		}
	}
	out[v1.ResourcePods] = 1
	return out
}

func (v vec) add(o vec, sign int64) {
	for name, x := range o {
		v[name] += sign * x
	}
}

// quota is the effective ElasticQuota of a namespace.
type quota struct {
	name string
	// uid and resourceVersion identify the object the quota was built from,
	// so that an event older than what is installed is never applied.
	uid             types.UID
	resourceVersion string
	// min and max are replaced, never mutated, so snapshots may share them.
	min, max vec
	// accounted are the resources this quota limits.
	accounted sets.Set[v1.ResourceName]
}

func newQuota(eq *schedv1alpha1.ElasticQuota, only sets.Set[v1.ResourceName]) *quota {
	q := &quota{name: eq.Name, uid: eq.UID, resourceVersion: eq.ResourceVersion, min: toVec(eq.Spec.Min), max: toVec(eq.Spec.Max), accounted: sets.New[v1.ResourceName]()}
	for name := range q.min {
		q.accounted.Insert(name)
	}
	for name := range q.max {
		q.accounted.Insert(name)
	}
	if only.Len() > 0 {
		q.accounted = q.accounted.Intersection(only)
		for name := range q.min {
			if !only.Has(name) {
				delete(q.min, name)
			}
		}
		for name := range q.max {
			if !only.Has(name) {
				delete(q.max, name)
			}
		}
	}
	return q
}

// newerThan reports whether the installed quota was built from a newer
// resource version than rv (of the same object, or of one re-created since).
// Versions that cannot be compared (none in unit tests) are not newer.
func (q *quota) newerThan(rv string) bool {
	c, err := resourceversion.CompareResourceVersion(rv, q.resourceVersion)
	return err == nil && c < 0
}

// effectiveQuota picks the quota that governs a namespace when it has several
// (scheduler-plugins expects one): the oldest, then the first by name.
func effectiveQuota(eqs []*schedv1alpha1.ElasticQuota) *schedv1alpha1.ElasticQuota {
	if len(eqs) == 0 {
		return nil
	}
	sort.Slice(eqs, func(i, j int) bool {
		ti, tj := eqs[i].CreationTimestamp, eqs[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return eqs[i].Name < eqs[j].Name
	})
	return eqs[0]
}

type podEntry struct {
	ns   string
	req  vec
	prio int32
	// assumed: reserved by this scheduler, not yet seen bound.
	assumed bool
	// leaving: being deleted, or chosen as a victim (preemptedAt); still
	// counted in the usage, but not taken again by reclaim.
	leaving bool
	// deleting: the informer saw its deletionTimestamp.
	deleting bool
	// simulated: reserved by a pod group's scheduling cycle, which reserves
	// each member to see whether the whole group fits and reverts them all
	// before reserving the feasible ones again for binding. It counts for
	// admission (the group is admitted whole), not in status.used or the
	// used gauge, which must never show a reservation that is reverted.
	simulated bool
	// preemptedAt: when this scheduler's preemption chose the pod as a
	// victim (zero: it did not). The pod counts as leaving from then, whatever
	// the informer delivers before its deletion, for leavingGrace at most: a
	// deletion that never came (the API call failed) must not hide the pod's
	// usage for good.
	preemptedAt time.Time
}

// leavingGrace bounds how long a victim counts as leaving before the
// informer sees it deleted (the asynchronous preemption's API calls take
// milliseconds; graceful termination is tracked by deletionTimestamp).
const leavingGrace = time.Minute

// manager keeps the usage of every namespace exact between scheduling cycles:
// pods bound or reserved count, terminal or deleted pods do not. Totals over
// the namespaces that have a quota are kept incrementally, so admission costs
// the same with 1 quota or 1,000.
type manager struct {
	mu        sync.RWMutex
	quotas    map[string]*quota // by namespace
	nsUsed    map[string]vec    // by namespace, quota or not
	nsLeaving map[string]vec    // part of nsUsed held by pods being deleted
	// nsSimulated is the part of nsUsed held by a pod group cycle's
	// simulated reservations: in admission, not in what is reported.
	nsSimulated map[string]vec
	pods        map[types.UID]*podEntry
	nominated   map[types.UID]*podEntry
	totalMin    vec // sum of min over quotas
	totalUsed   vec // sum of used over namespaces with a quota
	// dirty are namespaces whose status.used may be out of date.
	dirty sets.Set[string]
	// preempted are the pods counted as leaving because a preemption chose
	// them (expirePreempted looks at these only).
	preempted sets.Set[types.UID]
	now       func() time.Time
}

func newManager() *manager {
	return &manager{
		quotas:      map[string]*quota{},
		nsUsed:      map[string]vec{},
		nsLeaving:   map[string]vec{},
		nsSimulated: map[string]vec{},
		pods:        map[types.UID]*podEntry{},
		nominated:   map[types.UID]*podEntry{},
		totalMin:    vec{},
		totalUsed:   vec{},
		dirty:       sets.New[string](),
		preempted:   sets.New[types.UID](),
		now:         time.Now,
	}
}

// setQuota installs (q != nil) or removes the quota of a namespace.
func (m *manager) setQuota(ns string, q *quota) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.quotas[ns]; old != nil {
		m.totalMin.add(old.min, -1)
		m.totalUsed.add(m.nsUsed[ns], -1)
	}
	if q == nil {
		delete(m.quotas, ns)
		return
	}
	m.quotas[ns] = q
	m.totalMin.add(q.min, 1)
	m.totalUsed.add(m.nsUsed[ns], 1)
	m.dirty.Insert(ns)
}

func (m *manager) countLocked(e *podEntry, sign int64) {
	addTo(m.nsUsed, e.ns, e.req, sign)
	if e.leaving {
		addTo(m.nsLeaving, e.ns, e.req, sign)
	}
	if e.simulated {
		addTo(m.nsSimulated, e.ns, e.req, sign)
	}
	if _, ok := m.quotas[e.ns]; ok {
		m.totalUsed.add(e.req, sign)
		if !e.simulated {
			m.dirty.Insert(e.ns)
		}
	}
}

// realize makes a simulated entry a real reservation (bound, or reserved
// by a cycle that binds it): it counts in what is reported from now on.
func (m *manager) realize(e *podEntry) {
	if e.simulated {
		m.countLocked(e, -1)
		e.simulated = false
		m.countLocked(e, 1)
	}
}

// reported is a namespace's usage as status.used and the used gauge show
// it: without the reservations of a pod group cycle's simulation.
func (m *manager) reported(ns string) vec {
	used, sim := m.nsUsed[ns], m.nsSimulated[ns]
	if len(sim) == 0 {
		return used
	}
	out := make(vec, len(used))
	for name, v := range used {
		out[name] = v - sim[name]
	}
	return out
}

// addTo adds sign*req to byNS[ns], dropping resources that fall to zero and
// the namespace once nothing is left, so namespace churn does not grow the map.
func addTo(byNS map[string]vec, ns string, req vec, sign int64) {
	v := byNS[ns]
	if v == nil {
		v = vec{}
		byNS[ns] = v
	}
	for name, x := range req {
		if v[name] += sign * x; v[name] == 0 {
			delete(v, name)
		}
	}
	if len(v) == 0 {
		delete(byNS, ns)
	}
}

func (m *manager) removeLocked(uid types.UID) {
	m.preempted.Delete(uid)
	if e := m.pods[uid]; e != nil {
		m.countLocked(e, -1)
		delete(m.pods, uid)
	}
	delete(m.nominated, uid)
}

// observe applies an informer's view of a pod.
func (m *manager) observe(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		m.removeLocked(pod.UID)
		return
	}
	if pod.Spec.NodeName == "" {
		// A pending pod counts only while this scheduler has it reserved;
		// one nominated after preemption is remembered for admission. A
		// reserved pod gets NominatedNodeName too, written before its PreBind
		// plugins run: it counts once, as reserved.
		e := m.pods[pod.UID]
		if e != nil && !e.assumed {
			m.removeLocked(pod.UID)
			e = nil
		}
		if pod.Status.NominatedNodeName != "" && e == nil {
			m.nominate(pod)
		} else {
			delete(m.nominated, pod.UID)
		}
		return
	}
	delete(m.nominated, pod.UID)
	req := podRequest(pod)
	now := m.now()
	old := m.pods[pod.UID]
	preemptedAt := preemptedByScheduler(pod, now)
	if old != nil && old.preemptedAt.After(preemptedAt) {
		preemptedAt = old.preemptedAt
	}
	deleting := pod.DeletionTimestamp != nil
	leaving := deleting || (!preemptedAt.IsZero() && now.Sub(preemptedAt) < leavingGrace)
	if e := old; e != nil {
		m.realize(e)
		e.assumed = false
		e.preemptedAt, e.deleting = preemptedAt, deleting
		if e.leaving == leaving && maps.Equal(e.req, req) {
			return
		}
		m.countLocked(e, -1) // resized in place, or being deleted
	}
	e := &podEntry{ns: pod.Namespace, req: req, prio: corev1helpers.PodPriority(pod), leaving: leaving, deleting: deleting, preemptedAt: preemptedAt}
	if !preemptedAt.IsZero() {
		m.preempted.Insert(pod.UID)
	}
	m.pods[pod.UID] = e
	m.countLocked(e, 1)
}

// preemptedByScheduler returns when a scheduler's preemption marked the pod
// as its victim (the DisruptionTarget condition it writes before the
// deletion), zero if it did not or longer than leavingGrace before now.
func preemptedByScheduler(pod *v1.Pod, now time.Time) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler &&
			now.Sub(c.LastTransitionTime.Time) < leavingGrace {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// markPreempted counts the victims of a preemption as leaving at once.
func (m *manager) markPreempted(victims []*v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, p := range victims {
		e := m.pods[p.UID]
		if e == nil {
			continue
		}
		e.preemptedAt = now
		m.preempted.Insert(p.UID)
		if !e.leaving {
			m.countLocked(e, -1)
			e.leaving = true
			m.countLocked(e, 1)
		}
	}
}

// expirePreempted stops counting as leaving the victims chosen longer than
// leavingGrace ago whose deletion the informer has not seen (the preemption's
// API calls failed): their usage counts again, and reclaim may take them
// again. The status loop calls it every round.
func (m *manager) expirePreempted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for uid := range m.preempted {
		e := m.pods[uid]
		switch {
		case e == nil || e.deleting:
			m.preempted.Delete(uid) // gone, or its deletion is seen: leaving for good
		case now.Sub(e.preemptedAt) >= leavingGrace:
			m.preempted.Delete(uid)
			e.preemptedAt = time.Time{}
			if e.leaving {
				m.countLocked(e, -1)
				e.leaving = false
				m.countLocked(e, 1)
			}
		}
	}
}

// forgetPod applies an informer's deletion of a pod.
func (m *manager) forgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(uid)
}

// assume counts a pod this scheduler reserved on a node (Reserve);
// simulated: a pod group cycle reserved it to try the group (see
// podEntry.simulated).
func (m *manager) assume(pod *v1.Pod, simulated bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[pod.UID]; ok {
		if !simulated {
			m.realize(e)
		}
		return
	}
	delete(m.nominated, pod.UID)
	e := &podEntry{ns: pod.Namespace, req: podRequest(pod), prio: corev1helpers.PodPriority(pod), assumed: true, simulated: simulated}
	m.pods[pod.UID] = e
	m.countLocked(e, 1)
}

// nominate remembers a pod nominated to a node for admission (its node's
// room is promised to it, but it is not reserved or bound).
func (m *manager) nominate(pod *v1.Pod) {
	m.nominated[pod.UID] = &podEntry{ns: pod.Namespace, req: podRequest(pod), prio: corev1helpers.PodPriority(pod)}
}

// unassume undoes assume (Unreserve), unless the pod was seen bound meanwhile.
// A pod still nominated counts as nominated again: a pod group's cycle
// restores a member's nomination in memory when it reverts, with no API write
// (and so no informer event) to tell observe.
//
// simulated: a pod group cycle's Unreserve of a member it tried, which undoes
// only such a try: a reservation made for binding stays.
func (m *manager) unassume(pod *v1.Pod, simulated bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[pod.UID]; e != nil && e.assumed && (e.simulated || !simulated) {
		m.removeLocked(pod.UID)
		if pod.Status.NominatedNodeName != "" {
			m.nominate(pod)
		}
	}
}

func (m *manager) hasQuota(ns string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.quotas[ns]
	return ok
}

// usedOf returns a copy of a namespace's usage of the resources it accounts.
func (m *manager) usedOf(ns string) (v1.ResourceList, *quota) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q := m.quotas[ns]
	if q == nil {
		return nil, nil
	}
	used := m.reported(ns)
	out := make(v1.ResourceList, q.accounted.Len())
	for name := range q.accounted {
		out[name] = *quantity.FromScaled(name, used[name])
	}
	return out, q
}

func (m *manager) takeDirty() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.dirty.UnsortedList()
	m.dirty.Clear()
	return out
}

func (m *manager) markDirty(ns ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirty.Insert(ns...)
}

func (m *manager) quotaNamespaces() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.quotas))
	for ns := range m.quotas {
		out = append(out, ns)
	}
	return out
}

// quota returns the installed quota of a namespace, or nil.
func (m *manager) quota(ns string) *quota {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.quotas[ns]
}
