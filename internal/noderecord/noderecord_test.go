package noderecord

import (
	"fmt"
	"sync"
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

func TestSlotFindsEveryNodeOfTheListAndNothingElse(t *testing.T) {
	for _, n := range []int{1, 7, 8, 100, 5000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("n%d", i)
		}
		list := nodeList(names...)
		var tab Table[rec]
		if tab.Slot(list[0]) != nil {
			t.Fatal("a table never synced found a node")
		}
		tab.Sync(list)
		for i, ni := range list {
			s := tab.Slot(ni)
			if s == nil {
				t.Fatalf("%d nodes: node %d not found", n, i)
			}
			s.Store(&rec{name: names[i]})
		}
		for i, ni := range list {
			if r := tab.Slot(ni).Load(); r == nil || r.name != names[i] {
				t.Fatalf("%d nodes: node %d has record %+v", n, i, r)
			}
		}
		// A copy of a NodeInfo (nominated pods, preemption) is not found.
		if tab.Slot(list[0].Snapshot()) != nil {
			t.Fatalf("%d nodes: a copy was found", n)
		}
		if tab.Slot(nodeList("other")[0]) != nil {
			t.Fatalf("%d nodes: a NodeInfo of no list was found", n)
		}
	}
}

func TestANewListKeepsTheRecordsOfNodesStillThere(t *testing.T) {
	list := nodeList("a", "b", "c")
	var tab Table[rec]
	tab.Sync(list)
	for _, ni := range list {
		tab.Slot(ni).Store(&rec{name: ni.Node().Name})
	}
	// b is removed, d added: the snapshot builds a new list of the same NodeInfos.
	next := []fwk.NodeInfo{list[2], nodeList("d")[0], list[0]}
	tab.Sync(next)
	if tab.Slot(list[1]) != nil {
		t.Error("the removed node is still found")
	}
	for _, ni := range []fwk.NodeInfo{list[0], list[2]} {
		if r := tab.Slot(ni).Load(); r == nil || r.name != ni.Node().Name {
			t.Errorf("%s lost its record: %+v", ni.Node().Name, r)
		}
	}
	if r := tab.Slot(next[1]).Load(); r != nil {
		t.Errorf("the new node has a record: %+v", r)
	}
	// The same list again is a no-op.
	tab.Sync(next)
	if tab.Len() != 3 {
		t.Errorf("Len = %d, want 3", tab.Len())
	}
}

func TestInvalidateWinsOverARecordBuiltBeforeIt(t *testing.T) {
	list := nodeList("a", "b")
	var tab Table[rec]
	tab.Sync(list)
	slot := tab.Slot(list[0])
	old := slot.Load() // a reader starts building from what it saw
	tab.Invalidate("a", &rec{})
	if slot.CompareAndSwap(old, &rec{name: "built before the change"}) {
		t.Fatal("a record built before an Invalidate replaced its tombstone")
	}
	tab.Invalidate("no-such-node", &rec{}) // nothing to do
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	list := nodeList("a", "b", "c", "d")
	var tab Table[rec]
	tab.Sync(list)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				ni := list[(w+i)%len(list)]
				if s := tab.Slot(ni); s != nil {
					old := s.Load()
					s.CompareAndSwap(old, &rec{name: ni.Node().Name})
				}
				if i%100 == 0 {
					tab.Invalidate(ni.Node().Name, &rec{})
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
}
