package coscheduling

import (
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/mutant"
)

// groupKeyOf returns "namespace/name" of the PodGroup pod belongs to.
func groupKeyOf(pod *v1.Pod) (string, bool) {
	name := pod.Labels[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return "", false
	}
	return pod.Namespace + "/" + name, true
}

// spec is what the plugin reads of a PodGroup.
type spec struct {
	name, namespace string
	uid             types.UID
	created         time.Time
	minMember       int
	minResources    v1.ResourceList
	// timeout is the Permit wait: the PodGroup's scheduleTimeoutSeconds,
	// or the args' default; clamped to the framework's cap (clamped says so).
	timeout time.Duration
	clamped bool
}

// member is a pod of a group as the plugin's pod informer last saw it.
type member struct {
	pod *v1.Pod
}

func (m member) terminal() bool {
	return m.pod.Status.Phase == v1.PodSucceeded || m.pod.Status.Phase == v1.PodFailed
}

// ready: counts toward quorum (exists, will run: not finished, not being
// deleted, not held by scheduling gates).
func (m member) ready() bool {
	return !m.terminal() && m.pod.DeletionTimestamp == nil && len(m.pod.Spec.SchedulingGates) == 0
}

func (m member) bound() bool { return m.pod.Spec.NodeName != "" && !m.terminal() }

// group is the plugin's view of one PodGroup and its pods.
type group struct {
	spec *spec // nil: no PodGroup object (yet, or any more)

	members map[types.UID]member
	// reserved: members between Reserve and either Unreserve or the
	// informer seeing them bound.
	reserved sets.Set[types.UID]
	// allowed: reserved members that the gang released at Permit.
	allowed sets.Set[types.UID]
	// waitingSince: when each member began to wait at Permit.
	waitingSince map[types.UID]time.Time

	// gap is what minResources lacked at the last refusal (scheduler units
	// by resource; nil: none recorded), freed what events since then may
	// have freed, counted the events already added to freed (the queue asks
	// the hint once per waiting member for one event, and again for a member
	// that was in a cycle when it came).
	gap, freed map[v1.ResourceName]int64
	counted    sets.Set[string]
	// closedBy: the event that closed the last gap; the other members' hints
	// for it answer as the first one's did.
	closedBy string

	// failed is set when the gang could not be placed and its held members
	// were released; its members are refused in PreFilter (failedMsg) until
	// an event that may help (a queueing hint, a membership or spec change)
	// or for failedFor at most.
	failed    bool
	failedAt  time.Time
	failedMsg string

	firstSeen time.Time // first member seen: start of the latency metric
	completed bool      // minMember members were bound once (latency observed)
	// scheduleStart: when quorum first existed (status.scheduleStartTime).
	scheduleStart time.Time
}

func newGroup() *group {
	return &group{members: map[types.UID]member{}, reserved: sets.New[types.UID](), allowed: sets.New[types.UID](),
		waitingSince: map[types.UID]time.Time{}}
}

// clearGap forgets a recorded minResources gap and what was freed since.
func (g *group) clearGap() { g.gap, g.freed, g.counted, g.closedBy = nil, nil, nil, "" }

// due: a member waiting at Permit since then reaches its timeout within
// margin of now (the framework's timer for it may fire at any moment).
func (g *group) due(since, now time.Time, margin time.Duration) bool {
	return !now.Before(since.Add(g.spec.timeout - margin))
}

// unhold forgets what is held for uid (reserved, allowed, waiting).
func (g *group) unhold(uid types.UID) {
	g.reserved.Delete(uid)
	g.allowed.Delete(uid)
	delete(g.waitingSince, uid)
}

func (g *group) empty() bool {
	return g.spec == nil && len(g.members) == 0 && g.reserved.Len() == 0
}

// counts of a group at one moment.
type counts struct {
	minMember                  int
	ready                      int // members that exist and can run (quorum)
	placed                     int // bound or reserved (assumed, waiting at Permit, binding)
	bound                      int
	running, succeeded, failed int
}

func (g *group) counts() counts {
	c := counts{}
	if g.spec != nil {
		c.minMember = g.spec.minMember
	}
	for uid, m := range g.members {
		switch m.pod.Status.Phase {
		case v1.PodRunning:
			c.running++
		case v1.PodSucceeded:
			c.succeeded++
		case v1.PodFailed:
			c.failed++
		}
		if m.ready() {
			c.ready++
		}
		if m.bound() {
			c.bound++
		}
		if m.bound() || g.reserved.Has(uid) {
			c.placed++
		}
	}
	for uid := range g.reserved {
		if _, ok := g.members[uid]; !ok {
			c.placed++ // reserved before the informer saw it
		}
	}
	return c
}

// manager holds every group of one cluster. It is fed by the plugin's
// PodGroup and pod informers and by Reserve/Unreserve/Permit.
type manager struct {
	mu     sync.RWMutex
	groups map[string]*group
	dirty  sets.Set[string] // groups whose status may have changed
	// trackDirty: a status writer takes from dirty (writeStatus is on);
	// without one, nothing is marked, so the set cannot grow.
	trackDirty bool
	now        func() time.Time
}

func newManager() *manager {
	return &manager{groups: map[string]*group{}, dirty: sets.New[string](), now: time.Now}
}

// get returns key's group, creating it; mu must be held for writing.
func (m *manager) get(key string) *group {
	g := m.groups[key]
	if g == nil {
		g = newGroup()
		m.groups[key] = g
	}
	return g
}

// forget drops key's group when nothing refers to it; mu held for writing.
func (m *manager) forget(key string) {
	if g := m.groups[key]; g != nil && g.empty() {
		delete(m.groups, key)
	}
}

// setSpec installs (or with nil removes) a group's PodGroup. It reports
// whether the group's members may now pass where they could not before (the
// group appeared or its requirements changed).
func (m *manager) setSpec(key string, s *spec) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.get(key)
	old := g.spec
	g.spec = s
	m.touch(key)
	if s == nil {
		g.failed = false
		m.forget(key)
		return false
	}
	changed := old == nil || old.uid != s.uid || old.minMember != s.minMember || !equalResources(old.minResources, s.minResources) || old.timeout != s.timeout
	if changed {
		// The requirements changed: let the gang try again, and a recorded
		// minResources gap no longer says what it lacks.
		g.failed = false
		g.clearGap()
	}
	return changed
}

func equalResources(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if o, ok := b[n]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// spec returns key's PodGroup as last seen, or nil.
func (m *manager) spec(key string) *spec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g := m.groups[key]; g != nil {
		return g.spec
	}
	return nil
}

// created is the sort key of a group's members: the PodGroup's creation time.
func (m *manager) created(key string) (time.Time, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g := m.groups[key]; g != nil && g.spec != nil {
		return g.spec.created, true
	}
	return time.Time{}, false
}

// observe records a member pod's add or update. It reports whether quorum
// was reached by this change (the group's gated members are then activated).
func (m *manager) observe(key string, pod *v1.Pod) (quorumReached bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.get(key)
	before := g.counts()
	if len(g.members) == 0 && g.firstSeen.IsZero() {
		g.firstSeen = m.now()
	}
	g.members[pod.UID] = member{pod: pod}
	if pod.Spec.NodeName != "" {
		// Bound: the informer now counts it; nothing held for it any more.
		g.unhold(pod.UID)
	}
	after := g.counts()
	if after.ready != before.ready {
		g.failed = false // the gang changed: let it try again
	}
	if g.spec != nil && after.ready >= g.spec.minMember && g.scheduleStart.IsZero() {
		g.scheduleStart = m.now()
	}
	m.touch(key)
	return g.spec != nil && before.ready < g.spec.minMember && after.ready >= g.spec.minMember
}

// remove records a member pod's deletion.
func (m *manager) remove(key string, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil {
		return
	}
	delete(g.members, uid)
	g.unhold(uid)
	if len(g.members) == 0 {
		g.firstSeen, g.completed, g.scheduleStart = time.Time{}, false, time.Time{}
	}
	m.touch(key)
	m.forget(key)
}

// snapshot returns the counts and spec of key's group.
func (m *manager) snapshot(key string) (counts, *spec, bool, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return counts{}, nil, false, ""
	}
	failed := g.failed && m.now().Sub(g.failedAt) < failedFor
	return g.counts(), g.spec, failed, g.failedMsg
}

// failedFor bounds how long a failed gang's members are refused in PreFilter
// without an event: the scheduler's longest backoff by default.
const failedFor = 10 * time.Second

// reserve counts uid as placed.
func (m *manager) reserve(key string, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.get(key)
	g.reserved.Insert(uid)
	m.touch(key)
}

// unreserve undoes reserve. It reports whether the member had been released
// by the gang (its binding failed: the gang stands) and how long it waited
// at Permit (zero if it never waited).
func (m *manager) unreserve(key string, uid types.UID) (wasAllowed bool, waited time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil {
		return false, 0
	}
	wasAllowed = g.allowed.Has(uid)
	if since, ok := g.waitingSince[uid]; ok {
		waited = m.now().Sub(since)
	}
	g.unhold(uid)
	m.touch(key)
	m.forget(key)
	return wasAllowed, waited
}

// permit decides for uid, which Reserve counted: release when the gang has
// minMember members placed (all reserved members are then allowed), else
// wait. Released reports the release; allowed are the members released
// (the caller allows those of them that wait at Permit).
//
// A member waiting at Permit counts only while the framework still holds it
// (held: computed by the caller, outside this lock) and its own timeout is
// not due (dueMargin): the framework's timer, a deletion or a preemption
// rejects a waiting pod without telling this plugin, whose Unreserve runs
// later on the binding goroutine. Counting such a member would release a
// gang one short.
//
// since holds when each released member began to wait, for unrelease.
func (m *manager) permit(key string, uid types.UID, held sets.Set[types.UID]) (released bool, c counts, allowed sets.Set[types.UID], since map[types.UID]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.get(key)
	c = g.counts()
	gone := m.goneLocked(g, uid, held)
	need := g.spec != nil && c.placed-gone.Len() >= g.spec.minMember
	if g.spec != nil && mutant.On(mutant.GangOneShort) {
		need = c.placed-gone.Len() >= g.spec.minMember-1
	}
	if need {
		allowed, since = m.releaseLocked(g, gone)
		return true, c, allowed, since
	}
	c.placed -= gone.Len()
	g.waitingSince[uid] = m.now()
	return false, c, nil, nil
}

// unrelease undoes a release permit decided, before any member was allowed:
// the members it released while they waited (since, and uid, the member at
// Permit) are no longer allowed and wait since when they did; one that left
// meanwhile (Unreserve ran: no longer reserved) is left out. Members allowed
// before this release stay allowed.
func (m *manager) unrelease(key string, uid types.UID, since map[types.UID]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil {
		return
	}
	g.allowed.Delete(uid)
	for w, t := range since {
		g.allowed.Delete(w)
		if g.reserved.Has(w) {
			g.waitingSince[w] = t
		}
	}
}

// goneLocked returns the members waiting at Permit (other than uid, and not
// yet allowed) that the framework no longer holds or whose timeout is due.
func (m *manager) goneLocked(g *group, uid types.UID, held sets.Set[types.UID]) sets.Set[types.UID] {
	gone := sets.New[types.UID]()
	if g.spec == nil {
		return gone
	}
	margin, now := dueMargin(g.spec.timeout), m.now()
	for w, since := range g.waitingSince {
		if w == uid || g.allowed.Has(w) {
			continue
		}
		if !held.Has(w) || g.due(since, now, margin) {
			gone.Insert(w)
		}
	}
	return gone
}

// releaseLocked allows the group's reserved members but the gone ones; since
// holds when the allowed waiting members began to wait.
func (m *manager) releaseLocked(g *group, gone sets.Set[types.UID]) (allowed sets.Set[types.UID], since map[types.UID]time.Time) {
	allowed = g.reserved.Difference(gone)
	g.allowed = g.allowed.Union(allowed)
	since = map[types.UID]time.Time{}
	for w, t := range g.waitingSince {
		if !gone.Has(w) {
			since[w] = t
			delete(g.waitingSince, w)
		}
	}
	return allowed, since
}

// dueMargin is how close to its timeout a waiting member no longer counts:
// the framework's timer may reject it at any moment. A tenth of the timeout
// for short ones (a 1 s timeout must not make every waiting member due).
func dueMargin(timeout time.Duration) time.Duration {
	return min(timerMargin, timeout/10)
}

// timesOutWithin reports whether uid, waiting at Permit, reaches its
// group's timeout within margin (the framework's timer for it starts after
// permit recorded the wait, so it fires no earlier than that).
func (m *manager) timesOutWithin(key string, uid types.UID, margin time.Duration) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil || g.spec == nil {
		return false
	}
	since, ok := g.waitingSince[uid]
	return ok && g.due(since, m.now(), margin)
}

// release marks the reserved members of key's group allowed when the group
// has minMember members placed (after its minMember was lowered, say), not
// counting the waiting members the framework no longer holds (see permit).
// It returns the members released, nil if none.
func (m *manager) release(key string, held sets.Set[types.UID]) (sets.Set[types.UID], map[types.UID]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil || g.spec == nil || g.reserved.Len() == 0 {
		return nil, nil
	}
	gone := m.goneLocked(g, "", held)
	if g.counts().placed-gone.Len() < g.spec.minMember {
		return nil, nil
	}
	return m.releaseLocked(g, gone)
}

// gapOf returns what the group's minResources lacked at its last refusal
// (nil: none recorded).
func (m *manager) gapOf(key string) map[v1.ResourceName]int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g := m.groups[key]; g != nil {
		return g.gap
	}
	return nil
}

// setGap records what minResources lacked at a refusal (nil: it fit), and
// starts counting what is freed from there.
func (m *manager) setGap(key string, gap map[v1.ResourceName]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil {
		return
	}
	g.gap, g.freed, g.counted, g.closedBy = gap, nil, nil, ""
	if gap != nil {
		g.freed, g.counted = make(map[v1.ResourceName]int64, len(gap)), sets.New[string]()
	}
}

// mayClose adds what the event (id) frees to what was freed since the
// group's minResources refusal. hasGap says whether one is recorded; closes
// whether what was freed now covers it (the gap is then dropped: the next
// attempt recomputes it), also when asked again about the event that did.
func (m *manager) mayClose(key, id string, freed map[v1.ResourceName]int64) (hasGap, closes bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil {
		return false, false
	}
	if g.gap == nil {
		return false, id != "" && id == g.closedBy
	}
	if !g.counted.Has(id) {
		g.counted.Insert(id)
		for name := range g.gap {
			g.freed[name] += freed[name]
		}
	}
	for name, lack := range g.gap {
		if g.freed[name] < lack {
			return true, false
		}
	}
	g.clearGap()
	g.closedBy = id
	return true, true
}

// markFailed refuses the group's members in PreFilter until something changes.
func (m *manager) markFailed(key, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.groups[key]; g != nil {
		g.failed, g.failedAt, g.failedMsg = true, m.now(), msg
		// A failure of another kind than minResources: any freed room may help.
		g.clearGap()
	}
}

// clearFailed lets the group try again (an event that may help arrived).
func (m *manager) clearFailed(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.groups[key]; g != nil {
		g.failed = false
	}
}

// pendingMembers returns the group's members that wait to be scheduled
// (not bound, not reserved, ready), keyed as PodsToActivate wants.
func (m *manager) pendingMembers(key string) map[string]*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil {
		return nil
	}
	out := map[string]*v1.Pod{}
	for uid, mem := range g.members {
		if mem.ready() && !mem.bound() && !g.reserved.Has(uid) {
			out[mem.pod.Namespace+"/"+mem.pod.Name] = mem.pod
		}
	}
	return out
}

// toPlace returns pod and as many other unplaced members of key's group as
// the group still needs to reach minMember: those a preemption nominated
// first (their room is promised, and ElasticQuota counts them among the
// gang's, not again as nominated pods), then by name, for a stable answer.
func (m *manager) toPlace(key string, pod *v1.Pod) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[key]
	if g == nil || g.spec == nil {
		return nil
	}
	need := g.spec.minMember - g.counts().placed
	if need < 1 {
		return nil
	}
	var others []*v1.Pod
	for uid, mem := range g.members {
		if uid != pod.UID && mem.ready() && !mem.bound() && !g.reserved.Has(uid) {
			others = append(others, mem.pod)
		}
	}
	sort.Slice(others, func(i, j int) bool {
		if ni, nj := others[i].Status.NominatedNodeName != "", others[j].Status.NominatedNodeName != ""; ni != nj {
			return ni
		}
		return others[i].Name < others[j].Name
	})
	if len(others) > need-1 {
		others = others[:need-1]
	}
	return append([]*v1.Pod{pod}, others...)
}

// completion reports, once per group incarnation, the time from its first
// member seen to minMember members bound.
func (m *manager) completion(key string) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[key]
	if g == nil || g.spec == nil || g.completed || g.firstSeen.IsZero() {
		return 0, false
	}
	if g.counts().bound < g.spec.minMember {
		return 0, false
	}
	g.completed = true
	return m.now().Sub(g.firstSeen), true
}

// touch marks key's status as possibly stale; mu held for writing.
func (m *manager) touch(key string) {
	if m.trackDirty {
		m.dirty.Insert(key)
	}
}

// takeDirty returns the groups whose status may have changed, sorted.
func (m *manager) takeDirty() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := sets.List(m.dirty)
	m.dirty.Clear()
	return keys
}

func (m *manager) markAllDirty() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.groups {
		m.dirty.Insert(k)
	}
}

func (m *manager) markDirty(keys ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirty.Insert(keys...)
}

// statusOf computes what the PodGroup's status should be, from the members
// the informer sees, following scheduler-plugins' PodGroup controller (but
// counting only the group's own namespace: SP's controller lists pods of
// that name in every namespace).
func (m *manager) statusOf(key string, cur schedv1alpha1.PodGroupStatus) schedv1alpha1.PodGroupStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := *cur.DeepCopy()
	g := m.groups[key]
	if g == nil || g.spec == nil {
		return out
	}
	if cur.Phase == schedv1alpha1.PodGroupFinished || cur.Phase == schedv1alpha1.PodGroupFailed {
		return out // final, as in SP
	}
	c := g.counts()
	out.Running, out.Succeeded, out.Failed = int32(c.running), int32(c.succeeded), int32(c.failed)
	total := len(g.members)
	switch {
	case total < c.minMember:
		out.Phase = schedv1alpha1.PodGroupPending
	case int(out.Succeeded+out.Running) >= c.minMember:
		out.Phase = schedv1alpha1.PodGroupRunning
	default:
		out.Phase = schedv1alpha1.PodGroupScheduling
	}
	if out.Failed != 0 && int(out.Failed+out.Running+out.Succeeded) >= c.minMember {
		out.Phase = schedv1alpha1.PodGroupFailed
	}
	if int(out.Succeeded) >= c.minMember && c.minMember > 0 {
		out.Phase = schedv1alpha1.PodGroupFinished
	}
	if out.Phase != schedv1alpha1.PodGroupPending {
		if out.ScheduleStartTime.IsZero() {
			start := g.scheduleStart
			if start.IsZero() { // quorum was never seen live (members already finished)
				start = g.firstSeen
			}
			out.ScheduleStartTime.Time = start.Truncate(time.Second)
		}
		if out.OccupiedBy == "" {
			out.OccupiedBy = occupiedBy(g)
		}
	}
	return out
}

// occupiedBy names the owners of the group's pods in SP's format,
// "namespace/ownerName" of each owner reference, sorted and comma-joined
// (SP takes the first pod's owners; the union of all members' is the same
// for a job's pods and does not depend on which pod comes first).
func occupiedBy(g *group) string {
	refs := sets.New[string]()
	for _, m := range g.members {
		for _, o := range m.pod.OwnerReferences {
			refs.Insert(m.pod.Namespace + "/" + o.Name)
		}
	}
	list := refs.UnsortedList()
	sort.Strings(list)
	return strings.Join(list, ",")
}
