// Command abba checks the README's promise that a profile with no Berth
// plugin behaves like kube-scheduler, for cost: Berth's binary and upstream's
// kube-scheduler (built from the same Kubernetes release with the same
// flags) run the default profile as separate processes against one API
// server, one after the other in ABBA order (runs get faster as the API
// server warms up; ABAB would charge that trend to the first binary), each
// scheduling the same number of pods created before it starts. Per run it
// measures the time from the process' start to the first binding (start-up:
// informers, caches), from the first binding to the last (scheduling), and
// the process' CPU seconds; it writes a markdown section with the runs and
// each pair's ratio.
//
//	make bench-abba
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *berth, *upstream, *assets, *out, *command, *pairs, *nodes, *pods)
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

func run(ctx context.Context, berth, upstream, assets, out, command string, pairs, nodes, pods int) error {
	if assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", assets)
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
			r, err := runOnce(ctx, env, bins[name], cfg, fmt.Sprintf("run-%d-%s", len(results)+1, name), pods)
			if err != nil {
				return fmt.Errorf("run %d (%s): %w", len(results)+1, name, err)
			}
			r.binary = name
			fmt.Fprintf(os.Stderr, "abba: run %d %s: start-up %s, scheduling %s, CPU %.2fs\n", len(results)+1, name, r.startup.Round(time.Millisecond), r.schedule.Round(time.Millisecond), r.cpu)
			results = append(results, r)
		}
	}
	doc := report(results, command, nodes, pods)
	if out == "" {
		fmt.Print(doc)
		return nil
	}
	return os.WriteFile(out, []byte(doc), 0o644)
}

// runOnce creates the pods, starts the binary, waits until every pod is
// bound, stops it and deletes the pods.
func runOnce(ctx context.Context, env *sandbox.ControlPlane, bin, cfg, ns string, pods int) (result, error) {
	c := env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	if err := parallel(pods, func(i int) error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("pod-%05d", i), CPU: "100m", Memory: "500Mi"}), metav1.CreateOptions{})
		return err
	}); err != nil {
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
	t0 := time.Now()
	proc, err := sandbox.StartSchedulerProcess(bin, cfg, filepath.Join(env.Dir, ns+".log"))
	if err != nil {
		return result{}, err
	}
	first, last, err := waitBound(ctx, w, pods, proc)
	cpu := cpuSeconds(proc.Pid())
	proc.Stop()
	if err != nil {
		return result{}, fmt.Errorf("%w (log: %s)", err, filepath.Join(env.Dir, ns+".log"))
	}
	if err := cleanUp(ctx, c, ns); err != nil {
		return result{}, err
	}
	return result{startup: first.Sub(t0), schedule: last.Sub(first), cpu: cpu}, nil
}

// waitBound follows the watch until n pods have a node: the times of the
// first and the last binding.
func waitBound(ctx context.Context, w watch.Interface, n int, proc *sandbox.Process) (first, last time.Time, err error) {
	bound := map[string]bool{}
	timeout := time.After(10 * time.Minute)
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
			}
			bound[p.Name] = true
			last = now
		case <-timeout:
			return first, last, fmt.Errorf("%d of %d pods bound after 10 minutes", len(bound), n)
		case <-ctx.Done():
			return first, last, ctx.Err()
		}
		if proc.Exited() {
			return first, last, errors.New("the scheduler exited")
		}
	}
	return first, last, nil
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
func report(results []result, command string, nodes, pods int) string {
	var b strings.Builder
	fmt.Fprintln(&b, "## Berth's binary vs upstream's kube-scheduler, default profile")
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Generated by `hack/abba` (`%s`). Berth's `bin/scheduler` and upstream's `kube-scheduler` (`go build k8s.io/kubernetes/cmd/kube-scheduler` from the same release, `CGO_ENABLED=0 -trimpath`, the same version ldflags) run the same configuration file — the default profile, client QPS 5,000, no leader election — as separate processes against one kube-apiserver, one at a time in ABBA order, %d nodes; before each run %d pods are created, then the binary is started. Start-up is from the process' start to the first binding (informers and caches), scheduling from the first binding to the last; CPU is the process' user and system time.\n\n", command, nodes, pods)
	fmt.Fprintln(&b, "| Run | Binary | Start-up, s | Scheduling, s | Pods/s | CPU, s |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- |")
	for i, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %.2f | %.2f | %.0f | %.2f |\n", i+1, r.binary, r.startup.Seconds(), r.schedule.Seconds(), float64(pods-1)/r.schedule.Seconds(), r.cpu)
	}
	fmt.Fprintln(&b)
	var sched, startup, cpu []float64
	for i := 0; i+1 < len(results); i += 2 {
		a, z := results[i], results[i+1]
		if a.binary != "berth" {
			a, z = z, a
		}
		sched = append(sched, a.schedule.Seconds()/z.schedule.Seconds())
		startup = append(startup, a.startup.Seconds()/z.startup.Seconds())
		cpu = append(cpu, a.cpu/z.cpu)
	}
	fmt.Fprintf(&b, "Berth over upstream, per pair (%d pairs), median (interquartile range; lower is faster): scheduling time **%s**, start-up %s, CPU %s.\n\n", len(sched), cell(sched), cell(startup), cell(cpu))
	return b.String()
}

func cell(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 {
		pos := p * float64(len(s)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(s)-1)
		return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
	}
	if len(s) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", at(0.5), at(0.25), at(0.75))
}
