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
