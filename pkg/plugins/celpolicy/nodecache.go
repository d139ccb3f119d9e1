package celpolicy

import (
	"sync"

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
// immutable once built and replaced as a whole when the generation moves.
type nodeState struct {
	generation int64
	node       ref.Val // nil unless a rule reads node
	info       ref.Val // nil unless a rule reads nodeInfo
	filter     []outcome
	score      []float64 // valid where scoreOK says outcomePass
	scoreOK    []outcome
}

// nodeCache keeps one nodeState per node name. The scheduler snapshot gives
// each NodeInfo a process-wide unique generation that moves whenever the node
// or its pods change, so comparing it is the whole invalidation.
type nodeCache struct {
	mu    sync.RWMutex
	nodes map[string]*nodeState
}

func newNodeCache() *nodeCache {
	return &nodeCache{nodes: map[string]*nodeState{}}
}

func (c *nodeCache) get(name string, generation int64) *nodeState {
	c.mu.RLock()
	s := c.nodes[name]
	c.mu.RUnlock()
	if s != nil && s.generation == generation {
		return s
	}
	return nil
}

func (c *nodeCache) put(name string, s *nodeState) {
	c.mu.Lock()
	// A NodeInfo copied for preemption has a newer generation than the
	// cluster's; keeping the newest is right for the next lookups either way.
	if old := c.nodes[name]; old == nil || old.generation <= s.generation {
		c.nodes[name] = s
	}
	c.mu.Unlock()
}

func (c *nodeCache) remove(name string) {
	c.mu.Lock()
	delete(c.nodes, name)
	c.mu.Unlock()
}

func (c *nodeCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
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
