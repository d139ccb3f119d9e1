package onceper

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := New(time.Minute)
	l.now = func() time.Time { return clock }
	if !l.Allow("a") || l.Allow("a") || !l.Allow("b") {
		t.Fatal("want a once, a refused, b once")
	}
	clock = clock.Add(59 * time.Second)
	if l.Allow("a") {
		t.Error("a allowed again within the interval")
	}
	clock = clock.Add(time.Second)
	if !l.Allow("a") {
		t.Error("a refused after the interval")
	}
	for i := range 1000 {
		l.Allow(fmt.Sprint(i))
	}
	clock = clock.Add(2 * time.Minute)
	l.Allow("c") // sweeps
	if n := l.Len(); n != 1 {
		t.Errorf("%d keys remembered after the interval, want 1 (bounded)", n)
	}
}
