package loadaware

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// estimate is what a pod is expected to use.
type estimate struct {
	cpuMilli int64
	memBytes int64
}

// assignedPod is a pod placed on a node at a time; until a sample newer than
// that time arrives, the sample does not include it.
type assignedPod struct {
	node string
	est  estimate
	at   time.Time
}

// tracker remembers the pods assigned to nodes recently (assumed by this
// scheduler in Reserve, or seen bound by the pod informer), so that a burst
// of pods does not land on the node that looked idle at the last sample.
type tracker struct {
	mu     sync.RWMutex
	pods   map[types.UID]assignedPod
	byNode map[string]map[types.UID]struct{}
}

func newTracker() *tracker {
	return &tracker{pods: map[types.UID]assignedPod{}, byNode: map[string]map[types.UID]struct{}{}}
}

// add records the pod unless it is already known (a pod this scheduler
// reserved keeps its Reserve time when the informer later sees it bound).
func (t *tracker) add(uid types.UID, p assignedPod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.pods[uid]; ok {
		if old.node == p.node {
			return
		}
		t.removeLocked(uid)
	}
	t.pods[uid] = p
	if t.byNode[p.node] == nil {
		t.byNode[p.node] = map[types.UID]struct{}{}
	}
	t.byNode[p.node][uid] = struct{}{}
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
	estimatedPods.Set(float64(len(t.pods)))
}

// pending sums the estimates of the pods assigned to node after since.
func (t *tracker) pending(node string, since time.Time) estimate {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var sum estimate
	for uid := range t.byNode[node] {
		if p := t.pods[uid]; p.at.After(since) {
			sum.cpuMilli += p.est.cpuMilli
			sum.memBytes += p.est.memBytes
		}
	}
	return sum
}

// prune forgets pods that a node's sample already includes (the sample is
// newer than their assignment) and pods older than maxAge, whose nodes'
// samples have either caught up or expired.
func (t *tracker) prune(samples func(node string) (time.Time, bool), maxAge time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, p := range t.pods {
		ts, ok := samples(p.node)
		if p.at.Before(maxAge) || ok && !p.at.After(ts) {
			t.removeLocked(uid)
		}
	}
}

func (t *tracker) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.pods)
}
