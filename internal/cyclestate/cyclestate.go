// Package cyclestate saves Filter and Score a CycleState read per call.
//
// A plugin's Filter and Score read what its PreFilter or PreScore wrote for
// the pod from the cycle's CycleState: a sync.Map keyed by a string, so
// every call hashes the key and walks the map (about 50–100 ns, at 5,000
// nodes a cache miss or two). The scheduling cycle writes the state once
// and then calls Filter and Score on hundreds of nodes with the same
// CycleState, so remembering the last CycleState written and its value
// answers those calls with one pointer comparison. Any other CycleState (a
// clone for preemption, another pod's cycle running concurrently) is read
// from the map as before.
package cyclestate

import (
	"fmt"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"
)

// Last is the state data a plugin last wrote under one key. The zero value
// is ready to use.
type Last[T fwk.StateData] struct {
	p atomic.Pointer[entry[T]]
}

type entry[T fwk.StateData] struct {
	state fwk.CycleState
	v     T
}

// Write writes v under key into state and remembers it.
func (l *Last[T]) Write(state fwk.CycleState, key fwk.StateKey, v T) {
	state.Write(key, v)
	l.p.Store(&entry[T]{state: state, v: v})
}

// Read returns what key holds in state: the remembered value when state is
// the CycleState last written (the entry holds it, so its address cannot be
// reused by another while remembered), else the map's.
func (l *Last[T]) Read(state fwk.CycleState, key fwk.StateKey) (T, error) {
	if e := l.p.Load(); e != nil && e.state == state {
		return e.v, nil
	}
	var zero T
	c, err := state.Read(key)
	if err != nil {
		return zero, fmt.Errorf("reading %q from cycleState: %w", key, err)
	}
	v, ok := c.(T)
	if !ok {
		return zero, fmt.Errorf("%+v convert to %T error", c, zero)
	}
	return v, nil
}
