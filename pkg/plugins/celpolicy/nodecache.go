package celpolicy

import (
	"github.com/google/cel-go/common/types/ref"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/slotmap"
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
	// The slices above point into these when there are few rules, so that
	// Filter and Score read one object per node, not four (each a cache
	// miss on a cluster larger than the CPU caches).
	filterArr, scoreOKArr [inlineRules]outcome
	scoreArr              [inlineRules]float64
}

// inlineRules is how many rules' outcomes a nodeState holds inline.
const inlineRules = 8

// newNodeState returns a state for n rules.
func newNodeState(n int) *nodeState {
	s := &nodeState{}
	if n <= inlineRules {
		s.filter, s.score, s.scoreOK = s.filterArr[:n], s.scoreArr[:n], s.scoreOKArr[:n]
	} else {
		s.filter, s.score, s.scoreOK = make([]outcome, n), make([]float64, n), make([]outcome, n)
	}
	return s
}

// nodeCache keeps one nodeState per node name. The scheduler snapshot gives
// each NodeInfo a process-wide unique generation that moves whenever the node
// or its pods change, so comparing it invalidates whatever reads nodeInfo.
// When no rule reads nodeInfo, the state depends on the Node object alone,
// which the scheduler replaces (a new object) on every node update but keeps
// while pods come and go: then the state is kept while the object is the
// same, and a pod landing on the node costs no rebuild. Filter and Score
// read it from 16 goroutines for every node they visit: a slotmap, read
// without a lock.
type nodeCache struct {
	states *slotmap.Map[nodeState]
	// byNode: no rule reads nodeInfo, so states are keyed by Node object.
	byNode bool
}

func newNodeCache(byNode bool) *nodeCache {
	return &nodeCache{states: slotmap.New[nodeState](), byNode: byNode}
}

func (c *nodeCache) get(name string, generation int64, node *v1.Node) *nodeState {
	if s := c.states.Load(name); s != nil && c.valid(s, generation, node) {
		return s
	}
	return nil
}

// valid reports whether s is the state of a NodeInfo at generation with
// Node object node: the generation is the same, or no rule reads nodeInfo
// and the Node object is (the node records check the same).
func (c *nodeCache) valid(s *nodeState, generation int64, node *v1.Node) bool {
	return s.generation == generation || c.byNode && s.nodeObj == node
}

// put caches s for the node unless a newer generation is cached (parallel
// Filters may build states of two generations; the newer one is the node's
// present). Copies of NodeInfos never get here (CELPolicy.cacheable).
func (c *nodeCache) put(name string, s *nodeState) {
	c.states.Update(name, func(old *nodeState) *nodeState {
		if old != nil && old.generation > s.generation && !c.byNode {
			return old
		}
		return s
	})
}

func (c *nodeCache) remove(name string) { c.states.Delete(name) }

func (c *nodeCache) len() int { return c.states.Len() }

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
