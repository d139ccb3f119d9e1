package onceper

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestLimiter(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	l := newWithClock(time.Minute, clock)
	if !l.Allow("a") || l.Allow("a") || !l.Allow("b") {
		t.Fatal("want a once, a refused, b once")
	}
	clock.Step(59 * time.Second)
	if l.Allow("a") {
		t.Error("a allowed again within the interval")
	}
	clock.Step(time.Second)
	if !l.Allow("a") {
		t.Error("a refused after the interval")
	}
	for i := range 1000 {
		l.Allow(fmt.Sprint(i))
	}
	clock.Step(2 * time.Minute)
	l.Allow("c") // drops the expired keys
	if n := l.Len(); n != 1 {
		t.Errorf("%d keys remembered after the interval, want 1 (bounded)", n)
	}
}
