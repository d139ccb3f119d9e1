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
// is a probe of an open-addressed table (4 bytes per slot, at most a third
// full) and a read of the node's line: 64 bytes, one cache line, in an
// array in list order, which the framework walks in order (each of its
// workers takes a run of nodes), so that the CPU prefetches the lines ahead
// of the reads. A line holds what Filter and Score read, as plain words
// under a sequence lock; beside it, each node has a record pointer, for the
// plugin's full record and to keep alive any object whose address the line
// holds for comparison.
//
// The tables of one profile's plugins form a Group: a node's lines, one per
// table, sit side by side in one block (128 bytes for two tables), so that
// the second plugin the framework runs for a node finds its line already
// fetched with the first's, and the group syncs once for all of them.
//
// A NodeInfo that is not in the list the table was built from — a copy the
// framework makes for nominated pods or a preemption dry run, a NodeInfo in
// a unit test — is not found, and the plugin takes its by-name path. A
// PodGroup cycle assumes its members into the snapshot's own NodeInfos and
// keeps their generation (Snapshot.AssumePod): plugins do not Sync in such
// a cycle, and one whose records depend on a NodeInfo's pods must not trust
// them there. A line and a record must say what they were built from (the
// Node object, the NodeInfo generation, a source's version), and the plugin
// checks that on every read: the table only finds them.
package noderecord

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// positions maps the NodeInfos of one snapshot list to their index in it.
// Immutable once built; shared by every Table of the process (all profiles
// of a scheduler filter the same snapshot).
type positions struct {
	list []fwk.NodeInfo
	// slots is the open-addressed table: 1 + the index of a NodeInfo of the
	// list (0: an empty slot), at most a third full. The key is the list's
	// own entry, which the framework has just read for the node it filters
	// or scores (in cache): the table holds 4 bytes a slot, 64 KiB at 5,000
	// nodes, small enough to stay in the CPU caches. A table of 16-byte
	// {key, index} entries (256 KiB) did not: its probe was half of
	// CELPolicy's Filter, the first plugin to probe for a node.
	slots []int32
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
	for size < 3*len(list) {
		size, shift = size*2, shift-1
	}
	p := &positions{list: list, slots: make([]int32, size), shift: shift, names: make(map[string]int32, len(list))}
	for i, ni := range list {
		k, ok := ni.(*framework.NodeInfo)
		if !ok || k == nil || k.Node() == nil {
			continue
		}
		h := p.hash(k)
		for p.slots[h] != 0 {
			h = (h + 1) & uint64(size-1)
		}
		p.slots[h] = int32(i + 1)
		p.names[k.Node().Name] = int32(i)
	}
	return p
}

// hash is Fibonacci hashing of the NodeInfo's address (the heap does not
// move objects; the address is only hashed, never turned back into a
// pointer, and the list holds every NodeInfo the table keys, so none is
// freed and its address reused while the table lives).
func (p *positions) hash(k *framework.NodeInfo) uint64 {
	return (uint64(uintptr(unsafe.Pointer(k))) * 0x9E3779B97F4A7C15) >> p.shift
}

// find returns ni's index in the list, or -1.
func (p *positions) find(ni fwk.NodeInfo) int {
	k, ok := ni.(*framework.NodeInfo)
	if !ok || k == nil {
		return -1
	}
	mask := uint64(len(p.slots) - 1)
	for h := p.hash(k); ; h = (h + 1) & mask {
		i := p.slots[h] - 1
		if i < 0 {
			return -1
		}
		if key, _ := p.list[i].(*framework.NodeInfo); key == k {
			return int(i)
		}
	}
}

// Words is how many 64-bit words a node's line holds beside its sequence
// number: with it, 64 bytes, one cache line.
const Words = 7

// Line is the part of a node's record that Filter and Score read. A line of
// zeros is what a node has before anything is stored and after Invalidate:
// a plugin marks the lines it stores with a non-zero word. An address kept
// in a line (to compare an object's identity) must be of an object the
// record stored with the line holds.
type Line [Words]uint64

// line is one node's Line under a sequence lock: seq is even while the
// words are stable and odd while a writer writes them; a reader that sees
// the same even seq before and after reading the words has read one
// consistent line. It holds no pointer: an array of pointer-free objects
// has no malloc header, which the alignments of generation.lines rely on. Every word is read and written atomically (plain loads
// and stores on 64-bit platforms), so readers and writers do not race.
type line struct {
	seq atomic.Uint64
	w   [Words]atomic.Uint64
}

// Group is the tables whose lines sit side by side: each node has one block
// of lines, one per table of the group (a lane), in list order. The tables
// of the plugins of one profile form a group (GroupFor), so that the
// framework, which runs a profile's Filter (and Score) plugins one after the
// other for a node, finds the second plugin's line in the cache line beside
// the first's: with two lanes a node's block is 128 bytes aligned on 128,
// the pair of cache lines the CPU's adjacent-line prefetch fetches
// together. A group has one generation (positions, lines and records) and
// one Sync for all its tables.
type Group struct {
	cur atomic.Pointer[generation]
	// owner is the handle GroupFor found the group by: held, so that its
	// address is not reused while the group is found by it.
	owner fwk.Handle
	// mu serialises Sync, Invalidate and joining; readers take no lock.
	mu    sync.Mutex
	lanes int
}

type generation struct {
	pos *positions
	// stride is the lines per node: the group's lanes rounded up to a
	// power of two, so that with two lanes or more every node's block
	// starts at a multiple of 128 bytes (see lines).
	stride int
	// lines: node i's lane l at i*stride+l, one per cache line. Go's
	// allocator places an array of 64-byte elements at a multiple of 64
	// bytes, and one of 128-byte blocks at a multiple of 128 (the size
	// classes it picks for such sizes, up to 32 KiB, are multiples of 128,
	// and a larger object starts a page).
	lines []line
	// recs: the record stored with each line, a *R of the lane's Table.
	recs []unsafe.Pointer
}

var groups struct {
	sync.Mutex
	// byHandle: the address of a profile's framework handle -> its group.
	// Weak, so that a group lives as long as one of its tables; the group
	// holds its handle, so while an entry's group is alive the address it
	// is keyed by is not reused.
	byHandle map[uintptr]weak.Pointer[Group]
}

// GroupFor returns the group of the profile whose framework handle is h
// (the handle every plugin of a profile is given; each profile has its
// own, a *frameworkImpl). A nil handle (unit tests), or one that is not a
// pointer, gets a group of its own at every call: its tables share no
// blocks. (Pointers to a zero-size type would share one address, and so a
// group; no handle is one.)
func GroupFor(h fwk.Handle) *Group {
	v := reflect.ValueOf(h)
	if h == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		return &Group{}
	}
	key := v.Pointer()
	groups.Lock()
	defer groups.Unlock()
	if g := groups.byHandle[key].Value(); g != nil {
		return g
	}
	for k, w := range groups.byHandle {
		if w.Value() == nil {
			delete(groups.byHandle, k)
		}
	}
	if groups.byHandle == nil {
		groups.byHandle = make(map[uintptr]weak.Pointer[Group])
	}
	g := &Group{owner: h}
	groups.byHandle[key] = weak.Make(g)
	return g
}

// join gives a table its lane; the next Sync makes room for it.
func (g *Group) join() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lanes++
	return g.lanes - 1
}

// sync makes the group follow the snapshot list nodes. While the list is
// the same and every lane has its line this is two pointer comparisons and
// an integer one; on a new list (or a new lane) the lines and records of
// nodes still present are kept (their validity is the plugin's to check,
// as always).
func (g *Group) sync(nodes []fwk.NodeInfo, lane int) {
	if len(nodes) == 0 {
		return
	}
	if c := g.cur.Load(); c != nil && sameList(c.pos.list, nodes) && lane < c.stride {
		return
	}
	pos := positionsOf(nodes)
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.cur.Load()
	if old != nil && old.pos == pos && g.lanes <= old.stride {
		return
	}
	stride := 1
	for stride < g.lanes {
		stride *= 2
	}
	c := &generation{pos: pos, stride: stride, lines: make([]line, stride*len(nodes)), recs: make([]unsafe.Pointer, stride*len(nodes))}
	if old != nil {
		for name, i := range pos.names {
			j, ok := old.pos.names[name]
			if !ok {
				continue
			}
			for l := range min(old.stride, stride) {
				// A line being written is left out (zeros, no record):
				// the plugin builds it again.
				if rec, ln, ok := old.readBoth(int(j)*old.stride + l); ok {
					k := int(i)*stride + l
					atomic.StorePointer(&c.recs[k], rec)
					for w, x := range ln {
						c.lines[k].w[w].Store(x)
					}
				}
			}
		}
	}
	g.cur.Store(c)
}

// readBoth reads the record and the line stored together at k, or false
// while they are being written (the line may hold an address only its own
// record keeps alive: the two are never taken from different Stores).
func (c *generation) readBoth(k int) (unsafe.Pointer, Line, bool) {
	ln := &c.lines[k]
	v := ln.seq.Load()
	if v&1 != 0 {
		return nil, Line{}, false
	}
	rec := atomic.LoadPointer(&c.recs[k])
	var l Line
	for w := range l {
		l[w] = ln.w[w].Load()
	}
	return rec, l, ln.seq.Load() == v
}

// Table holds one line and one *R per node of the snapshot's list, in its
// group's blocks. The zero value is ready to use, in a group of its own,
// and finds nothing until Sync; Join puts it in a shared group instead.
type Table[R any] struct {
	// g and lane are set once, lane first (Join): a reader that sees g
	// sees its lane.
	g    atomic.Pointer[Group]
	lane atomic.Int64
	once sync.Once
}

// Join makes t a lane of g (call it once, before t is used; without it t
// has a group of its own).
func (t *Table[R]) Join(g *Group) {
	t.once.Do(func() {
		t.lane.Store(int64(g.join()))
		t.g.Store(g)
	})
}

func (t *Table[R]) group() (*Group, int) {
	g := t.g.Load()
	if g == nil {
		t.Join(&Group{})
		g = t.g.Load()
	}
	return g, int(t.lane.Load())
}

// Sync makes the table (and its group) follow the snapshot list nodes (the
// list PreFilter is given).
func (t *Table[R]) Sync(nodes []fwk.NodeInfo) {
	g, l := t.group()
	g.sync(nodes, l)
}

// Ref is a node's line in the generation of the group that Find saw.
type Ref[R any] struct {
	c *generation
	k int
}

// Find returns ni's place, or false when ni is not a NodeInfo of the list
// last synced (a copy, or no list yet).
func (t *Table[R]) Find(ni fwk.NodeInfo) (Ref[R], bool) {
	g, l := t.group()
	c := g.cur.Load()
	if c == nil || l >= c.stride {
		return Ref[R]{}, false
	}
	i := c.pos.find(ni)
	if i < 0 {
		return Ref[R]{}, false
	}
	return Ref[R]{c: c, k: i*c.stride + l}, true
}

// Read returns the node's line and the version it was read at (for Store).
// ok is false while a writer is writing the line: the caller then takes
// the path that does not read it.
func (r Ref[R]) Read() (l Line, version uint64, ok bool) {
	ln := &r.c.lines[r.k]
	version = ln.seq.Load()
	if version&1 != 0 {
		return Line{}, version, false
	}
	for w := range l {
		l[w] = ln.w[w].Load()
	}
	if ln.seq.Load() != version {
		return Line{}, version, false
	}
	return l, version, true
}

// Version is the line's version now, for a Store of a record built without
// reading the line (odd: a writer is writing it, and such a Store fails).
func (r Ref[R]) Version() uint64 { return r.c.lines[r.k].seq.Load() }

// Record is the record last stored with the node's line (nil: none). It
// may be stale: the caller validates it.
func (r Ref[R]) Record() *R { return (*R)(atomic.LoadPointer(&r.c.recs[r.k])) }

// Store replaces the node's record and line, unless either was written
// since Read returned version: then it stores nothing and returns false
// (a record built before an Invalidate never replaces what it cleared).
func (r Ref[R]) Store(version uint64, rec *R, l Line) bool {
	ln := &r.c.lines[r.k]
	if version&1 != 0 || !ln.seq.CompareAndSwap(version, version+1) {
		return false
	}
	atomic.StorePointer(&r.c.recs[r.k], unsafe.Pointer(rec))
	for w, x := range l {
		ln.w[w].Store(x)
	}
	ln.seq.Store(version + 2)
	return true
}

// Invalidate clears the named node's line and record: the next read
// builds them again, and a Store of anything built before this call fails.
func (t *Table[R]) Invalidate(name string) {
	g, l := t.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.cur.Load()
	if c == nil || l >= c.stride {
		return
	}
	i, ok := c.pos.names[name]
	if !ok {
		return
	}
	// A Store of no record and a line of zeros, retried while another
	// Store is writing the line (a few stores long).
	ref := Ref[R]{c: c, k: int(i)*c.stride + l}
	for !ref.Store(ref.Version(), nil, Line{}) {
		runtime.Gosched()
	}
}

// Len is the number of nodes of the group's list last synced, whether or
// not t's lane has lines in it yet (tests).
func (t *Table[R]) Len() int {
	g, _ := t.group()
	if c := g.cur.Load(); c != nil {
		return len(c.lines) / c.stride
	}
	return 0
}
