// Package noderecord keeps a plugin's per-node record where Filter and Score
// find it in one or two cache lines: in the order of the scheduler
// snapshot's node list, found through an open-addressed table keyed by the
// snapshot's *NodeInfo.
//
// Filter and Score run for every node of every cycle from the framework's 16
// workers. A record found by node name costs a string hash (the Node
// object, then the name's bytes), a map group, a slot and the value: four
// to five dependent cache misses per plugin and node, none of which stays
// in the CPU caches at 5,000 nodes. The snapshot gives each node one
// NodeInfo for the node's lifetime and updates it in place (UpdateSnapshot
// copies into the existing NodeInfo), and builds a new node list only when
// nodes are added or removed. So a plugin syncs its Table with the list in
// PreFilter (a pointer comparison while the list is the same), and a lookup
// is a probe of a table small enough to stay in cache (16 bytes per slot,
// half full: 160 KiB at 5,000 nodes) and a load of the record pointer from
// an array in list order (8 bytes per node).
//
// A NodeInfo that is not in the list the table was built from — a copy the
// framework makes for nominated pods or a preemption dry run, a NodeInfo in
// a unit test — is not found, and the plugin takes its by-name path. A
// PodGroup cycle assumes its members into the snapshot's own NodeInfos and
// keeps their generation (Snapshot.AssumePod): plugins do not Sync in such
// a cycle, and one whose records depend on a NodeInfo's pods must not trust
// them there. A record must say what it was built
// from (the Node object, the NodeInfo generation, a source's version), and
// the plugin checks that on every read: the table only finds it.
package noderecord

import (
	"sync"
	"sync/atomic"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// positions maps the NodeInfos of one snapshot list to their index in it.
// Immutable once built; shared by every Table of the process (all profiles
// of a scheduler filter the same snapshot).
type positions struct {
	list []fwk.NodeInfo
	// keys and idx are the open-addressed table: keys[h] is a NodeInfo of
	// the list (nil: empty slot), idx[h] its index. The keys are real
	// pointers, so a NodeInfo of the list cannot be freed and its address
	// reused while the table lives.
	keys  []*framework.NodeInfo
	idx   []int32
	shift uint
	// names: node name -> index, for writers that know a node by name.
	names map[string]int32
}

// lastPositions is the table of the last list seen: PreFilters of every
// plugin and profile see the same list until nodes are added or removed.
var lastPositions atomic.Pointer[positions]

// sameList reports whether a and b are the same snapshot list (the same
// backing array and length; the snapshot builds a new array on every change).
func sameList(a, b []fwk.NodeInfo) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func positionsOf(list []fwk.NodeInfo) *positions {
	if p := lastPositions.Load(); p != nil && sameList(p.list, list) {
		return p
	}
	p := buildPositions(list)
	lastPositions.Store(p)
	return p
}

func buildPositions(list []fwk.NodeInfo) *positions {
	size, shift := 8, uint(64-3)
	for size < 2*len(list) {
		size, shift = size*2, shift-1
	}
	p := &positions{list: list, keys: make([]*framework.NodeInfo, size), idx: make([]int32, size), shift: shift, names: make(map[string]int32, len(list))}
	for i, ni := range list {
		k, ok := ni.(*framework.NodeInfo)
		if !ok || k == nil || k.Node() == nil {
			continue
		}
		h := p.hash(k)
		for p.keys[h] != nil {
			h = (h + 1) & uint64(size-1)
		}
		p.keys[h], p.idx[h] = k, int32(i)
		p.names[k.Node().Name] = int32(i)
	}
	return p
}

// hash is Fibonacci hashing of the NodeInfo's address (the heap does not
// move objects; the address is only hashed, never turned back into a pointer).
func (p *positions) hash(k *framework.NodeInfo) uint64 {
	return (uint64(uintptr(unsafe.Pointer(k))) * 0x9E3779B97F4A7C15) >> p.shift
}

// find returns ni's index in the list, or -1.
func (p *positions) find(ni fwk.NodeInfo) int {
	k, ok := ni.(*framework.NodeInfo)
	if !ok || k == nil {
		return -1
	}
	mask := uint64(len(p.keys) - 1)
	for h := p.hash(k); ; h = (h + 1) & mask {
		switch p.keys[h] {
		case k:
			return int(p.idx[h])
		case nil:
			return -1
		}
	}
}

// Table holds one *R per node of the snapshot's list. The zero value is
// ready to use and finds nothing until Sync.
type Table[R any] struct {
	cur atomic.Pointer[generation[R]]
	// mu serialises Sync with Invalidate; readers take no lock.
	mu sync.Mutex
}

type generation[R any] struct {
	pos  *positions
	recs []atomic.Pointer[R]
}

// Sync makes the table follow the snapshot list nodes (the list PreFilter
// is given). While the list is the same this is two pointer comparisons;
// on a new list the records of nodes still present are kept (their
// validity is the plugin's to check, as always).
func (t *Table[R]) Sync(nodes []fwk.NodeInfo) {
	if len(nodes) == 0 {
		return
	}
	if g := t.cur.Load(); g != nil && sameList(g.pos.list, nodes) {
		return
	}
	pos := positionsOf(nodes)
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	if old != nil && old.pos == pos {
		return
	}
	g := &generation[R]{pos: pos, recs: make([]atomic.Pointer[R], len(nodes))}
	if old != nil {
		for name, i := range pos.names {
			if j, ok := old.pos.names[name]; ok {
				g.recs[i].Store(old.recs[j].Load())
			}
		}
	}
	t.cur.Store(g)
}

// Slot returns ni's record slot, or nil when ni is not a NodeInfo of the
// list last synced (a copy, or no list yet). The slot's record may be nil
// or stale: the caller validates it, and may replace it (CompareAndSwap
// against the record it validated, so that an Invalidate in between wins).
func (t *Table[R]) Slot(ni fwk.NodeInfo) *atomic.Pointer[R] {
	g := t.cur.Load()
	if g == nil {
		return nil
	}
	i := g.pos.find(ni)
	if i < 0 {
		return nil
	}
	return &g.recs[i]
}

// Invalidate replaces the named node's record with tombstone, a record the
// caller's validation rejects; it must be a new object on every call, so
// that a reader's CompareAndSwap of a record built before the change fails.
func (t *Table[R]) Invalidate(name string, tombstone *R) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.cur.Load()
	if g == nil {
		return
	}
	if i, ok := g.pos.names[name]; ok {
		g.recs[i].Store(tombstone)
	}
}

// Len is the number of nodes of the list last synced (tests).
func (t *Table[R]) Len() int {
	if g := t.cur.Load(); g != nil {
		return len(g.recs)
	}
	return 0
}
