// Package slotmap is a string-keyed map for the scheduler's hot paths:
// Filter and Score read per-node state from 16 goroutines for every node of
// every cycle, while writes are rare (a node changed, a pod placed). A read
// takes no lock and writes no shared memory: the key → slot map is
// immutable once published (one atomic load), and each slot's value is an
// atomic pointer, so updating a known key is a pointer swap. Keys not yet
// in the published map wait in a small locked map and are published in
// batches (when they reach an eighth of the published ones), so n keys cost
// O(n) map copies in all; deleted keys' slots are dropped once a quarter of
// the published slots are deleted. A map under an RWMutex instead makes
// every read an atomic add on one cache line that the cores pass between
// them.
package slotmap

import (
	"sync"
	"sync/atomic"
)

// Map holds a *V per key. The zero value is not usable; call New.
type Map[V any] struct {
	published atomic.Pointer[map[string]*slot[V]]

	mu      sync.Mutex
	pending map[string]*slot[V] // keys first stored since the last publication
	deleted int                 // published slots deleted since the last publication
}

type slot[V any] struct {
	v atomic.Pointer[V]
	// gone: the key was deleted; the next publication drops the slot (under mu).
	gone bool
}

// New returns an empty map.
func New[V any]() *Map[V] {
	m := &Map[V]{pending: map[string]*slot[V]{}}
	m.published.Store(&map[string]*slot[V]{})
	return m
}

// lookup returns the key's slot, nil if it has none.
func (m *Map[V]) lookup(key string) *slot[V] {
	if s := (*m.published.Load())[key]; s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := (*m.published.Load())[key]; s != nil { // published meanwhile
		return s
	}
	return m.pending[key]
}

// Load returns the key's value, nil if none.
func (m *Map[V]) Load(key string) *V {
	if s := m.lookup(key); s != nil {
		return s.v.Load()
	}
	return nil
}

// Store sets the key's value.
func (m *Map[V]) Store(key string, v *V) {
	m.Update(key, func(*V) *V { return v })
}

// Update replaces the key's value old (nil if none) with f(old), atomically
// with respect to other updates of the key; f may run more than once, and
// returning old keeps it.
func (m *Map[V]) Update(key string, f func(old *V) *V) {
	s := m.lookup(key)
	if s == nil {
		s = m.addSlot(key)
	}
	for {
		old := s.v.Load()
		next := f(old)
		if next == old || s.v.CompareAndSwap(old, next) {
			return
		}
	}
}

func (m *Map[V]) addSlot(key string) *slot[V] {
	m.mu.Lock()
	defer m.mu.Unlock()
	published := *m.published.Load()
	if s := published[key]; s != nil {
		return s
	}
	s := m.pending[key]
	if s == nil {
		s = &slot[V]{}
		m.pending[key] = s
	}
	if len(m.pending) > len(published)/8+16 {
		m.publishLocked()
	}
	return s
}

// publishLocked replaces the published map with its live slots and the pending ones.
func (m *Map[V]) publishLocked() {
	published := *m.published.Load()
	next := make(map[string]*slot[V], len(published)+len(m.pending)-m.deleted)
	for k, s := range published {
		if !s.gone {
			next[k] = s
		}
	}
	for k, s := range m.pending {
		next[k] = s
	}
	m.published.Store(&next)
	m.pending = map[string]*slot[V]{}
	m.deleted = 0
}

// Delete removes the key's value.
func (m *Map[V]) Delete(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.pending[key]; s != nil {
		delete(m.pending, key)
		s.v.Store(nil)
		return
	}
	published := *m.published.Load()
	if s := published[key]; s != nil && !s.gone {
		s.gone = true
		s.v.Store(nil)
		m.deleted++
		if m.deleted > len(published)/4 {
			m.publishLocked()
		}
	}
}

// Len is the number of keys with a value.
func (m *Map[V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, slots := range []map[string]*slot[V]{*m.published.Load(), m.pending} {
		for _, s := range slots {
			if s.v.Load() != nil {
				n++
			}
		}
	}
	return n
}

// publishedLen is the number of published slots (tests: deleted slots are dropped).
func (m *Map[V]) publishedLen() int { return len(*m.published.Load()) }

// pendingLen is the number of slots waiting for publication.
func (m *Map[V]) pendingLen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}
