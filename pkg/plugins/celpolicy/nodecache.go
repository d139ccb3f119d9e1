package celpolicy

import (
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/common/types/ref"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
	fwk "k8s.io/kube-scheduler/framework"
)

// outcome is the result of one rule on one node.
type outcome uint8

const (
	outcomeNone outcome = iota // not evaluated: the rule has no such expression or reads the pod
	outcomePass
	outcomeReject
	outcomeError
)

// nodeState is what CELPolicy knows of one node at one NodeInfo generation:
// the CEL values of the node and its nodeInfo facts, and the outcome of every
// expression that does not read the pod (the same for every pod). It is
// immutable once built and replaced as a whole when it goes stale.
type nodeState struct {
	generation int64
	// nodeObj is the Node the state was built from. It is held, so its
	// address cannot be reused while the state is cached.
	nodeObj *v1.Node
	node    ref.Val // nil unless a rule reads node
	info    ref.Val // nil unless a rule reads nodeInfo
	filter  []outcome
	score   []float64 // valid where scoreOK says outcomePass
	scoreOK []outcome
}

// nodeCache keeps one nodeState per node name. The scheduler snapshot gives
// each NodeInfo a process-wide unique generation that moves whenever the node
// or its pods change, so comparing it invalidates whatever reads nodeInfo.
// When no rule reads nodeInfo, the state depends on the Node object alone,
// which the scheduler replaces (a new object) on every node update but keeps
// while pods come and go: then the state is kept while the object is the
// same, and a pod landing on the node costs no rebuild.
//
// Filter and Score read it from 16 goroutines for every node they visit, so
// a read takes no lock and writes no shared memory: the name → slot map is
// immutable once published (one atomic load), and a slot's state is an
// atomic pointer. (A map under an RWMutex made every read an atomic add on
// one cache line that the cores passed between them.) Nodes not yet in the
// published map wait in a small locked map and are published in batches, so
// a cluster's nodes cost O(n) copies in all, not one map copy each.
type nodeCache struct {
	slots atomic.Pointer[map[string]*nodeSlot]
	// byNode: no rule reads nodeInfo, so states are keyed by Node object.
	byNode bool

	mu sync.Mutex
	// pending are slots of nodes first seen since the last publication.
	pending map[string]*nodeSlot
	// removed counts published slots emptied by node deletions; they are
	// dropped at the next publication.
	removed int
}

type nodeSlot struct {
	state atomic.Pointer[nodeState]
	// gone: the node was deleted; the next publication drops the slot (under mu).
	gone bool
}

func newNodeCache(byNode bool) *nodeCache {
	c := &nodeCache{byNode: byNode, pending: map[string]*nodeSlot{}}
	c.slots.Store(&map[string]*nodeSlot{})
	return c
}

// lookup returns the node's slot, nil if it never had one.
func (c *nodeCache) lookup(name string) *nodeSlot {
	if sl := (*c.slots.Load())[name]; sl != nil {
		return sl
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sl := (*c.slots.Load())[name]; sl != nil { // published meanwhile
		return sl
	}
	return c.pending[name]
}

func (c *nodeCache) get(name string, generation int64, node *v1.Node) *nodeState {
	sl := c.lookup(name)
	if sl == nil {
		return nil
	}
	if s := sl.state.Load(); s != nil && (s.generation == generation || c.byNode && s.nodeObj == node) {
		return s
	}
	return nil
}

// put caches s for the node unless a newer generation is cached (parallel
// Filters may build states of two generations; the newer one is the node's
// present). Copies of NodeInfos never get here (CELPolicy.cacheable).
func (c *nodeCache) put(name string, s *nodeState) {
	sl := c.lookup(name)
	if sl == nil {
		sl = c.addSlot(name)
	}
	for {
		old := sl.state.Load()
		if old != nil && old.generation > s.generation && !c.byNode {
			return
		}
		if sl.state.CompareAndSwap(old, s) {
			return
		}
	}
}

// addSlot creates the node's slot among the pending ones, and publishes the
// pending slots once they are an eighth of the published ones.
func (c *nodeCache) addSlot(name string) *nodeSlot {
	c.mu.Lock()
	defer c.mu.Unlock()
	published := *c.slots.Load()
	if sl := published[name]; sl != nil {
		return sl
	}
	sl := c.pending[name]
	if sl == nil {
		sl = &nodeSlot{}
		c.pending[name] = sl
	}
	if len(c.pending) > len(published)/8+16 {
		c.publishLocked()
	}
	return sl
}

// publishLocked replaces the published map with the live slots and the pending ones.
func (c *nodeCache) publishLocked() {
	published := *c.slots.Load()
	next := make(map[string]*nodeSlot, len(published)+len(c.pending)-c.removed)
	for name, sl := range published {
		if !sl.gone {
			next[name] = sl
		}
	}
	for name, sl := range c.pending {
		next[name] = sl
	}
	c.slots.Store(&next)
	c.pending = map[string]*nodeSlot{}
	c.removed = 0
}

// remove forgets a deleted node. Its slot is emptied at once and dropped
// from the published map once a quarter of it is empty.
func (c *nodeCache) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sl := c.pending[name]; sl != nil {
		delete(c.pending, name)
		sl.state.Store(nil)
		return
	}
	published := *c.slots.Load()
	if sl := published[name]; sl != nil && !sl.gone {
		sl.gone = true
		sl.state.Store(nil)
		c.removed++
		if c.removed > len(published)/4 {
			c.publishLocked()
		}
	}
}

// len is the number of nodes with a cached state.
func (c *nodeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range []map[string]*nodeSlot{*c.slots.Load(), c.pending} {
		for _, sl := range m {
			if sl.state.Load() != nil {
				n++
			}
		}
	}
	return n
}

// nodeInfoFacts builds the value of `nodeInfo`: allocatable, requested and free
// (allocatable - requested) per resource, as the scheduler's cache counts them
// (the same numbers NodeResourcesFit uses), and the number of pods.
func nodeInfoFacts(ni fwk.NodeInfo) map[string]any {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	allocatable, requested, free := map[string]any{}, map[string]any{}, map[string]any{}
	add := func(name string, a, r int64, q func(int64) *resource.Quantity) {
		allocatable[name] = apiservercel.Quantity{Quantity: q(a)}
		requested[name] = apiservercel.Quantity{Quantity: q(r)}
		free[name] = apiservercel.Quantity{Quantity: q(a - r)}
	}
	milli := func(v int64) *resource.Quantity { return resource.NewMilliQuantity(v, resource.DecimalSI) }
	binary := func(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }
	decimal := func(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }
	add(string(v1.ResourceCPU), alloc.GetMilliCPU(), req.GetMilliCPU(), milli)
	add(string(v1.ResourceMemory), alloc.GetMemory(), req.GetMemory(), binary)
	add(string(v1.ResourceEphemeralStorage), alloc.GetEphemeralStorage(), req.GetEphemeralStorage(), binary)
	add(string(v1.ResourcePods), int64(alloc.GetAllowedPodNumber()), int64(len(ni.GetPods())), decimal)
	reqScalars := req.GetScalarResources()
	for name, a := range alloc.GetScalarResources() {
		add(string(name), a, reqScalars[name], decimal)
	}
	return map[string]any{
		"allocatable": allocatable,
		"requested":   requested,
		"free":        free,
		"podCount":    int64(len(ni.GetPods())),
	}
}
