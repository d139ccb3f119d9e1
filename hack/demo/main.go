// Command demo is `make demo`: it starts etcd and kube-apiserver on loopback
// (envtest, binaries from `make envtest-bin`), kube-controller-manager's
// ReplicaSet controller, KWOK's simulated kubelets and metrics-server, runs
// bin/scheduler as its own process against them, creates a small cluster and workloads, waits until
// each pod is placed or rejected, and prints what happened and why. It stops
// everything it started and removes its temp dir, also on Ctrl-C.
// DEMO_KEEP=1 keeps the cluster running until Ctrl-C.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

//go:embed scheduler-config.yaml
var schedulerConfig []byte

func main() {
	schedulerBin := flag.String("scheduler", "bin/scheduler", "path of the Berth scheduler binary")
	kubectlBerth := flag.String("kubectl-berth", "bin/kubectl-berth", "path of kubectl's Berth plugin (make build)")
	assets := flag.String("assets", "", "directory holding kube-apiserver, etcd and kube-controller-manager (make envtest-bin)")
	metricsServer := flag.String("metrics-server", "bin/metrics-server", "path of metrics-server (make envtest-bin)")
	kwokBin := flag.String("kwok", "bin/kwok", "path of KWOK (make envtest-bin)")
	kwokCRDs := flag.String("kwok-crds", "bin/crds/kwok", "directory holding KWOK's CRDs (make envtest-bin)")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for the workloads to settle")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, binaries{scheduler: *schedulerBin, kubectlBerth: *kubectlBerth, metricsServer: *metricsServer, kwok: *kwokBin, kwokCRDs: *kwokCRDs}, *assets, *timeout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// started is when the demo started; each step prints the time since.
var started = time.Now()

func step(format string, args ...any) {
	fmt.Printf("==> [%5.1fs] "+format+"\n", append([]any{time.Since(started).Seconds()}, args...)...)
}

// binaries are the programs the demo runs beside the control plane.
type binaries struct {
	scheduler, kubectlBerth, metricsServer, kwok, kwokCRDs string
}

func run(ctx context.Context, bins binaries, assets string, timeout time.Duration) (err error) {
	if assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", assets)
	}
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	step("starting etcd and kube-apiserver on loopback (binaries in %s)", os.Getenv("KUBEBUILDER_ASSETS"))
	env, err := sandbox.StartControlPlane()
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane and removing %s", env.Dir)
		if stopErr := env.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	// metrics-server registered first (it starts once KWOK's nodes are
	// Ready); KWOK serves the nodes' kubelet endpoints on 127.0.0.1, where
	// it scrapes them.
	metrics, err := prepareMetrics(ctx, env, bins.metricsServer)
	if err != nil {
		return err
	}
	defer func() {
		step("stopping metrics-server")
		metrics.Close()
	}()

	// The real ReplicaSet controller and KWOK's kubelets for the
	// AdmissionFeedback and metrics scenarios (internal/sandbox, as the
	// suites run them).
	step("starting kube-controller-manager (ServiceAccount and ReplicaSet controllers) and KWOK (simulated kubelets)")
	cm, kwok, err := sandbox.StartRefusalSubstrate(ctx, env, assets, bins.kwok, bins.kwokCRDs, "127.0.0.1")
	if err != nil {
		return err
	}
	defer func() {
		step("stopping KWOK and kube-controller-manager")
		kwok.Stop()
		cm.Stop()
	}()
	// metrics-server now: it reports a node from its second scrape, 10s
	// after it starts; the other scenarios run meanwhile.
	if metrics != nil {
		if err := startMetrics(ctx, metrics, kwok); err != nil {
			return err
		}
	}

	cfgPath := filepath.Join(env.Dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, schedulerConfig, 0o600); err != nil {
		return err
	}
	if cfgPath, err = sandbox.PrepareConfig(env.Dir, "scheduler-config.yaml", env.Kubeconfig, false, cfgPath); err != nil {
		return err
	}
	logPath := filepath.Join(env.Dir, "scheduler.log")
	sched, err := sandbox.StartSchedulerProcess(bins.scheduler, cfgPath, logPath, "--v=2")
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the scheduler")
		sched.Stop()
	}()
	step("scheduler running (pid %d, log %s)", sched.Pid(), logPath)
	// The log goes with the temp dir: on failure, show its end first, and
	// with DEMO_KEEP=1 keep the sandbox up to look into.
	defer func() {
		if err == nil || ctx.Err() != nil { // succeeded, or interrupted
			return
		}
		printTail(logPath, 40)
		if os.Getenv("DEMO_KEEP") == "1" {
			step("DEMO_KEEP=1: the demo failed (%v); the cluster keeps running until Ctrl-C", err)
			fmt.Printf("    kubeconfig: %s\n    scheduler log: %s\n", env.Kubeconfig, logPath)
			<-ctx.Done()
		}
	}()

	c := env.Client
	step("creating the demo cluster: %d nodes, namespaces team-a and team-b with ElasticQuotas", len(demoNodes))
	for _, n := range demoNodes {
		if _, err := sandbox.CreateNode(ctx, c, n); err != nil {
			return err
		}
	}
	if err := createQuotas(ctx, env); err != nil {
		return err
	}
	if err := createClaim(ctx, c); err != nil {
		return err
	}
	step("playing the volume provisioner for claim %s, and another scheduler that binds %s meanwhile", cbClaim, cbIntruder)
	provisioned := make(chan error, 1)
	go func() { provisioned <- provision(ctx, c) }()
	step("playing the kubelet: pods being deleted (preemption victims) are removed at once")
	go sandbox.PlayKubelet(ctx, c)

	if err := createPodGroup(ctx, env.Config); err != nil {
		return err
	}
	// Pods of one phase are queued in the order they are created only once
	// the scheduler watches: created before its informers' first list, they
	// reach its queue at once, in no promised order (and a scenario like
	// LoadAware's depends on which of two pods goes first).
	step("waiting for the scheduler to schedule: a probe pod, bound and deleted")
	if err := waitForScheduler(ctx, c); err != nil {
		return err
	}

	var results []outcome
	for phase := 0; phase <= lastPhase(); phase++ {
		if action := phaseActions[phase]; action != nil {
			if err := action(ctx, c); err != nil {
				return err
			}
		}
		var created int
		for _, p := range demoPods {
			if p.phase == phase && !p.external {
				if _, err := sandbox.CreatePod(ctx, c, p.spec); err != nil {
					return err
				}
				created++
			}
		}
		step("phase %d: created %d demo pods; waiting for each to be placed, rejected or preempted", phase, created)
		if results, err = waitForOutcomes(ctx, c, phase, timeout); err != nil {
			return err
		}
		for _, r := range results {
			if r.pod.pendingUntil > phase {
				step("phase %d: %s pending as expected: %s", phase, r.pod.spec.Name, r.message)
			}
		}
	}
	if err := <-provisioned; err != nil {
		return fmt.Errorf("provisioning %s: %w", cbClaim, err)
	}
	afResults, err := runAdmissionFeedback(ctx, c, kwok, timeout)
	if err != nil {
		return err
	}
	unexpected := printTable(append(results, afResults...))
	for _, pod := range []string{"batch-job", "cruncher"} {
		step("kubectl berth explain %s", pod)
		out, err := exec.CommandContext(ctx, bins.kubectlBerth, "explain", pod, "-n", ns, "--kubeconfig", env.Kubeconfig).CombinedOutput()
		fmt.Println(string(out))
		if err != nil {
			return fmt.Errorf("kubectl berth explain %s: %w", pod, err)
		}
	}

	if err := runWhatIf(ctx, bins.kubectlBerth, env.Kubeconfig, env.Dir); err != nil {
		return err
	}

	if os.Getenv("DEMO_KEEP") == "1" {
		step("DEMO_KEEP=1: the cluster keeps running until Ctrl-C")
		fmt.Printf("    kubeconfig: %s\n    scheduler log: %s\n", env.Kubeconfig, logPath)
		<-ctx.Done()
	}
	if unexpected > 0 {
		return fmt.Errorf("%d pod(s) did not end where the scenario expects", unexpected)
	}
	return nil
}

// explainedEvent is Explain's event: its summary of a placement fills the
// WHY column of the pods that ask.
const explainedEvent = "Explained"

type outcome struct {
	pod       demoPod
	node      string
	preempted bool
	message   string // FailedScheduling message for a pod left Pending
}

func lastPhase() int {
	last := 0
	for _, p := range demoPods {
		last = max(last, p.phase, p.pendingUntil)
	}
	for phase := range phaseActions {
		last = max(last, phase)
	}
	return last
}

// waitForOutcomes polls until every pod of the phases up to phase has
// settled: bound, or Pending with a FailedScheduling event, or — for a pod
// expected to be preempted once the last phase runs — deleted.
func waitForOutcomes(ctx context.Context, c kubernetes.Interface, phase int, timeout time.Duration) ([]outcome, error) {
	var pods []demoPod
	for _, p := range demoPods {
		if p.phase <= phase {
			pods = append(pods, p)
		}
	}
	final := phase == lastPhase()
	results := make([]outcome, len(pods))
	done := make([]bool, len(pods))
	// why a pod is not settled yet, as of its last successful read (a Get
	// that fails at the deadline does not erase it)
	why := make([]string, len(pods))
	for i := range why {
		why[i] = "not read yet"
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		all := true
		for i, p := range pods {
			if done[i] {
				continue
			}
			results[i] = outcome{pod: p}
			pod, err := c.CoreV1().Pods(p.spec.Namespace).Get(ctx, p.spec.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && p.external:
				all = false // not created yet
				why[i] = "not created yet"
				continue
			case apierrors.IsNotFound(err):
				results[i].preempted = true
				done[i] = true
				continue
			case err != nil:
				return false, err
			}
			results[i].node = pod.Spec.NodeName
			if p.pendingUntil > phase {
				if pod.Spec.NodeName != "" {
					return false, fmt.Errorf("%s was bound to %s in phase %d; the scenario expects it Pending until phase %d", p.spec.Name, pod.Spec.NodeName, phase, p.pendingUntil)
				}
				msg, ok, err := latestEvent(ctx, c, p, "FailedScheduling")
				if err != nil {
					return false, err
				}
				if !ok {
					all = false
					why[i] = "pending, no FailedScheduling event yet"
					continue
				}
				results[i].message = msg
				done[i] = true
				continue
			}
			if pod.Spec.NodeName != "" && p.showEvent != "" {
				msg, ok, err := latestEvent(ctx, c, p, p.showEvent)
				if err != nil {
					return false, err
				}
				// A pod explained while pending, then placed: wait for the
				// explanation of its placement.
				if !ok || (p.showEvent == explainedEvent && !strings.HasPrefix(msg, "placed on "+pod.Spec.NodeName)) {
					all = false
					why[i] = fmt.Sprintf("bound to %s, latest %s event %q", pod.Spec.NodeName, p.showEvent, msg)
					continue
				}
				results[i].message = msg
			}
			if pod.Spec.NodeName != "" {
				done[i] = !final || !p.expectPreempted
				all = all && done[i]
				why[i] = "bound to " + pod.Spec.NodeName + ", expected to be preempted"
				continue
			}
			msg, ok, err := latestEvent(ctx, c, p, "FailedScheduling")
			if err != nil {
				return false, err
			}
			if ok && p.expectNode == "" && !p.expectPreempted {
				results[i].message = msg
				done[i] = true
				continue
			}
			all = false
			why[i] = "pending"
		}
		return all, nil
	})
	// At the deadline the client's rate limiter may fail a Get first (it
	// would exceed the deadline): either way the pods did not settle.
	if errors.Is(err, context.DeadlineExceeded) || (err != nil && time.Since(start) >= timeout-time.Second) {
		var unsettled []string
		for i, p := range pods {
			if !done[i] {
				unsettled = append(unsettled, fmt.Sprintf("%s/%s (%s)", p.spec.Namespace, p.spec.Name, why[i]))
			}
		}
		return results, fmt.Errorf("pods not settled after %s: %s", timeout, strings.Join(unsettled, ", "))
	}
	return results, err
}

// createQuotas creates the ElasticQuota scenario's namespaces, quotas and
// priority classes.
func createQuotas(ctx context.Context, env *sandbox.ControlPlane) error {
	for name, value := range demoPriorityClasses {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := env.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	eqClient, err := versioned.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, q := range demoQuotas {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: q.namespace}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		eq := &schedv1alpha1.ElasticQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: q.namespace, Name: "quota"},
			Spec: schedv1alpha1.ElasticQuotaSpec{
				Min: v1.ResourceList{v1.ResourceCPU: resource.MustParse(q.min)},
				Max: v1.ResourceList{v1.ResourceCPU: resource.MustParse(q.max)},
			},
		}
		if _, err := eqClient.SchedulingV1alpha1().ElasticQuotas(q.namespace).Create(ctx, eq, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// latestEvent returns the message of the pod's latest event with reason,
// and whether there is one.
func latestEvent(ctx context.Context, c kubernetes.Interface, p demoPod, reason string) (string, bool, error) {
	events, err := sandbox.EventsFor(ctx, c, p.spec.Namespace, p.spec.Name, reason)()
	if err != nil || len(events) == 0 {
		return "", false, err
	}
	return latest(events).Message, true, nil
}

func latest(events []v1.Event) v1.Event {
	l := events[0]
	for _, e := range events[1:] {
		if e.LastTimestamp.After(l.LastTimestamp.Time) || e.EventTime.After(l.EventTime.Time) {
			l = e
		}
	}
	return l
}

// printTable prints one row per pod and returns how many did not end as the
// scenario expects.
func printTable(results []outcome) int {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIO\tPOD\tPROFILE\tNODE\tOK\tWHY")
	unexpected := 0
	for _, r := range results {
		node, why := r.node, r.pod.why
		switch {
		case r.preempted:
			node = "<preempted>"
		case node == "":
			node = "<pending>"
			why = r.pod.why + ": " + r.message
		case r.message != "":
			why = r.pod.why + ": " + r.pod.showEvent + ": " + r.message
		}
		ok := "yes"
		switch {
		case r.pod.expectPreempted && !r.preempted:
			ok = "NO (expected <preempted>)"
			unexpected++
		case !r.pod.expectPreempted && !nodeMatches(r.pod.expectNode, r.node):
			ok = "NO (expected " + orPending(r.pod.expectNode) + ")"
			unexpected++
		}
		fmt.Fprintf(w, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", r.pod.scenario, r.pod.spec.Namespace, r.pod.spec.Name, r.pod.spec.SchedulerName, node, ok, why)
	}
	_ = w.Flush()
	fmt.Println()
	return unexpected
}

// nodeMatches: want is a node name, "" for none, or "prefix-*".
func nodeMatches(want, got string) bool {
	if prefix, ok := strings.CutSuffix(want, "*"); ok {
		return got != "" && strings.HasPrefix(got, prefix)
	}
	return got == want
}

func orPending(s string) string {
	if s == "" {
		return "<pending>"
	}
	return s
}

// printTail prints the last n lines of the file at path to stderr.
func printTail(path string, n int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading %s: %v\n", path, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	fmt.Fprintf(os.Stderr, "--- the last %d lines of the scheduler's log (%s, removed with the sandbox) ---\n", min(n, len(lines)), path)
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Fprintln(os.Stderr, l)
	}
	fmt.Fprintln(os.Stderr, "--- end of the scheduler's log (DEMO_KEEP=1 keeps the sandbox) ---")
}

// waitForScheduler returns once the scheduler binds a probe pod (its caches
// synced and its queue fed by watches), and the probe is deleted again.
func waitForScheduler(ctx context.Context, c kubernetes.Interface) error {
	probe := sandbox.PodSpec{Namespace: ns, Name: "scheduler-probe", SchedulerName: "default-scheduler", CPU: "1m"}
	if _, err := sandbox.CreatePod(ctx, c, probe); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := sandbox.NodeNameOf(ctx, c, ns, probe.Name)()
		return node != "", err
	})
	if err != nil {
		return fmt.Errorf("the scheduler did not bind %s within a minute: %w", probe.Name, err)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, probe.Name, *metav1.NewDeleteOptions(0)); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, probe.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
