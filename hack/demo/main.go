// Command demo is `make demo`: it starts etcd and kube-apiserver on loopback
// (envtest, binaries from `make envtest-bin`), runs bin/scheduler as its own
// process against them, creates a small cluster and workloads, waits until
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
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/test/integration/framework"
)

//go:embed scheduler-config.yaml
var schedulerConfig []byte

func main() {
	schedulerBin := flag.String("scheduler", "bin/scheduler", "path of the Berth scheduler binary")
	assets := flag.String("assets", "", "directory holding kube-apiserver and etcd (make envtest-bin)")
	timeout := flag.Duration("timeout", 2*time.Minute, "how long to wait for the workloads to settle")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *schedulerBin, *assets, *timeout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func run(ctx context.Context, schedulerBin, assets string, timeout time.Duration) (err error) {
	if assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", assets)
	}
	step("starting etcd and kube-apiserver on loopback (binaries in %s)", os.Getenv("KUBEBUILDER_ASSETS"))
	env, err := framework.StartEnv()
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane and removing %s", env.Dir)
		if stopErr := env.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	cfgPath := filepath.Join(env.Dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, schedulerConfig, 0o600); err != nil {
		return err
	}
	if cfgPath, err = framework.PrepareConfig(env.Dir, "scheduler-config.yaml", env.Kubeconfig, false, cfgPath); err != nil {
		return err
	}
	logPath := filepath.Join(env.Dir, "scheduler.log")
	sched, err := framework.StartSchedulerProcess(schedulerBin, cfgPath, logPath, "--v=2")
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the scheduler")
		sched.Stop()
	}()
	step("scheduler running (pid %d, log %s)", sched.Pid(), logPath)

	c := env.Client
	step("creating the demo cluster: %d nodes", len(demoNodes))
	for _, n := range demoNodes {
		if _, err := framework.CreateNode(ctx, c, n); err != nil {
			return err
		}
	}
	step("creating %d demo pods and waiting for each to be placed or rejected", len(demoPods))
	for _, p := range demoPods {
		if _, err := framework.CreatePod(ctx, c, p.spec); err != nil {
			return err
		}
	}
	results, err := waitForOutcomes(ctx, c, timeout)
	if err != nil {
		return fmt.Errorf("%w (scheduler log: %s)", err, logPath)
	}
	unexpected := printTable(results)

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

type outcome struct {
	pod     demoPod
	node    string
	message string // FailedScheduling message for a pod left Pending
}

// waitForOutcomes polls until every pod is bound or has a FailedScheduling event.
func waitForOutcomes(ctx context.Context, c kubernetes.Interface, timeout time.Duration) ([]outcome, error) {
	results := make([]outcome, len(demoPods))
	done := make([]bool, len(demoPods))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		all := true
		for i, p := range demoPods {
			if done[i] {
				continue
			}
			pod, err := c.CoreV1().Pods(p.spec.Namespace).Get(ctx, p.spec.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			results[i] = outcome{pod: p, node: pod.Spec.NodeName}
			if pod.Spec.NodeName != "" {
				done[i] = true
				continue
			}
			events, err := framework.EventsFor(ctx, c, p.spec.Namespace, p.spec.Name, "FailedScheduling")()
			if err != nil {
				return false, err
			}
			if len(events) > 0 && p.expectNode == "" {
				results[i].message = latest(events).Message
				done[i] = true
				continue
			}
			all = false
		}
		return all, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return results, fmt.Errorf("pods not settled after %s", timeout)
	}
	return results, err
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
		if node == "" {
			node = "<pending>"
			why = r.pod.why + ": " + r.message
		}
		ok := "yes"
		if r.node != r.pod.expectNode {
			ok = "NO (expected " + orPending(r.pod.expectNode) + ")"
			unexpected++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.pod.scenario, r.pod.spec.Name, r.pod.spec.SchedulerName, node, ok, why)
	}
	_ = w.Flush()
	fmt.Println()
	return unexpected
}

func orPending(s string) string {
	if s == "" {
		return "<pending>"
	}
	return s
}
