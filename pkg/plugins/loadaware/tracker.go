package loadaware

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-scheduler/berth/internal/slotmap"
)

// estimate is what a pod is expected to use.
type estimate struct {
	cpuMilli int64
	memBytes int64
}

// assignedPod is a pod placed on a node at a time. A sample includes its
// usage only once the pod has been running for the grace period before the
// sample was taken: a pod bound but still pulling its image uses nothing yet,
// and dropping its estimate at the next sample would let a burst pile up
// again on the same node.
type assignedPod struct {
	node string
	est  estimate
	at   time.Time
	// startedAt is when the pod was last seen running (all containers), zero
	// while it is not.
	startedAt time.Time
}

// includedBy reports whether a sample taken at ts includes the pod's usage.
func (p assignedPod) includedBy(ts time.Time, grace time.Duration) bool {
	return !p.startedAt.IsZero() && !p.at.After(ts) && ts.Sub(p.startedAt) >= grace
}

// includedFrom is the earliest sample time that includes the pod's usage
// (zero: none yet, the pod is not running); includedBy(ts) is ts at or
// after it.
func (p assignedPod) includedFrom(grace time.Duration) time.Time {
	if p.startedAt.IsZero() {
		return time.Time{}
	}
	from := p.startedAt.Add(grace)
	if p.at.After(from) {
		from = p.at
	}
	return from
}

// tracker remembers the pods assigned to nodes recently (assumed by this
// scheduler in Reserve, or seen bound by the pod informer), so that a burst
// of pods does not land on the node that looked idle at the last sample.
//
// Filter and Score read a node's pods from 16 goroutines for every node of
// every cycle, while Reserve and the pod informer write: the readers get
// each node's pods as an immutable slice from a slotmap (no lock, no map
// lookup per pod), which the writers replace under mu.
type tracker struct {
	grace  time.Duration
	mu     sync.Mutex
	pods   map[types.UID]assignedPod
	byNode map[string]map[types.UID]struct{}
	// onNode: node -> its pods' entries, rebuilt when one of them changes.
	onNode *slotmap.Map[nodePods]
	// changed is called (under mu) after a node's pods changed: the plugin
	// invalidates the node's record.
	changed func(node string)
}

// nodePods are a node's tracked pods as Filter and Score read them.
type nodePods struct {
	pods []assignedPod
	// total sums every pod's estimate; a sample taken before firstIncluded
	// includes none of them (the common case: pods just placed), so pending
	// is total without a look at each pod.
	total         estimate
	firstIncluded time.Time
}

func newTracker(grace time.Duration) *tracker {
	return &tracker{grace: grace, pods: map[types.UID]assignedPod{}, byNode: map[string]map[types.UID]struct{}{}, onNode: slotmap.New[nodePods]()}
}

// publishLocked rebuilds the readers' view of the node's pods.
func (t *tracker) publishLocked(node string) {
	uids := t.byNode[node]
	if len(uids) == 0 {
		t.onNode.Delete(node)
		t.notifyLocked(node)
		return
	}
	np := &nodePods{pods: make([]assignedPod, 0, len(uids))}
	for uid := range uids {
		p := t.pods[uid]
		np.pods = append(np.pods, p)
		np.total.cpuMilli += p.est.cpuMilli
		np.total.memBytes += p.est.memBytes
		if at := p.includedFrom(t.grace); !at.IsZero() && (np.firstIncluded.IsZero() || at.Before(np.firstIncluded)) {
			np.firstIncluded = at
		}
	}
	t.onNode.Store(node, np)
	t.notifyLocked(node)
}

func (t *tracker) notifyLocked(node string) {
	if t.changed != nil {
		t.changed(node)
	}
}

// add records the pod, or for a pod already known on the same node, its new
// running state (a pod this scheduler reserved keeps its Reserve time when
// the informer later sees it bound).
func (t *tracker) add(uid types.UID, p assignedPod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.pods[uid]; ok {
		if old.node == p.node {
			old.startedAt = p.startedAt
			t.pods[uid] = old
			t.publishLocked(p.node)
			return
		}
		t.removeLocked(uid)
	}
	t.pods[uid] = p
	if t.byNode[p.node] == nil {
		t.byNode[p.node] = map[types.UID]struct{}{}
	}
	t.byNode[p.node][uid] = struct{}{}
	t.publishLocked(p.node)
	estimatedPods.Set(float64(len(t.pods)))
}

func (t *tracker) remove(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(uid)
}

func (t *tracker) removeLocked(uid types.UID) {
	p, ok := t.pods[uid]
	if !ok {
		return
	}
	delete(t.pods, uid)
	if set := t.byNode[p.node]; set != nil {
		delete(set, uid)
		if len(set) == 0 {
			delete(t.byNode, p.node)
		}
	}
	t.publishLocked(p.node)
	estimatedPods.Set(float64(len(t.pods)))
}

// pending sums the estimates of the pods on node that a sample taken at
// since does not include.
func (t *tracker) pending(node string, since time.Time) estimate {
	var sum estimate
	np := t.onNode.Load(node)
	if np == nil {
		return sum
	}
	if np.firstIncluded.IsZero() || since.Before(np.firstIncluded) {
		return np.total
	}
	for _, p := range np.pods {
		if !p.includedBy(since, t.grace) {
			sum.cpuMilli += p.est.cpuMilli
			sum.memBytes += p.est.memBytes
		}
	}
	return sum
}

// prune forgets pods that a node's sample already includes, and running pods
// that started before maxAge, whose nodes' samples have either caught up or
// expired. A pod that has not started keeps its estimate until it runs or
// goes (the pod informer removes deleted and finished pods).
func (t *tracker) prune(samples func(node string) (time.Time, bool), maxAge time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, p := range t.pods {
		ts, ok := samples(p.node)
		if ok && p.includedBy(ts, t.grace) || !p.startedAt.IsZero() && p.startedAt.Add(t.grace).Before(maxAge) {
			t.removeLocked(uid)
		}
	}
}

func (t *tracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pods)
}
