// Command soak is `make soak`: two Berth replicas with leader election and a
// profile with every plugin, over the real kube-controller-manager and a
// thousand KWOK nodes, under a seeded random workload (Deployments, Jobs,
// gangs, quotas, rules, explanations, graceful deletions) and a schedule of
// faults (leader SIGKILL, API outage, node churn, admission refusals,
// NotReady nodes, metrics-server restarts, quota and PodGroup edits). A
// watcher reads only the API and checks the invariants every few seconds;
// every violation is printed with the objects involved and the seed.
//
// The same seed replays the same sequence of operations (their timing and
// the scheduler's decisions vary with the machine). It writes
// <out>/report.json and <out>/report.md and exits 1 on any violation.
//
//	make soak SOAK_MINUTES=20 SOAK_NODES=1000 SOAK_SEED=1
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	duration      time.Duration
	nodes         int
	seed          int64
	out           string
	scheduler     string
	assets        string
	kwok          string
	kwokCRDs      string
	metricsServer string
	// opsPerSecond is the workload generator's rate.
	opsPerSecond float64
	// faultEvery is the mean time between faults (0: none).
	faultEvery time.Duration
	// faults limits the kinds injected (empty: all).
	faults map[string]bool
	// drain: after the faults are healed and the workload stops, how long
	// every invariant keeps watching before the verdict.
	drain time.Duration
	// mutant is the planted fault the replicas run with (a scheduler built
	// with -tags soakmutants).
	mutant string
	// maxRSSSlope and maxGoroutineSlope fail the run when a replica's slope
	// (over a process start of at least leakWindow) exceeds them; 0: only
	// reported.
	maxRSSSlope, maxGoroutineSlope float64
	leakWindow                     time.Duration
	// stopOnViolation ends the soak (no drain) at the first violation
	// (make soak-mutants: a mutant caught needs no more minutes).
	stopOnViolation bool
	// schedulerGates are more feature gates for the replicas
	// ("Name=true,..."), after the native gangs' gate.
	schedulerGates string
}

// replicaGates is the replicas' --feature-gates: the native gangs' gate,
// then extra.
func replicaGates(extra string) string {
	if extra == "" {
		return nativeGangsGate
	}
	return nativeGangsGate + "," + extra
}

// The workload's rate and the faults' pace when not set (make soak's
// SOAK_OPS and SOAK_FAULT_EVERY defaults).
const (
	defaultOpsPerSecond = 2
	defaultFaultEvery   = 20 * time.Second
)

func main() {
	var o options
	minutes := flag.Float64("minutes", 20, "how long the soak runs")
	flag.IntVar(&o.nodes, "nodes", 1000, "KWOK nodes at the start")
	flag.Int64Var(&o.seed, "seed", 0, "the generator's seed (0: the time)")
	flag.StringVar(&o.out, "out", "bin/soak", "directory for report.json, report.md and the logs")
	flag.StringVar(&o.scheduler, "scheduler", "bin/scheduler", "Berth's scheduler binary (make build)")
	flag.StringVar(&o.assets, "assets", "", "directory holding kube-apiserver, etcd and kube-controller-manager (make envtest-bin)")
	flag.StringVar(&o.kwok, "kwok", "", "KWOK's binary (make envtest-bin)")
	flag.StringVar(&o.kwokCRDs, "kwok-crds", "", "directory holding KWOK's CRDs (make envtest-bin)")
	flag.StringVar(&o.metricsServer, "metrics-server", "", "metrics-server's binary (make envtest-bin); empty: LoadAware runs without metrics")
	flag.Float64Var(&o.opsPerSecond, "ops-per-second", defaultOpsPerSecond, "workload operations per second")
	faultEvery := flag.Duration("fault-every", defaultFaultEvery, "mean time between faults (0: none)")
	faultKinds := flag.String("faults", "", "comma-separated fault kinds to inject (empty: all; see faults.go)")
	flag.DurationVar(&o.drain, "drain", 3*time.Minute, "after the faults heal and the workload stops, how long the invariants keep watching")
	flag.StringVar(&o.mutant, "mutant", "", "planted fault for the replicas (BERTH_MUTANT; the scheduler must be built with -tags soakmutants)")
	flag.Float64Var(&o.maxRSSSlope, "max-rss-slope", 0, "fail when a replica's RSS grows faster (MiB/min) over a process start of at least --leak-window (0: report only)")
	flag.Float64Var(&o.maxGoroutineSlope, "max-goroutine-slope", 0, "fail when a replica's goroutines grow faster (/min) over a process start of at least --leak-window (0: report only)")
	flag.DurationVar(&o.leakWindow, "leak-window", 10*time.Minute, "the shortest process start the leak thresholds judge")
	flag.StringVar(&o.schedulerGates, "scheduler-feature-gates", "", "more feature gates for the replicas (\"Name=true,...\"), e.g. upstream's SchedulerAsyncAPICalls")
	flag.BoolVar(&o.stopOnViolation, "stop-on-violation", false, "end at the first violation, without the drain (make soak-mutants)")
	mutantsTable := flag.String("mutants-table", "", "print the mutants' table from DIR/<mutant>/report.json for the mutants named as arguments, and exit")
	flag.Parse()
	if *mutantsTable != "" {
		os.Exit(printMutantsTable(*mutantsTable, flag.Args()))
	}
	o.duration = time.Duration(*minutes * float64(time.Minute))
	o.faultEvery = *faultEvery
	if *faultKinds != "" {
		o.faults = map[string]bool{}
		known := map[string]bool{}
		for _, k := range faultWeights {
			known[k.kind] = true
		}
		for _, k := range strings.Split(*faultKinds, ",") {
			if !known[k] {
				fmt.Fprintf(os.Stderr, "--faults: unknown fault %q\n", k)
				os.Exit(2)
			}
			o.faults[k] = true
		}
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	rep, err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak failed (seed %d): %v\n", o.seed, err)
		os.Exit(2)
	}
	if n := len(rep.Violations); n > 0 {
		fmt.Fprintf(os.Stderr, "soak: %d violations (seed %d); replay with SOAK_SEED=%d; see %s/report.md\n", n, o.seed, o.seed, o.out)
		os.Exit(1)
	}
	fmt.Printf("soak: 0 violations in %s at %d nodes (seed %d); %s/report.md\n", o.duration, o.nodes, o.seed, o.out)
}
