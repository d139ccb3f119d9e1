// Command abba checks the README's promise that a profile with no Berth
// plugin behaves like kube-scheduler, for cost: Berth's binary and upstream's
// kube-scheduler (built from the same Kubernetes release with the same
// flags) run the default profile as separate processes against one API
// server, one after the other in ABBA order (runs get faster as the API
// server warms up; ABAB would charge that trend to the first binary), each
// scheduling the same number of pods: created before it starts, or with
// --rate one before it starts and the rest at a fixed pace after its first
// binding (each pod then meets an idle scheduler, and a run's work no
// longer follows how fast the API server answers its bindings). Per run it
// measures the time from the process' start to the first binding (start-up:
// informers, caches), from the first binding to the last (scheduling), and
// the process' CPU seconds; it writes a markdown section with the runs and
// each pair's ratio.
//
//	make bench-abba
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

func main() {
	berth := flag.String("berth", "bin/scheduler", "Berth's scheduler binary")
	upstream := flag.String("upstream", "bin/kube-scheduler", "upstream's kube-scheduler binary, built with the same flags")
	assets := flag.String("assets", "", "directory with kube-apiserver and etcd")
	pairs := flag.Int("pairs", 4, "ABBA pairs (each pair is one run of each binary)")
	nodes := flag.Int("nodes", 500, "nodes")
	pods := flag.Int("pods", 2000, "pods each run schedules")
	out := flag.String("out", "", "write the markdown section here (default: stdout)")
	command := flag.String("command", "make bench-abba", "the command quoted in the section")
	cpuprofile := flag.String("cpuprofile", "", "write each run's CPU profile (profileSeconds from when the binary's /healthz first answers, over its /debug/pprof) to this directory")
	rate := flag.Float64("rate", 0, "pods per second created after a run's first binding (0: every pod created before the binary starts)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, options{berth: *berth, upstream: *upstream, assets: *assets, out: *out, command: *command, profiles: *cpuprofile, pairs: *pairs, nodes: *nodes, pods: *pods, rate: *rate})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "abba:", err)
		os.Exit(1)
	}
}

type result struct {
	binary            string
	startup, schedule time.Duration
	cpu               float64 // seconds
}

type options struct {
	berth, upstream, assets, out, command string
	// profiles: the directory of the runs' CPU profiles, "" for none.
	profiles           string
	pairs, nodes, pods int
	// rate: pods per second after a run's first binding; 0: all before
	// the binary starts.
	rate float64
}

func run(ctx context.Context, o options) error {
	berth, upstream, out, command, pairs, nodes, pods := o.berth, o.upstream, o.out, o.command, o.pairs, o.nodes, o.pods
	if o.assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", o.assets)
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return err
		}
	}
	env, err := sandbox.StartControlPlane()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	start := time.Now()
	if err := parallel(nodes, func(i int) error {
		_, err := sandbox.CreateNode(ctx, c, sandbox.NodeSpec{Name: fmt.Sprintf("node-%04d", i), CPU: "4", Memory: "32Gi"})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "abba: %d nodes in %s\n", nodes, time.Since(start).Round(time.Millisecond))
	// Both binaries read the same file: the default profile, a client fast
	// enough not to be the limit (as scheduler_perf's), no leader election.
	cfg := filepath.Join(env.Dir, "default.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
`, env.Kubeconfig)), 0o600); err != nil {
		return err
	}
	bins := map[string]string{"berth": berth, "upstream": upstream}
	var results []result
	for i := range pairs {
		order := []string{"berth", "upstream"}
		if i%2 == 1 {
			order = []string{"upstream", "berth"}
		}
		for _, name := range order {
			r, err := runOnce(ctx, env, bins[name], cfg, fmt.Sprintf("run-%d-%s", len(results)+1, name), pods, o.rate, o.profiles)
			if err != nil {
				return fmt.Errorf("run %d (%s): %w", len(results)+1, name, err)
			}
			r.binary = name
			fmt.Fprintf(os.Stderr, "abba: run %d %s: start-up %s, scheduling %s, CPU %.2fs\n", len(results)+1, name, r.startup.Round(time.Millisecond), r.schedule.Round(time.Millisecond), r.cpu)
			results = append(results, r)
		}
	}
	doc := report(results, command, nodes, pods, o.rate, o.profiles != "")
	if out == "" {
		fmt.Print(doc)
		return nil
	}
	return os.WriteFile(out, []byte(doc), 0o644)
}

// profileSeconds: how long a run's CPU profile lasts, from when the
// binary's port answers (longer than a batch run's start-up and scheduling,
// shorter than a paced run; the run waits for the profile before it stops
// the binary).
const profileSeconds = 8

// runOnce creates the pods (with rate > 0 only the first), starts the
// binary, waits until every pod is bound (with rate > 0 creating the others
// at rate pods a second from the first binding on), stops it and deletes the
// pods. profiles: write the run's CPU profile to profiles/<ns>.pprof ("" for
// none).
func runOnce(ctx context.Context, env *sandbox.ControlPlane, bin, cfg, ns string, pods int, rate float64, profiles string) (result, error) {
	c := env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	createPod := func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("pod-%05d", i), CPU: "100m", Memory: "500Mi"}), metav1.CreateOptions{})
		return err
	}
	before := pods
	if rate > 0 {
		before = 1
	}
	if err := parallel(before, func(i int) error { return createPod(ctx, i) }); err != nil {
		return result{}, err
	}
	// Watch from the list's resourceVersion (the pods all unbound) with a
	// watcher that resumes when the server closes the watch: a plain watch
	// first replays every pod, and the server may close a watch whose
	// client falls behind.
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return result{}, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return result{}, err
	}
	defer w.Stop()
	var args []string
	port := 0
	if profiles != "" {
		// The binary serves /debug/pprof (enableProfiling is on by
		// default) to anonymous requests on a path always allowed.
		if port, err = sandbox.FreePort("127.0.0.1"); err != nil {
			return result{}, err
		}
		args = []string{fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--authorization-always-allow-paths=/healthz,/debug/pprof/*"}
	}
	t0 := time.Now()
	proc, err := sandbox.StartSchedulerProcess(bin, cfg, filepath.Join(env.Dir, ns+".log"), args...)
	if err != nil {
		return result{}, err
	}
	var profiled chan error
	if profiles != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- fetchProfile(ctx, port, filepath.Join(profiles, ns+".pprof")) }()
	}
	// The paced pods: created in order, the i-th due i/rate seconds after
	// the first binding (a create that returns late does not shift the
	// ones after it). A create that fails ends the wait at once, with its
	// error.
	firstBound := make(chan time.Time, 1)
	created := make(chan error, 1)
	waitCtx, endWait := context.WithCancelCause(ctx)
	defer endWait(nil)
	paceCtx, stopPace := context.WithCancel(ctx)
	defer stopPace()
	pacing := time.Duration(0)
	if rate > 0 {
		pacing = time.Duration(float64(pods-1) / rate * float64(time.Second))
	}
	pace := func() {
		var t0 time.Time
		select {
		case t0 = <-firstBound:
		case <-paceCtx.Done():
			created <- paceCtx.Err()
			return
		}
		for i := 1; i < pods; i++ {
			due := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-paceCtx.Done():
				created <- paceCtx.Err()
				return
			}
			if err := createPod(paceCtx, i); err != nil {
				err = fmt.Errorf("creating the paced pods: %w", err)
				endWait(err)
				created <- err
				return
			}
		}
		created <- nil
	}
	if rate > 0 {
		go pace()
	} else {
		created <- nil
	}
	first, last, err := waitBound(waitCtx, w, pods, proc, firstBound, 10*time.Minute+pacing)
	if err != nil {
		// The pacer stops too; every pod bound means every pod created,
		// and its last create returns on its own.
		stopPace()
	}
	if cerr := <-created; err == nil && cerr != nil {
		err = cerr
	}
	// Read before the profile ends: the wait for it, and pprof's encoding
	// of it, are not the run's work.
	cpu := cpuSeconds(proc.Pid())
	if profiled != nil {
		if perr := <-profiled; err == nil && perr != nil {
			err = fmt.Errorf("CPU profile: %w", perr)
		}
	}
	proc.Stop()
	if err != nil {
		return result{}, fmt.Errorf("%w (log: %s)", err, filepath.Join(env.Dir, ns+".log"))
	}
	if err := cleanUp(ctx, c, ns); err != nil {
		return result{}, err
	}
	return result{startup: first.Sub(t0), schedule: last.Sub(first), cpu: cpu}, nil
}

// waitBound follows the watch until n pods have a node, for at most
// timeout: the times of the first and the last binding. The first is also
// sent on firstBound. A ctx cancelled with a cause returns the cause.
func waitBound(ctx context.Context, w watch.Interface, n int, proc *sandbox.Process, firstBound chan<- time.Time, timeout time.Duration) (first, last time.Time, err error) {
	bound := map[string]bool{}
	expired := time.After(timeout)
	for len(bound) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return first, last, errors.New("pod watch closed")
			}
			p, isPod := ev.Object.(*v1.Pod)
			if !isPod || p.Spec.NodeName == "" || bound[p.Name] {
				continue
			}
			now := time.Now()
			if len(bound) == 0 {
				first = now
				firstBound <- now
			}
			bound[p.Name] = true
			last = now
		case <-expired:
			return first, last, fmt.Errorf("%d of %d pods bound after %s", len(bound), n, timeout)
		case <-ctx.Done():
			return first, last, context.Cause(ctx)
		}
		if proc.Exited() {
			return first, last, errors.New("the scheduler exited")
		}
	}
	return first, last, nil
}

// fetchProfile waits until the binary's port answers, then takes a CPU
// profile of profileSeconds into path.
func fetchProfile(ctx context.Context, port int, path string) error {
	// The binary's serving certificate is self-signed: a local measurement
	// of a process the harness started.
	c := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above; no proxy for loopback
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return fmt.Errorf("the binary's /healthz: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, profileSeconds), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", req.URL.Path, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// cpuSeconds is the process' user and system time so far (/proc/<pid>/stat).
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN()
	}
	// The command name may hold spaces: fields are counted after its ")".
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return math.NaN()
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// cleanUp deletes the run's pods at once (no kubelet would finish a graceful
// deletion) and waits until they are gone.
func cleanUp(ctx context.Context, c kubernetes.Interface, ns string) error {
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Everything().String(), Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("pods of %s not deleted after 2 minutes", ns)
}

// parallel runs f(0..n-1) on 16 goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// report is the markdown section: every run, then per pair Berth over upstream.
func report(results []result, command string, nodes, pods int, rate float64, profiled bool) string {
	var b strings.Builder
	fmt.Fprintln(&b, "## Berth's binary vs upstream's kube-scheduler, default profile")
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Generated by `hack/abba` (`%s`). Berth's `bin/scheduler` and upstream's `kube-scheduler` (`go build k8s.io/kubernetes/cmd/kube-scheduler` from the same release, `CGO_ENABLED=0 -trimpath`, the same version ldflags) run the same configuration file — the default profile, client QPS 5,000, no leader election — as separate processes against one kube-apiserver, one at a time in ABBA order, %d nodes; %s Start-up is from the process' start to the first binding (informers and caches), scheduling from the first binding to the last; CPU is the process' user and system time.", command, nodes, workload(pods, rate))
	if profiled {
		fmt.Fprintf(&b, " Each run also served a CPU profile of %d s from when its port first answered, over /debug/pprof (both binaries alike; the run's CPU is read when its last pod is bound, then it waits for the profile before it stops the binary).", profileSeconds)
	}
	fmt.Fprint(&b, "\n\n")
	fmt.Fprintln(&b, "| Run | Binary | Start-up, s | Scheduling, s | Pods/s | CPU, s |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- |")
	for i, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %.2f | %.2f | %.0f | %.2f |\n", i+1, r.binary, r.startup.Seconds(), r.schedule.Seconds(), float64(pods-1)/r.schedule.Seconds(), r.cpu)
	}
	fmt.Fprintln(&b)
	var sched, startup, cpu, cpuDiff, startupDiff, upCPU, upStartup []float64
	for i := 0; i+1 < len(results); i += 2 {
		a, z := results[i], results[i+1]
		if a.binary != "berth" {
			a, z = z, a
		}
		sched = append(sched, a.schedule.Seconds()/z.schedule.Seconds())
		startup = append(startup, a.startup.Seconds()/z.startup.Seconds())
		cpu = append(cpu, a.cpu/z.cpu)
		cpuDiff = append(cpuDiff, a.cpu-z.cpu)
		startupDiff = append(startupDiff, a.startup.Seconds()-z.startup.Seconds())
		upCPU = append(upCPU, z.cpu)
		upStartup = append(upStartup, z.startup.Seconds())
	}
	fmt.Fprintf(&b, "Berth over upstream, per pair (%d pairs), median (interquartile range; lower is faster): scheduling time **%s**, start-up %s, CPU %s.\n\n", len(sched), cell(sched), cell(startup), cell(cpu))
	if len(cpuDiff) >= 2 {
		fmt.Fprintf(&b, "Paired differences, Berth minus upstream, mean ± standard error: CPU %s, start-up %s. %s\n\n",
			difference(cpuDiff, upCPU, "s"), difference(startupDiff, upStartup, "s"), pairsNeeded(cpuDiff, upCPU))
	}
	return b.String()
}

// workload says how a run's pods are created.
func workload(pods int, rate float64) string {
	if rate <= 0 {
		return fmt.Sprintf("before each run %d pods are created, then the binary is started.", pods)
	}
	return fmt.Sprintf("each run schedules %d pods: one created before the binary starts, the other %d at %g a second from its first binding on (at a pace both binaries keep up with, which the scheduling time shows, each pod meets an idle scheduler: a run's work does not follow how fast the API server answers its bindings).", pods, pods-1, rate)
}

// cell is the median and the quartiles (go-moremath's estimator, as
// benchreport's).
func cell(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	s := stats.Sample{Xs: xs}.Copy().Sort()
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Quantile(0.5), s.Quantile(0.25), s.Quantile(0.75))
}

// difference is the mean of the paired differences ± its standard error, in
// unit and as a share of upstream's mean.
func difference(diffs, upstream []float64, unit string) string {
	d := stats.Sample{Xs: diffs}
	se := d.StdDev() / math.Sqrt(float64(len(diffs)))
	base := stats.Mean(upstream)
	return fmt.Sprintf("%+.3f %s ± %.3f %s (%+.1f %% ± %.1f %% of upstream's mean %.2f %s)", d.Mean(), unit, se, unit, 100*d.Mean()/base, 100*se/base, base, unit)
}

// pairsNeeded: how many pairs bring the CPU difference's standard error to
// 1 % of upstream's mean (a 2 % difference at two standard errors), at this
// run's spread.
func pairsNeeded(diffs, upstream []float64) string {
	sd, base := stats.StdDev(diffs), stats.Mean(upstream)
	// The standard error sd/√n is 1 % of base when n = (sd / 1 % of base)².
	k := sd / (0.01 * base)
	return fmt.Sprintf("At this spread (standard deviation of the CPU differences %.3f s), a standard error of 1 %% of upstream's CPU (a 2 %% difference at two standard errors) needs %.0f pairs.", sd, math.Ceil(k*k))
}
