package admissionfeedback

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-scheduler/berth/internal/mutant"
)

// maxRefusals bounds the refusals held in memory (one per controller and
// node); past it the oldest is dropped and counted.
const maxRefusals = 10000

// controller identifies a pod's controller (its owner reference with
// controller: true).
type controller struct {
	uid       types.UID
	kind      string
	namespace string
	name      string
}

func (c controller) String() string { return c.kind + " " + c.namespace + "/" + c.name }

// observed is one refused pod, as the Failed-pod informer saw it.
type observed struct {
	ctrl    controller
	node    string
	reason  string
	message string
	pod     string // namespace/name
	podUID  types.UID
	at      time.Time
}

// refusal is what is remembered of a controller's pods refused by one node.
type refusal struct {
	observed     // the latest refusal
	count    int // refusals in this streak: the avoidance doubles with each
	until    time.Time
	// forgetAt: the streak is remembered until then (for the doubling),
	// maxRefusalTTL past the avoidance.
	forgetAt time.Time
	// waiting are pods of the controller that reached PreFilter while the
	// node was avoided: they are activated when the avoidance ends.
	waiting map[types.UID]*v1.Pod
}

// store holds the refusals. Reads on the scheduling path take the mutex
// once per pod (PreFilter); Score reads blackHoles, an immutable set.
type store struct {
	ttl, maxTTL, window time.Duration
	threshold           int

	mu     sync.Mutex
	byCtrl map[types.UID]map[string]*refusal
	byNode map[string]map[types.UID]*refusal
	n      int

	// blackHoles is replaced, never changed: nodes that refused pods of
	// threshold controllers within window.
	blackHoles atomic.Pointer[sets.Set[string]]
	// evicted counts refusals dropped for maxRefusals.
	evicted func()
}

func newStore(ttl, maxTTL, window time.Duration, threshold int) *store {
	s := &store{ttl: ttl, maxTTL: maxTTL, window: window, threshold: threshold,
		byCtrl: map[types.UID]map[string]*refusal{}, byNode: map[string]map[types.UID]*refusal{}, evicted: func() {}}
	empty := sets.New[string]()
	s.blackHoles.Store(&empty)
	return s
}

// ttlFor is the avoidance after the count-th refusal in a streak: ttl,
// doubling, at most maxTTL.
func (s *store) ttlFor(count int) time.Duration {
	d := s.ttl
	for i := 1; i < count && d < s.maxTTL; i++ {
		d *= 2
	}
	return min(d, s.maxTTL)
}

// observe records a refusal. It reports the refusal as stored (nil for a
// pod already counted) and whether the node became a black hole.
func (s *store) observe(o observed) (r *refusal, becameBlackHole bool) {
	if mutant.On(mutant.ForgetsRefusals) {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wasBlack := s.isBlackHoleLocked(o.node, o.at)
	r = s.byCtrl[o.ctrl.uid][o.node]
	switch {
	case r != nil && r.podUID == o.podUID:
		return nil, false
	case r != nil:
		r.count++
		if o.at.Before(r.at) { // out of order: counts, but the latest stays
			o.at = r.at
		}
		r.observed = o
	default:
		r = &refusal{observed: o, count: 1}
		if s.byCtrl[o.ctrl.uid] == nil {
			s.byCtrl[o.ctrl.uid] = map[string]*refusal{}
		}
		if s.byNode[o.node] == nil {
			s.byNode[o.node] = map[types.UID]*refusal{}
		}
		s.byCtrl[o.ctrl.uid][o.node] = r
		s.byNode[o.node][o.ctrl.uid] = r
		s.n++
		if s.n > maxRefusals {
			s.evictOldestLocked()
		}
	}
	r.until = r.at.Add(s.ttlFor(r.count))
	r.forgetAt = r.until.Add(s.maxTTL)
	if !wasBlack && s.isBlackHoleLocked(o.node, o.at) {
		s.publishBlackHolesLocked(o.at)
		return r, true
	}
	return r, false
}

// evictOldestLocked drops the tenth of the refusals refused longest ago
// (rare: a cluster with maxRefusals controller-and-node pairs refused within
// the TTLs), a tenth at a time so that the scan is paid once per
// maxRefusals/10 refusals.
func (s *store) evictOldestLocked() {
	all := make([]*refusal, 0, s.n)
	for _, byNode := range s.byCtrl {
		for _, r := range byNode {
			all = append(all, r)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, r := range all[:len(all)-maxRefusals*9/10] {
		s.deleteLocked(r)
		s.evicted()
	}
}

func (s *store) deleteLocked(r *refusal) {
	delete(s.byCtrl[r.ctrl.uid], r.node)
	if len(s.byCtrl[r.ctrl.uid]) == 0 {
		delete(s.byCtrl, r.ctrl.uid)
	}
	delete(s.byNode[r.node], r.ctrl.uid)
	if len(s.byNode[r.node]) == 0 {
		delete(s.byNode, r.node)
	}
	s.n--
}

// isBlackHoleLocked: the node refused pods of threshold controllers within
// the window before now.
func (s *store) isBlackHoleLocked(node string, now time.Time) bool {
	if s.threshold <= 0 || len(s.byNode[node]) < s.threshold {
		return false
	}
	n := 0
	for _, r := range s.byNode[node] {
		if now.Sub(r.at) < s.window {
			n++
		}
	}
	return n >= s.threshold
}

func (s *store) publishBlackHolesLocked(now time.Time) {
	set := sets.New[string]()
	if s.threshold > 0 {
		for node := range s.byNode {
			if s.isBlackHoleLocked(node, now) {
				set.Insert(node)
			}
		}
	}
	s.blackHoles.Store(&set)
}

// avoided returns the controller's refusals that still avoid their node at
// now, and registers pod to be activated when they end.
func (s *store) avoided(ctrl types.UID, pod *v1.Pod, now time.Time) []observed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []observed
	for _, r := range s.byCtrl[ctrl] {
		if now.Before(r.until) {
			out = append(out, r.observed)
			if r.waiting == nil {
				r.waiting = map[types.UID]*v1.Pod{}
			}
			r.waiting[pod.UID] = pod
		}
	}
	return out
}

// forgetWaiting drops pod from the pods waiting for its controller's
// avoidances (it was bound or deleted).
func (s *store) forgetWaiting(pod *v1.Pod) {
	ctrl, ok := controllerOf(pod)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.byCtrl[ctrl.uid] {
		delete(r.waiting, pod.UID)
	}
}

// forgetNode drops every refusal of the node (fixed, or deleted) and
// returns the pods that waited for it.
func (s *store) forgetNode(node string, now time.Time) (forgotten int, waiting []*v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.byNode[node] {
		for _, p := range r.waiting {
			waiting = append(waiting, p)
		}
		s.deleteLocked(r)
		forgotten++
	}
	if forgotten > 0 {
		s.publishBlackHolesLocked(now)
	}
	return forgotten, waiting
}

// sweep ends avoidances due at now (returning their waiting pods), drops
// streaks past their memory and republishes the black holes.
func (s *store) sweep(now time.Time) (waiting []*v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, byNode := range s.byCtrl {
		for _, r := range byNode {
			if !now.Before(r.until) && len(r.waiting) > 0 {
				for _, p := range r.waiting {
					waiting = append(waiting, p)
				}
				r.waiting = nil
			}
			if !now.Before(r.forgetAt) {
				s.deleteLocked(r)
			}
		}
	}
	s.publishBlackHolesLocked(now)
	return waiting
}

// size returns how many refusals are held.
func (s *store) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// sortObserved orders refusals by time (a restarted scheduler replays the
// Failed pods it lists in the order the nodes refused them).
func sortObserved(os []observed) {
	sort.SliceStable(os, func(i, j int) bool { return os[i].at.Before(os[j].at) })
}
