package slotmap

import (
	"fmt"
	"sync"
	"testing"
)

// Keys stored from several goroutines are found at once, publication keeps
// the pending set small, deleted keys are gone and their slots dropped, and
// a key stored again after its deletion is found again.
func TestMap(t *testing.T) {
	m := New[int]()
	const n = 1000
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				v := i
				m.Store(key(i), &v)
				if got := m.Load(key(i)); got == nil || *got != i {
					t.Errorf("key %d: got %v right after Store", i, got)
				}
			}
		})
	}
	wg.Wait()
	if got := m.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
	if p := m.pendingLen(); p > n/8+16 {
		t.Errorf("%d keys still pending publication", p)
	}
	for i := 0; i < n; i += 2 {
		m.Delete(key(i))
	}
	for i := range n {
		if found := m.Load(key(i)) != nil; found != (i%2 == 1) {
			t.Errorf("key %d: found %v after deleting the even keys", i, found)
		}
	}
	if got := m.Len(); got != n/2 {
		t.Errorf("Len = %d after deletions, want %d", got, n/2)
	}
	if p := m.publishedLen(); p > n/2+n/8 {
		t.Errorf("%d slots published for %d keys: deleted slots are not dropped", p, n/2)
	}
	v := 7
	m.Store(key(0), &v)
	if got := m.Load(key(0)); got == nil || *got != 7 {
		t.Errorf("key stored after deletion: got %v", got)
	}
}

// Update is atomic per key: concurrent increments are not lost, and
// returning the old value keeps it.
func TestUpdate(t *testing.T) {
	m := New[int]()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				m.Update("k", func(old *int) *int {
					v := 1
					if old != nil {
						v = *old + 1
					}
					return &v
				})
			}
		})
	}
	wg.Wait()
	if got := *m.Load("k"); got != 8000 {
		t.Errorf("after 8,000 increments: %d", got)
	}
	m.Update("k", func(old *int) *int { return old })
	if got := *m.Load("k"); got != 8000 {
		t.Errorf("keeping the old value changed it to %d", got)
	}
}

func key(i int) string { return fmt.Sprintf("node-%d", i) }

// BenchmarkLoad reads 5,000 keys from all cores.
func BenchmarkLoad(b *testing.B) {
	m := New[int]()
	for i := range 5000 {
		v := i
		m.Store(key(i), &v)
	}
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = key(i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if m.Load(keys[i%5000]) == nil {
				b.Error("missing key")
			}
			i++
		}
	})
}
