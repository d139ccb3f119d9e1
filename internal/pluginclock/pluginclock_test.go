package pluginclock

import (
	"context"
	"testing"
	"time"
)

func TestFromFallsBackWhenTheContextCarriesNoClock(t *testing.T) {
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := From(context.Background(), func() time.Time { return fixed })(); !got.Equal(fixed) {
		t.Errorf("no clock in the context: %v, want the fallback's %v", got, fixed)
	}
	ctx := With(context.Background(), func() time.Time { return fixed.Add(time.Hour) })
	if got := From(ctx, time.Now)(); !got.Equal(fixed.Add(time.Hour)) {
		t.Errorf("clock in the context: %v, want %v", got, fixed.Add(time.Hour))
	}
}

func TestAtStartsAtItsTimeAndRunsAtTheWallClocksRate(t *testing.T) {
	taken := time.Now().Add(-time.Hour)
	now := At(taken)
	first := now()
	if d := first.Sub(taken); d < 0 || d > time.Minute {
		t.Fatalf("first reading %v, want %v (within a minute)", first, taken)
	}
	if first != first.Round(0) {
		t.Error("reading carries a monotonic clock reading")
	}
	wallBefore := time.Now()
	for time.Since(wallBefore) < 5*time.Millisecond {
	}
	if d := now().Sub(first); d < 5*time.Millisecond || d > time.Minute {
		t.Errorf("advanced %v after 5ms of wall time", d)
	}
}
