package main

import (
	"testing"
	"time"
)

// The report's command replays the run: the workload's rate and the faults'
// pace are named when they are not make soak's defaults.
func TestSoakCommandReplaysTheRun(t *testing.T) {
	base := options{duration: 30 * time.Minute, nodes: 1000, seed: 2026, opsPerSecond: defaultOpsPerSecond, faultEvery: defaultFaultEvery}
	slow := base
	slow.opsPerSecond, slow.faultEvery, slow.schedulerGates = 1, time.Minute, "SchedulerAsyncAPICalls=true"
	for _, c := range []struct {
		o    options
		want string
	}{
		{base, "make soak SOAK_MINUTES=30 SOAK_NODES=1000 SOAK_SEED=2026"},
		{slow, "make soak SOAK_MINUTES=30 SOAK_NODES=1000 SOAK_SEED=2026 SOAK_OPS=1 SOAK_FAULT_EVERY=1m0s SOAK_SCHEDULER_GATES=SchedulerAsyncAPICalls=true"},
	} {
		if got := soakCommand(c.o); got != c.want {
			t.Errorf("soakCommand = %q, want %q", got, c.want)
		}
	}
}

// The drain ends once a leader has run drainCaughtUp without a backlog
// (a backlog that ended in its last seconds would leave pods unjudged),
// and drains at most twice its length.
func TestTheDrainWaitsForALeaderThatCaughtUp(t *testing.T) {
	const d = 200 * time.Millisecond
	quiet := func(string, ...any) {}
	if got := drainUntilCaughtUp(t.Context(), d, func() time.Duration { return drainCaughtUp }, quiet); got < d || got >= 2*d {
		t.Errorf("caught up all along: drained %s, want its length %s", got, d)
	}
	if got := drainUntilCaughtUp(t.Context(), d, func() time.Duration { return 0 }, quiet); got < 2*d {
		t.Errorf("never caught up: drained %s, want twice its length %s", got, 2*d)
	}
	var calls int
	caughtUp := func() time.Duration { // caught up from the drain's end on
		calls++
		if calls > 3 {
			return drainCaughtUp
		}
		return 0
	}
	if got := drainUntilCaughtUp(t.Context(), d, caughtUp, quiet); got <= d || got >= 2*d {
		t.Errorf("caught up after the drain's length: drained %s, want between %s and %s", got, d, 2*d)
	}
}
