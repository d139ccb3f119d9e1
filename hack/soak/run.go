package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// started is when the soak started; every line printed carries the time since.
var started = time.Now()

func logf(format string, args ...any) {
	fmt.Printf("[%6.1fs] "+format+"\n", append([]any{time.Since(started).Seconds()}, args...)...)
}

// nodeSpec is the i-th node's shape: mostly 4 CPU / 16 GiB, every tenth
// 8 CPU, every twentieth a GPU node (CELPolicy keeps other pods off it),
// every fifth spot (the batch rule prefers it).
func nodeSpec(name string, i int) sandbox.NodeSpec {
	s := sandbox.NodeSpec{Name: name, CPU: "4", Memory: "16Gi", Labels: map[string]string{}}
	if i%10 == 3 {
		s.CPU, s.Memory = "8", "32Gi"
	}
	if i%20 == 7 {
		s.Labels[gpuLabel] = "true"
		s.Extended = map[string]string{string(gpuResource): "4"}
	}
	if i%5 == 1 {
		s.Labels["lifecycle"] = "spot"
	}
	return s
}

func run(ctx context.Context, o options) (rep *report, err error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	if o.assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", o.assets)
	}
	root, err := sandbox.RepoRoot()
	if err != nil {
		return nil, err
	}
	logf("seed %d, %s, %d nodes; control plane from %s", o.seed, o.duration, o.nodes, os.Getenv("KUBEBUILDER_ASSETS"))
	// GenericWorkload (beta, off by default in 1.37) on the API server and
	// the replicas: Kubernetes' own gangs beside scheduler-plugins'.
	// The API server's audit log of the replicas' LISTs of pods and their
	// bindings (audit.go): how an overcommit beside a foreign pod is judged.
	// Under --out: the evidence of a verdict stays with the report.
	auditDir := filepath.Join(o.out, "audit")
	if err := os.MkdirAll(auditDir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(auditDir, "audit.log")) // an earlier run's
	policy, auditLog := filepath.Join(auditDir, "policy.yaml"), filepath.Join(auditDir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy("system:serviceaccount:"+chartNamespace+":"+chartServiceAccount)), 0o600); err != nil {
		return nil, err
	}
	cp, err := sandbox.StartControlPlane("max-requests-inflight=800", "max-mutating-requests-inflight=400",
		"feature-gates="+nativeGangsGate, "runtime-config=scheduling.k8s.io/v1beta1=true",
		"audit-policy-file="+policy, "audit-log-path="+auditLog, "audit-log-format=json", "audit-log-mode=blocking",
		// One file, never rotated (the watcher tails it).
		"audit-log-maxsize=0")
	if err != nil {
		return nil, err
	}
	cl := &cluster{cp: cp, c: cp.Client, sinceLeaseFault: func() time.Duration { return time.Duration(1 << 62) }}
	logsDir := filepath.Join(o.out, "logs")
	stopWatch := func() {}
	defer func() {
		stopWatch()
		cl.stop()
		copyLogs(cp.Dir, logsDir)
		if stopErr := cp.Stop(); err == nil && stopErr != nil {
			err = stopErr
		}
	}()
	if cl.sp, err = versioned.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if cl.scrape, err = scrapeClient(cp); err != nil {
		return nil, err
	}
	logf("kube-controller-manager")
	if cl.cm, err = sandbox.StartControllerManager(ctx, cp, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), sandbox.ControllerManagerOptions{
		NodeMonitorGracePeriod: 90 * time.Second,
		// Its PodGroup protection controller lifts the finalizer the
		// API server's admission puts on native PodGroups.
		ExtraArgs: []string{"--feature-gates=" + nativeGangsGate},
	}); err != nil {
		return nil, err
	}
	// metrics-server registered before KWOK serves its nodes' kubelet
	// endpoints (resource metrics) on 127.0.0.1; it starts once the nodes
	// are Ready.
	if o.metricsServer != "" {
		if cl.ms, err = sandbox.NewMetricsServer(ctx, cp, o.metricsServer); err != nil {
			return nil, err
		}
	}
	logf("KWOK")
	if cl.kwok, err = sandbox.StartKWOK(ctx, cp, o.kwok, o.kwokCRDs, "127.0.0.1"); err != nil {
		return nil, err
	}
	var names []string
	var clusterCPU int64
	for i := range o.nodes {
		s := nodeSpec(fmt.Sprintf("soak-%d", i), i)
		if _, err := cl.kwok.CreateNode(ctx, s); err != nil {
			return nil, err
		}
		names = append(names, s.Name)
		if _, gpu := s.Labels[gpuLabel]; !gpu {
			cpu := resource.MustParse(s.CPU)
			clusterCPU += cpu.MilliValue()
		}
	}
	// The reserve's and the refuser's nodes: not the faults' to act on,
	// nor the workload's (clusterCPU sizes it).
	ready := append([]string(nil), names...)
	for _, s := range probeNodeSpecs() {
		if _, err := cl.kwok.CreateNode(ctx, s); err != nil {
			return nil, err
		}
		ready = append(ready, s.Name)
	}
	if err := cl.kwok.Refuse(ctx, refuserNode, sandbox.ReasonUnexpectedAdmissionError, refusalMessage(sandbox.ReasonUnexpectedAdmissionError)); err != nil {
		return nil, err
	}
	if err := cl.kwok.WaitReady(ctx, time.Minute+time.Duration(o.nodes)*50*time.Millisecond, ready...); err != nil {
		return nil, err
	}
	logf("%d nodes Ready (%d of them the reserve's and the refuser's)", len(ready), len(ready)-len(names))
	if cl.ms != nil {
		logf("metrics-server, scraping KWOK's kubelet endpoints at %s", cl.kwok.Endpoint())
		if err := cl.ms.Start(ctx); err != nil {
			return nil, err
		}
	}
	gen := newGenerator(o.seed, cl.c, cl.sp, clusterCPU)
	if err := gen.setup(ctx); err != nil {
		return nil, err
	}
	// The watcher's informers end before the control plane stops (an API
	// server with open watches drains slowly).
	watchCtx, cancelWatch := context.WithCancel(ctx)
	stopWatch = cancelWatch
	w, err := newWatcher(watchCtx, cl.c, cl.sp)
	if err != nil {
		return nil, err
	}
	// Explain's per-pod refusals over its budget (6-explain's exemption).
	w.budgetRefusals = newRefusals(cp.Dir)
	w.audit = newAuditTrail(auditLog)
	if err := installChartRBAC(ctx, cp, root); err != nil {
		return nil, err
	}
	// The chart's client rate, read once for both replicas.
	rate, err := readChartClient(root)
	if err != nil {
		return nil, err
	}
	for i := range 2 {
		name := fmt.Sprintf("berth-%d", i)
		proxy, err := sandbox.StartProxy(cp, name)
		if err != nil {
			return nil, err
		}
		kubeconfig, direct, err := replicaKubeconfigs(cp, proxy, name)
		if err != nil {
			return nil, err
		}
		cfg, err := sandbox.PrepareConfig(cp.Dir, name+"-scheduler.yaml", kubeconfig, true, filepath.Join(root, "manifests", "examples", "all-plugins.yaml"))
		if err != nil {
			return nil, err
		}
		if err := useChartConfig(cfg, rate); err != nil {
			return nil, err
		}
		port, err := sandbox.FreePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		r := &replica{name: name, bin: o.scheduler, config: cfg, dir: cp.Dir, port: port, proxy: proxy, args: []string{
			fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--cert-dir=" + filepath.Join(cp.Dir, name+"-certs"),
			// Delegated authentication and authorization straight to
			// the API server, so /metrics answers during an outage.
			"--authentication-kubeconfig=" + direct, "--authorization-kubeconfig=" + direct,
			"--feature-gates=" + replicaGates(o.schedulerGates),
			// The chart's log level: Explain logs each pod it leaves
			// unexplained over its budget at V(2), and the watcher
			// reads those lines (refusals.go).
			"--v=2",
		}}
		if o.mutant != "" {
			r.env = []string{"BERTH_MUTANT=" + o.mutant}
		}
		if err := r.start(); err != nil {
			return nil, err
		}
		cl.replicas = append(cl.replicas, r)
	}
	logf("two Berth replicas (leader election on), profile berth-all from manifests/examples/all-plugins.yaml (ConfirmBinder confirm: Always and the client rate, the chart's defaults), as the chart's ServiceAccount %s/%s with its RBAC", chartNamespace, chartServiceAccount)
	if o.mutant != "" {
		logf("MUTANT: the replicas plant %q", o.mutant)
	}

	fl := newFaults(o.seed, cl, w, names, o.faults)
	cl.sinceLeaseFault = fl.sinceLeaseFault
	soakCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	loop := func(every time.Duration, f func()) {
		wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-soakCtx.Done():
					return
				case <-t.C:
					f()
				}
			}
		})
	}
	loop(500*time.Millisecond, func() { cl.supervise(soakCtx) })
	loop(5*time.Second, func() { cl.sampleAll(soakCtx, w) })
	loop(3*time.Second, func() {
		// A replica that does not answer its scrape may be a starved
		// leader: the checks go on (they would hide a stall otherwise).
		r, s, known := cl.leaderKnown(soakCtx)
		if r == nil && !known {
			logf("watcher: a replica did not answer its scrape; checking as if it led")
		}
		term, attempts := leaderOf(r, s)
		w.check(term, known, queueOf(r, s), attempts)
	})
	loop(30*time.Second, func() { cl.logProgress(logf) })
	fb := newForeignBinder(o.seed, cl.c, w)
	loop(foreignEvery, func() { fb.step(soakCtx, logf) })
	// The generator and the faults run in this goroutine, in order.
	// Undo what is still in effect before the processes stop, also when
	// interrupted.
	defer fl.undoAll()
	faultRNG := rand.New(rand.NewPCG(uint64(o.seed), 0x71e))
	nextFault := time.Now().Add(jitter(faultRNG, o.faultEvery))
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.opsPerSecond))
	var opErrors int
	stopEarly := make(<-chan struct{})
	if o.stopOnViolation {
		stopEarly = w.first
	}
	stopped := false
	for done := false; !done; {
		select {
		case <-soakCtx.Done():
			done = true
		case <-stopEarly:
			logf("a violation, and --stop-on-violation: ending the soak without the drain")
			stopped = true
			cancel()
			stopEarly = nil
		case <-tick.C:
			if kind, err := gen.step(soakCtx); err != nil && soakCtx.Err() == nil {
				opErrors++
				logf("operation %s: %v", kind, err)
			}
			if time.Now().After(nextFault) && o.faultEvery > 0 {
				if err := fl.inject(soakCtx, logf); err != nil && soakCtx.Err() == nil {
					logf("fault: %v", err)
				}
				nextFault = time.Now().Add(jitter(faultRNG, o.faultEvery))
			}
		}
	}
	tick.Stop()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	// Heal, then judge: every fault undone, the workload stopped, and the
	// invariants on for the drain; a pod still waiting at its end for room
	// that was there is a violation.
	fl.undoAll()
	logf("heal: faults undone, workload stopped; draining for %s with every invariant on", o.drain)
	drain := o.drain
	if stopped {
		drain = 0
	}
	drainCtx, cancelDrain := context.WithCancel(ctx)
	soakCtx = drainCtx
	loop(500*time.Millisecond, func() { cl.supervise(drainCtx) })
	loop(5*time.Second, func() { cl.sampleAll(drainCtx, w) })
	loop(3*time.Second, func() {
		r, s, known := cl.leaderKnown(drainCtx)
		term, attempts := leaderOf(r, s)
		w.check(term, known, queueOf(r, s), attempts)
	})
	loop(30*time.Second, func() { cl.logProgress(logf) })
	// The report gives the drain as it ran.
	o.drain = drainUntilCaughtUp(drainCtx, drain, w.caughtUpFor, logf)
	cancelDrain()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	if !stopped {
		w.judgeDrained()
	}
	w.finalConfirmed()
	cl.judgeExits(w)
	rep = buildReport(o, gen, fl, w, cl, opErrors)
	if err := rep.write(o.out); err != nil {
		return nil, err
	}
	return rep, nil
}

// drainCaughtUp: the drain ends with a leader that has run this long
// without a backlog: the liveness clocks count only such time, and a pod
// left waiting when a backlog ended in the drain's last seconds would not
// be judged.
const drainCaughtUp = drainJudged + 30*time.Second

// drainUntilCaughtUp waits out the drain (d), and then, up to d more, until
// a leader has run drainCaughtUp without a backlog (caughtUp reads it);
// it returns how long it drained. A leader that never catches up is
// judged by judgeDrained (its backlog at the end).
func drainUntilCaughtUp(ctx context.Context, d time.Duration, caughtUp func() time.Duration, logf func(string, ...any)) time.Duration {
	start := time.Now()
	if d <= 0 {
		return 0
	}
	t := time.NewTicker(min(time.Second, d/10))
	defer t.Stop()
	extended := false
	for {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-t.C:
		}
		ran := time.Since(start)
		if ran < d {
			continue
		}
		c := caughtUp()
		if c >= drainCaughtUp || ran >= 2*d {
			if extended {
				logf("heal: drained %s (the leader without a backlog for the last %s)", ran.Round(time.Second), c.Round(time.Second))
			}
			return ran
		}
		if !extended {
			extended = true
			logf("heal: draining on: the leader has run without a backlog for %s only (%s wanted; at most %s more)", c.Round(time.Second), drainCaughtUp, d)
		}
	}
}

// jitter is d ± 50 %.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rng.Float64()))
}

// supervise restarts replicas that exited (as a kubelet restarts a static
// pod's container), recording why each exited.
func (cl *cluster) supervise(ctx context.Context) {
	for _, r := range cl.replicas {
		p, start := r.current()
		if p == nil || !p.Exited() || ctx.Err() != nil {
			continue
		}
		r.mu.Lock()
		stopping := r.stopping
		r.mu.Unlock()
		if stopping {
			continue
		}
		cause, detail := exitCause(r.logPath(start))
		r.mu.Lock()
		if r.killed {
			cause = "killed"
			r.killed = false
		}
		r.exits = append(r.exits, exitRecord{At: time.Since(started), Cause: cause, Log: filepath.Base(r.logPath(start)), Detail: detail, LeaseFaultAgo: cl.sinceLeaseFault()})
		r.mu.Unlock()
		logf("replica %s exited (%s); restarting", r.name, cause)
		if err := r.start(); err != nil {
			logf("restarting %s: %v", r.name, err)
		}
	}
}

func (r *replica) kill() {
	r.mu.Lock()
	p := r.proc
	r.killed = true
	r.mu.Unlock()
	p.Kill()
}

func (r *replica) exitsSnapshot() []exitRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exitRecord(nil), r.exits...)
}

func (cl *cluster) sampleAll(ctx context.Context, w *watcher) {
	for _, r := range cl.replicas {
		p, _ := r.current()
		if p == nil || p.Exited() {
			continue
		}
		s, err := cl.scrapeMetrics(ctx, r)
		if err != nil {
			continue
		}
		s.At = time.Since(started).Seconds()
		r.mu.Lock()
		var prev *sample
		if n := len(r.samples); n > 0 {
			prev = &r.samples[n-1]
		}
		r.samples = append(r.samples, s)
		if s.Leader {
			r.ledUntil = s.At
		}
		ledUntil := r.ledUntil
		r.mu.Unlock()
		if prev != nil {
			w.nonLeaderScheduled(r.name, *prev, s, ledUntil)
		}
	}
}

// judgeExits: 7. a replica's end is explained: killed by the soak, or a
// lost lease within a minute of a fault that can cost one; a panic, a
// klog.Fatal, a lost lease with no such fault, or any other exit is a
// violation.
func (cl *cluster) judgeExits(w *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range cl.replicas {
		for _, e := range r.exitsSnapshot() {
			w.event("7-nothing-lost/exit", r.name+"/"+e.Log, true)
			switch {
			case e.Cause == "killed":
			case e.Cause == "lost-lease" && e.LeaseFaultAgo < time.Minute:
			default:
				w.violate("exit/"+r.name+"/"+e.Log, "7-nothing-lost",
					fmt.Sprintf("replica %s exited (%s) at %.0fs, %.0fs after the last lease fault: %s", r.name, e.Cause, e.At.Seconds(), e.LeaseFaultAgo.Seconds(), e.Detail), "log "+e.Log)
			}
		}
	}
}

// logProgress logs what the leader is doing: its queues and its scheduling
// attempts per second by result since its previous sample, so that a missed
// bound shows whether the leader was busy (a backlog) or idle (a stall).
func (cl *cluster) logProgress(logf func(string, ...any)) {
	for _, r := range cl.replicas {
		r.mu.Lock()
		n := len(r.samples)
		var prev, last sample
		if n >= 2 {
			prev, last = r.samples[n-2], r.samples[n-1]
		}
		r.mu.Unlock()
		if n < 2 || !last.Leader || prev.Start != last.Start || last.At <= prev.At {
			continue
		}
		rate := func(result string) float64 {
			return (last.Attempts[result] - prev.Attempts[result]) / (last.At - prev.At)
		}
		logf("leader %s: pending active=%.0f backoff=%.0f unschedulable=%.0f gated=%.0f; attempts/s scheduled=%.1f unschedulable=%.1f error=%.1f",
			r.name, last.Pending["active"], last.Pending["backoff"], last.Pending["unschedulable"], last.Pending["gated"],
			rate("scheduled"), rate("unschedulable"), rate("error"))
	}
}

// leaderOf names the leader's term from its scrape, the replica and the
// process start the scrape came from (a replica that loses its lease
// exits), with the scheduling attempts it has made; "" and -1 for none.
func leaderOf(r *replica, s sample) (string, float64) {
	if r == nil {
		return "", -1
	}
	attempts := 0.0
	for _, n := range s.Attempts {
		attempts += n
	}
	return fmt.Sprintf("%s#%d", r.name, s.Start), attempts
}

// queueOf is the leader's active queue from its scrape, or -1 when no
// leader answered (the watcher keeps what it knew).
func queueOf(r *replica, s sample) float64 {
	if r == nil {
		return -1
	}
	return s.Pending["active"]
}

// leader is the running replica whose scrape says it leads; nil if none.
func (cl *cluster) leader(ctx context.Context) *replica {
	r, _, _ := cl.leaderKnown(ctx)
	return r
}

// leaderKnown is leader, its scrape, and whether every running replica
// answered its scrape: a replica too starved to answer may be the leader, so "no
// leader" is only known when all of them said they do not lead.
func (cl *cluster) leaderKnown(ctx context.Context) (*replica, sample, bool) {
	known := true
	for _, r := range cl.replicas {
		p, _ := r.current()
		r.mu.Lock()
		paused := r.paused
		r.mu.Unlock()
		if p == nil || p.Exited() || paused {
			continue // a paused replica schedules nothing
		}
		s, err := cl.scrapeMetrics(ctx, r)
		if err != nil {
			known = false
			continue
		}
		if s.Leader {
			return r, s, true
		}
	}
	return nil, sample{}, known
}

func (cl *cluster) stop() {
	for _, r := range cl.replicas {
		r.mu.Lock()
		r.stopping = true
		p := r.proc
		r.mu.Unlock()
		if p != nil {
			p.Stop()
		}
	}
	for _, r := range cl.replicas {
		if r.proxy != nil {
			r.proxy.Close()
		}
	}
	if cl.ms != nil {
		cl.ms.Close()
	}
	if cl.kwok != nil {
		cl.kwok.Stop()
	}
	if cl.cm != nil {
		cl.cm.Stop()
	}
}

// copyLogs keeps the processes' logs (the control plane's directory is
// removed when it stops).
func copyLogs(from, to string) {
	_ = os.MkdirAll(to, 0o755)
	matches, _ := filepath.Glob(filepath.Join(from, "*.log"))
	for _, m := range matches {
		if raw, err := os.ReadFile(m); err == nil {
			_ = os.WriteFile(filepath.Join(to, filepath.Base(m)), raw, 0o644)
		}
	}
}
