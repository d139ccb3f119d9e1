package cyclestate

import (
	"sync"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type data struct{ n int }

func (d *data) Clone() fwk.StateData { return d }

const key fwk.StateKey = "k"

func TestReadAnswersAsTheCycleState(t *testing.T) {
	var l Last[*data]
	a, b := framework.NewCycleState(), framework.NewCycleState()
	if _, err := l.Read(a, key); err == nil {
		t.Fatal("read of a state never written succeeded")
	}
	l.Write(a, key, &data{1})
	b.Write(key, &data{2}) // written by someone else: read from the map
	for _, tc := range []struct {
		state fwk.CycleState
		want  int
	}{{a, 1}, {b, 2}, {a.Clone(), 1}} {
		got, err := l.Read(tc.state, key)
		if err != nil || got.n != tc.want {
			t.Errorf("Read = %v, %v; want %d", got, err, tc.want)
		}
	}
	// A later write to another state: a is read from its map, still right.
	l.Write(b, key, &data{3})
	if got, _ := l.Read(a, key); got.n != 1 {
		t.Errorf("Read(a) = %d after b was written, want 1", got.n)
	}
	if got, _ := l.Read(b, key); got.n != 3 {
		t.Errorf("Read(b) = %d, want 3", got.n)
	}
}

func TestConcurrentCycles(t *testing.T) {
	var l Last[*data]
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s := framework.NewCycleState()
				l.Write(s, key, &data{w*10000 + i})
				for range 10 {
					if got, err := l.Read(s, key); err != nil || got.n != w*10000+i {
						t.Errorf("Read = %v, %v; want %d", got, err, w*10000+i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
