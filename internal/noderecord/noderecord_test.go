package noderecord

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func nodeList(names ...string) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(names))
	for i, n := range names {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(n).Obj())
		out[i] = ni
	}
	return out
}

type rec struct{ name string }

func lineOf(name string) Line { return Line{uint64(len(name)), 1, 2, 3, 4, 5, 6} }

func TestFindFindsEveryNodeOfTheListAndNothingElse(t *testing.T) {
	for _, n := range []int{1, 7, 8, 100, 5000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("n%d", i)
		}
		list := nodeList(names...)
		var tab Table[rec]
		if _, ok := tab.Find(list[0]); ok {
			t.Fatal("a table never synced found a node")
		}
		tab.Sync(list)
		for i, ni := range list {
			ref, ok := tab.Find(ni)
			if !ok {
				t.Fatalf("%d nodes: node %d not found", n, i)
			}
			l, v, ok := ref.Read()
			if !ok || l != (Line{}) || ref.Record() != nil {
				t.Fatalf("%d nodes: node %d starts with line %v (ok %v), record %v", n, i, l, ok, ref.Record())
			}
			if !ref.Store(v, &rec{name: names[i]}, lineOf(names[i])) {
				t.Fatalf("%d nodes: node %d: Store failed", n, i)
			}
		}
		for i, ni := range list {
			ref, _ := tab.Find(ni)
			if r := ref.Record(); r == nil || r.name != names[i] {
				t.Fatalf("%d nodes: node %d has record %+v", n, i, r)
			}
			if l, _, ok := ref.Read(); !ok || l != lineOf(names[i]) {
				t.Fatalf("%d nodes: node %d has line %v", n, i, l)
			}
		}
		// A copy of a NodeInfo (nominated pods, preemption) is not found.
		if _, ok := tab.Find(list[0].Snapshot()); ok {
			t.Fatalf("%d nodes: a copy was found", n)
		}
		if _, ok := tab.Find(nodeList("other")[0]); ok {
			t.Fatalf("%d nodes: a NodeInfo of no list was found", n)
		}
	}
}

func TestANewListKeepsTheRecordsOfNodesStillThere(t *testing.T) {
	list := nodeList("a", "b", "c")
	var tab Table[rec]
	tab.Sync(list)
	for _, ni := range list {
		ref, _ := tab.Find(ni)
		_, v, _ := ref.Read()
		ref.Store(v, &rec{name: ni.Node().Name}, lineOf(ni.Node().Name))
	}
	// b is removed, d added: the snapshot builds a new list of the same NodeInfos.
	next := []fwk.NodeInfo{list[2], nodeList("dd")[0], list[0]}
	tab.Sync(next)
	if _, ok := tab.Find(list[1]); ok {
		t.Error("the removed node is still found")
	}
	for _, ni := range []fwk.NodeInfo{list[0], list[2]} {
		ref, _ := tab.Find(ni)
		if r := ref.Record(); r == nil || r.name != ni.Node().Name {
			t.Errorf("%s lost its record: %+v", ni.Node().Name, r)
		}
		if l, _, _ := ref.Read(); l != lineOf(ni.Node().Name) {
			t.Errorf("%s lost its line: %v", ni.Node().Name, l)
		}
	}
	ref, _ := tab.Find(next[1])
	if r, l := ref.Record(), func() Line { l, _, _ := ref.Read(); return l }(); r != nil || l != (Line{}) {
		t.Errorf("the new node has a record %+v and line %v", r, l)
	}
	// The same list again is a no-op.
	tab.Sync(next)
	if tab.Len() != 3 {
		t.Errorf("Len = %d, want 3", tab.Len())
	}
}

func TestAStoreFailsOnceTheLineChangedSinceItsRead(t *testing.T) {
	list := nodeList("a", "b")
	var tab Table[rec]
	tab.Sync(list)
	ref, _ := tab.Find(list[0])
	_, v, _ := ref.Read() // a reader starts building from what it saw
	tab.Invalidate("a")
	if ref.Store(v, &rec{name: "built before the change"}, lineOf("x")) {
		t.Fatal("a record built before an Invalidate replaced what it cleared")
	}
	_, v, _ = ref.Read()
	other, _, _ := ref.Read()
	if !ref.Store(v, &rec{name: "first"}, lineOf("first")) {
		t.Fatal("a Store after a fresh Read failed")
	}
	if ref.Store(v, &rec{name: "second"}, lineOf("second")) {
		t.Fatal("two Stores from one Read both succeeded")
	}
	if l, _, _ := ref.Read(); l != lineOf("first") || ref.Record().name != "first" || other != (Line{}) {
		t.Fatalf("line %v, record %+v", l, ref.Record())
	}
	tab.Invalidate("a")
	if l, _, _ := ref.Read(); l != (Line{}) || ref.Record() != nil {
		t.Fatalf("after Invalidate: line %v, record %+v", l, ref.Record())
	}
	tab.Invalidate("no-such-node") // nothing to do
}

// A reader never sees a line that mixes two Stores, and the record it
// reads with a line (readBoth) is the one stored with it. Run under -race
// (make test RACE=1), this also checks that readers and writers do not race.
func TestConcurrentReadersSeeWholeLines(t *testing.T) {
	list := nodeList("a", "b", "c", "d")
	// Two tables of one group: writers of one lane never tear the other's
	// line, nor hand it their record.
	var g Group
	var tabs [2]Table[rec]
	tabs[0].Join(&g)
	tabs[1].Join(&g)
	tabs[0].Sync(list)
	whole := func(l Line) bool {
		for _, w := range l[1:] {
			if w != l[0] {
				return false
			}
		}
		return true
	}
	var wg sync.WaitGroup
	var torn atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			tab := &tabs[w%2]
			for i := range 2000 {
				ni := list[(w+i)%len(list)]
				ref, ok := tab.Find(ni)
				if !ok {
					continue
				}
				l, v, ok := ref.Read()
				if ok && !whole(l) {
					torn.Add(1)
				}
				if p, l, ok := ref.c.readBoth(ref.k); ok && p != nil && (!whole(l) || l[0] != uint64(len((*rec)(p).name))) {
					torn.Add(1)
				}
				n := uint64(w*10000 + i)
				ref.Store(v, &rec{name: strings.Repeat("x", int(n%64))}, Line{n % 64, n % 64, n % 64, n % 64, n % 64, n % 64, n % 64})
				if i%100 == 0 {
					tab.Invalidate(ni.Node().Name)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			if i%2 == 0 {
				tabs[i%4/2].Sync([]fwk.NodeInfo{list[3], list[2], list[1], list[0]})
			} else {
				tabs[i%4/2].Sync(list)
			}
		}
	})
	wg.Wait()
	if n := torn.Load(); n > 0 {
		t.Fatalf("%d reads saw a line mixing two Stores, or a record not stored with it", n)
	}
}

// The tables of a group keep their own lines and records, side by side: a
// node's lines are one block, 64 bytes a lane, aligned on the block's size.
func TestTheTablesOfAGroupShareBlocks(t *testing.T) {
	list := nodeList("a", "b", "c")
	var g Group
	var cel, load Table[rec]
	cel.Join(&g)
	load.Join(&g)
	cel.Sync(list) // one Sync serves the group
	for _, ni := range list {
		rc, ok1 := cel.Find(ni)
		rl, ok2 := load.Find(ni)
		if !ok1 || !ok2 {
			t.Fatalf("%s: found %v and %v", ni.Node().Name, ok1, ok2)
		}
		a, b := uintptr(unsafe.Pointer(&rc.c.lines[rc.k])), uintptr(unsafe.Pointer(&rl.c.lines[rl.k]))
		if b != a+64 || a%128 != 0 {
			t.Fatalf("%s: lines at %#x and %#x, want a 128-byte block", ni.Node().Name, a, b)
		}
		_, v, _ := rc.Read()
		rc.Store(v, &rec{name: "cel " + ni.Node().Name}, lineOf("cel"))
		_, v, _ = rl.Read()
		rl.Store(v, &rec{name: "load " + ni.Node().Name}, lineOf("load"))
	}
	load.Invalidate("b")
	// A new list keeps both lanes.
	cel.Sync([]fwk.NodeInfo{list[2], list[1], list[0]})
	for _, ni := range list {
		n := ni.Node().Name
		rc, _ := cel.Find(ni)
		rl, _ := load.Find(ni)
		if l, _, _ := rc.Read(); l != lineOf("cel") || rc.Record().name != "cel "+n {
			t.Fatalf("%s: CEL lane has %v, %+v", n, l, rc.Record())
		}
		wantLine, wantRec := lineOf("load"), "load "+n
		if n == "b" {
			wantLine, wantRec = Line{}, ""
		}
		l, _, _ := rl.Read()
		if r := rl.Record(); l != wantLine || (r == nil) != (wantRec == "") || r != nil && r.name != wantRec {
			t.Fatalf("%s: load lane has %v, %+v", n, l, r)
		}
	}
}

// A table that joins a group after the group synced finds nothing until
// the next Sync makes its lane, and the lanes already there keep theirs.
func TestALaneJoinedLateIsMadeByTheNextSync(t *testing.T) {
	list := nodeList("a", "b")
	var g Group
	var first, late Table[rec]
	first.Join(&g)
	first.Sync(list)
	ref, _ := first.Find(list[0])
	_, v, _ := ref.Read()
	ref.Store(v, &rec{name: "kept"}, lineOf("kept"))
	late.Join(&g)
	if _, ok := late.Find(list[0]); ok {
		t.Fatal("a lane not synced yet was found")
	}
	late.Sync(list)
	if _, ok := late.Find(list[0]); !ok {
		t.Fatal("the late lane is not found after Sync")
	}
	ref, _ = first.Find(list[0])
	if r := ref.Record(); r == nil || r.name != "kept" {
		t.Fatalf("the first lane lost its record: %+v", r)
	}
}

type handle struct{ fwk.Handle }

func TestGroupForGivesAProfileOneGroup(t *testing.T) {
	h1, h2 := &handle{}, &handle{}
	g1 := GroupFor(h1)
	if GroupFor(h1) != g1 {
		t.Fatal("one handle, two groups")
	}
	if GroupFor(h2) == g1 {
		t.Fatal("two handles, one group")
	}
	if a, b := GroupFor(nil), GroupFor(nil); a == b {
		t.Fatal("nil handles share a group")
	}
	runtime.KeepAlive(g1)
}
