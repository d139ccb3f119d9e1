package noderecord

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
	var tab Table[rec]
	tab.Sync(list)
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
				if r, l, ok := ref.readBoth(); ok && r != nil && (!whole(l) || l[0] != uint64(len(r.name))) {
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
				tab.Sync([]fwk.NodeInfo{list[3], list[2], list[1], list[0]})
			} else {
				tab.Sync(list)
			}
		}
	})
	wg.Wait()
	if n := torn.Load(); n > 0 {
		t.Fatalf("%d reads saw a line mixing two Stores, or a record not stored with it", n)
	}
}
