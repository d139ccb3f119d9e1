// Command race measures what ConfirmBinder is for: two scheduler instances
// with separate caches and different scheduler names share N nodes with room
// for M pods in total; 2×M pods are created at once, half for each; the
// rounds count the nodes left overcommitted (requests of bound pods over
// allocatable). It runs once with DefaultBinder and once with ConfirmBinder
// (Always) in both instances, on the same control plane, and prints a table.
//
//	make race-report ROUNDS=5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

type mode struct {
	name    string
	plugins string // the profile's plugins section
}

var modes = []mode{
	{name: "DefaultBinder", plugins: ""},
	{name: "ConfirmBinder", plugins: `
  plugins:
    reserve:
      enabled:
      - name: ConfirmBinder
    bind:
      disabled:
      - name: DefaultBinder
      enabled:
      - name: ConfirmBinder
      - name: DefaultBinder
  pluginConfig:
  - name: ConfirmBinder
    args:
      confirm: Always`},
}

func main() {
	bin := flag.String("scheduler", "bin/scheduler", "Berth scheduler binary")
	assets := flag.String("assets", "", "directory with kube-apiserver and etcd")
	rounds := flag.Int("rounds", 5, "rounds per binder")
	nodes := flag.Int("nodes", 3, "nodes per round")
	perNode := flag.Int("pods-per-node", 4, "1-CPU pods each node has room for")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *bin, *assets, *rounds, *nodes, *perNode)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "race report failed:", err)
		os.Exit(1)
	}
}

type result struct {
	mode                                      string
	rounds, overRounds, overcommitted, excess int
	bound, capacity, caught                   int
}

func run(ctx context.Context, bin, assets string, rounds, nodes, perNode int) error {
	if assets != "" {
		os.Setenv("KUBEBUILDER_ASSETS", assets)
	}
	env, err := sandbox.StartControlPlane()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	var results []result
	for _, m := range modes {
		r, err := runMode(ctx, env, bin, m, rounds, nodes, perNode)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n%d rounds per binder; each round: %d nodes with room for %d one-CPU pods each (M=%d), %d pods created at once, half for each of two scheduler instances.\n\n",
		rounds, nodes, perNode, nodes*perNode, 2*nodes*perNode)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "BINDER\tROUNDS\tROUNDS WITH AN OVERCOMMITTED NODE\tOVERCOMMITTED NODES\tPODS BOUND / CAPACITY\tPODS BEYOND CAPACITY\tCONFLICTS CAUGHT (BindConflict events)")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d / %d\t%d\t%d\n", r.mode, r.rounds, r.overRounds, r.overcommitted, r.bound, r.capacity, r.excess, r.caught)
	}
	return w.Flush()
}

func runMode(ctx context.Context, env *sandbox.ControlPlane, bin string, m mode, rounds, nodes, perNode int) (result, error) {
	res := result{mode: m.name, rounds: rounds}
	var procs []*sandbox.Process
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	names := []string{"race-a", "race-b"}
	for _, n := range names {
		cfg := filepath.Join(env.Dir, fmt.Sprintf("%s-%s.yaml", n, m.name))
		text := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: %s\nleaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: %s\n%s\n", env.Kubeconfig, n, m.plugins)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			return res, err
		}
		p, err := sandbox.StartSchedulerProcess(bin, cfg, filepath.Join(env.Dir, fmt.Sprintf("%s-%s.log", n, m.name)))
		if err != nil {
			return res, err
		}
		procs = append(procs, p)
	}
	c := env.Client
	for round := range rounds {
		ns, err := c.CoreV1().Namespaces().Create(ctx, sandbox.Namespace(fmt.Sprintf("race-%s-%d", lower(m.name), round)), metav1.CreateOptions{})
		if err != nil {
			return res, err
		}
		var nodeNames []string
		for i := range nodes {
			name := fmt.Sprintf("race-%s-r%d-n%d", lower(m.name), round, i)
			if _, err := sandbox.CreateNode(ctx, c, sandbox.NodeSpec{Name: name, CPU: fmt.Sprint(perNode), Memory: "64Gi"}); err != nil {
				return res, err
			}
			nodeNames = append(nodeNames, name)
		}
		total := 2 * nodes * perNode
		var wg sync.WaitGroup
		errs := make(chan error, total)
		for i := range total {
			wg.Go(func() {
				_, err := sandbox.CreatePod(ctx, c, sandbox.PodSpec{Namespace: ns.Name, Name: fmt.Sprintf("p-%03d", i), SchedulerName: names[i%2], CPU: "1", Memory: "64Mi"})
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return res, err
		}
		bound, err := settle(ctx, c, ns.Name, total)
		if err != nil {
			return res, err
		}
		over := 0
		for _, n := range nodeNames {
			used, err := cpuMilliOn(ctx, c, n)
			if err != nil {
				return res, err
			}
			if used > int64(perNode)*1000 {
				over++
				res.excess += int(used/1000) - perNode
			}
		}
		res.overcommitted += over
		if over > 0 {
			res.overRounds++
		}
		res.bound += bound
		res.capacity += nodes * perNode
		caught, err := c.CoreV1().Events(ns.Name).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "BindConflict").String()})
		if err != nil {
			return res, err
		}
		res.caught += len(caught.Items)
		fmt.Printf("%s round %d: %d of %d pods bound, %d overcommitted node(s), %d BindConflict event(s)\n", m.name, round+1, bound, total, over, len(caught.Items))
		// Clean up: pods first (no kubelet, so at once), then the nodes.
		if err := c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{}); err != nil {
			return res, err
		}
		for _, n := range nodeNames {
			if err := c.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// settle waits until the number of bound pods has not changed for 5s and
// every unbound pod has been reported unschedulable, and returns how many are bound.
func settle(ctx context.Context, c kubernetes.Interface, ns string, total int) (int, error) {
	last, since := -1, time.Now()
	var bound int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound = 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound != last {
			last, since = bound, time.Now()
			return false, nil
		}
		if bound < total {
			evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedScheduling").String()})
			if err != nil {
				return false, err
			}
			if len(evs.Items) == 0 {
				return false, nil
			}
		}
		return time.Since(since) > 5*time.Second, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return bound, fmt.Errorf("pods did not settle")
	}
	return bound, err
}

func cpuMilliOn(ctx context.Context, c kubernetes.Interface, node string) (int64, error) {
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return 0, err
	}
	var milli int64
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		milli += req.Cpu().MilliValue()
	}
	return milli, nil
}

func lower(s string) string { return strings.ToLower(s) }
