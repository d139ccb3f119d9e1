package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// faults injects faults on a seeded schedule: which fault, on which node,
// for how long, all from rng; a fault that ends later (an outage, a
// refusing node) is undone by a timer.
type faults struct {
	rng   *rand.Rand
	cl    *cluster
	w     *watcher
	nodes []string // node names it may act on, in creation order
	seq   int
	count map[string]int
	// pending: the undo timers still running; gen: per fault kind and
	// node, the latest fault's number, so that an earlier fault's undo
	// does not end a later one on the same node early.
	pending []func()
	mu      sync.Mutex // serialises faults and their undo timers
	gen     map[string]int
	// kinds and weights: the faults this soak injects (--faults).
	kinds   []string
	weights []int
	// restarting: an API server or etcd restart is under way (restarts).
	restarting bool
	restarts   sync.WaitGroup
	// leaseAt: when a fault that can cost a leader its lease last began
	// or ended; a lost lease long after it is a violation.
	leaseMu sync.Mutex
	leaseAt time.Time
}

// faultWeights are the faults and how often each is drawn.
var faultWeights = []struct {
	kind   string
	weight int
}{
	{"leader-kill", 2}, {"leader-pause", 2}, {"leader-partition", 2}, {"slow-api", 1}, {"api-outage", 1},
	{"apiserver-restart", 1}, {"etcd-restart", 1}, {"controller-manager-restart", 1}, {"kwok-restart", 1},
	{"node-add", 2}, {"node-cordon", 2}, {"node-delete", 1}, {"node-refuse", 3}, {"node-not-ready", 2},
	{"node-relabel", 1}, {"metrics-server-restart", 1},
}

func (f *faults) leaseFault(begins bool) {
	f.leaseMu.Lock()
	f.leaseAt = time.Now()
	f.leaseMu.Unlock()
	f.w.disturbance(begins, 0)
}

// sinceLeaseFault is the time since a lease fault last began or ended.
func (f *faults) sinceLeaseFault() time.Duration {
	f.leaseMu.Lock()
	defer f.leaseMu.Unlock()
	if f.leaseAt.IsZero() {
		return time.Duration(1 << 62)
	}
	return time.Since(f.leaseAt)
}

func newFaults(seed int64, cl *cluster, w *watcher, nodes []string, only map[string]bool) *faults {
	f := &faults{rng: rand.New(rand.NewPCG(uint64(seed), 0xfa17)), cl: cl, w: w, nodes: nodes, count: map[string]int{}, gen: map[string]int{}}
	for _, k := range faultWeights {
		if len(only) == 0 || only[k.kind] {
			f.kinds, f.weights = append(f.kinds, k.kind), append(f.weights, k.weight)
		}
	}
	return f
}

func (f *faults) node() string { return f.nodes[f.rng.IntN(len(f.nodes))] }

// inject performs one random fault. It holds f.mu, as each undo timer does
// while it checks that its fault is still the latest and undoes it: an old
// timer cannot undo a fault applied after its check.
func (f *faults) inject(ctx context.Context, logf func(string, ...any)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds, weights := f.kinds, f.weights
	total := 0
	for _, w := range weights {
		total += w
	}
	r := f.rng.IntN(total)
	kind := ""
	for i, w := range weights {
		if r < w {
			kind = kinds[i]
			break
		}
		r -= w
	}
	f.count[kind]++
	// Every fault draws the same numbers whatever the cluster's state, so
	// the sequence stays the seed's.
	node := f.node()
	hold := time.Duration(10+f.rng.IntN(21)) * time.Second
	reason := []string{sandbox.ReasonUnexpectedAdmissionError, sandbox.ReasonOutOfCPU}[f.rng.IntN(2)]
	c := f.cl.c
	// leader is the replica a leader fault acts on (nil, logged, if none).
	leader := func() *replica {
		r := f.cl.leader(ctx)
		if r == nil {
			logf("fault %s: no leader now", kind)
		}
		return r
	}
	switch kind {
	case "leader-kill":
		r := leader()
		if r == nil {
			return nil
		}
		logf("fault leader-kill: SIGKILL %s", r.name)
		r.kill()
		f.w.disturbance(true, 0)
		f.w.disturbance(false, 20*time.Second)
	case "leader-pause":
		// SIGSTOP, then SIGCONT once its lease has expired (15 s) and
		// another replica may lead: it wakes with bindings in flight.
		r := leader()
		if r == nil {
			return nil
		}
		pause := hold + 10*time.Second
		logf("fault leader-pause: SIGSTOP %s for %s", r.name, pause)
		f.leaseFault(true)
		if err := r.pause(); err != nil {
			return err
		}
		f.later(kind+"/"+r.name, pause, func() {
			f.leaseFault(false)
			if err := r.resume(); err != nil {
				logf("fault leader-pause: SIGCONT %s: %v", r.name, err)
			}
			logf("fault leader-pause: SIGCONT %s", r.name)
		})
	case "leader-partition":
		// The leader's path to the API server holds every byte for
		// longer than its renew deadline (10 s): a partition that delays
		// instead of resetting. The leader gives up its lease and exits;
		// what it sent meanwhile is dropped with its connections.
		r := leader()
		if r == nil {
			return nil
		}
		delay := hold + 5*time.Second
		logf("fault leader-partition: %s's traffic held %s for %s", r.name, delay, 2*delay)
		f.leaseFault(true)
		f.w.slowPath(kind+"/"+r.name, true, delay)
		r.proxy.Delay(delay)
		f.later(kind+"/"+r.name, 2*delay, func() {
			f.leaseFault(false)
			f.w.slowPath(kind+"/"+r.name, false, delay)
			r.proxy.Delay(0)
			logf("fault leader-partition: %s's path restored", r.name)
		})
	case "slow-api":
		delay := time.Duration(1+f.rng.IntN(4)) * time.Second
		logf("fault slow-api: %s of latency each way on the replicas' requests for %s", delay, 2*hold)
		f.leaseFault(true)
		f.w.slowPath(kind, true, delay)
		for _, r := range f.cl.replicas {
			r.proxy.Delay(delay)
		}
		f.later(kind, 2*hold, func() {
			f.leaseFault(false)
			f.w.slowPath(kind, false, delay)
			for _, r := range f.cl.replicas {
				r.proxy.Delay(0)
			}
			logf("fault slow-api: ended")
		})
	case "api-outage":
		logf("fault api-outage: the replicas' path to the API server cut for %s", hold)
		f.leaseFault(true)
		for _, r := range f.cl.replicas {
			r.proxy.Cut()
		}
		f.later("api-outage", hold, func() {
			f.leaseFault(false)
			for _, r := range f.cl.replicas {
				r.proxy.Restore()
			}
			logf("fault api-outage: restored")
		})
	case "apiserver-restart", "etcd-restart":
		if f.restarting {
			logf("fault %s: a restart is under way", kind)
			return nil
		}
		logf("fault %s", kind)
		f.restarting = true
		f.leaseFault(true)
		f.w.setAPIDown(true)
		// An API server restart may cost the audit log an event.
		restart, gap := f.cl.cp.RestartEtcd, kind == "apiserver-restart"
		if gap {
			restart = f.cl.cp.RestartAPIServer
			f.w.auditGap(true)
		}
		// Not under f.mu (other faults' undo timers go on) and not with
		// the soak's context (a restart cut short leaves no API server).
		f.restarts.Go(func() {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			err := restart(rctx)
			f.leaseFault(false)
			f.w.setAPIDown(false)
			if gap {
				f.w.auditGap(false)
			}
			f.mu.Lock()
			f.restarting = false
			f.mu.Unlock()
			if err != nil {
				logf("fault %s: %v", kind, err)
				return
			}
			logf("fault %s: ready again", kind)
		})
	case "controller-manager-restart":
		logf("fault controller-manager-restart")
		return f.cl.cm.Restart()
	case "kwok-restart":
		logf("fault kwok-restart")
		return f.cl.kwok.Restart()
	case "node-relabel":
		// A label the batch rule scores moves; a taint no pod tolerates
		// comes and goes.
		logf("fault node-relabel: %s spot label toggled, tainted for %s", node, hold)
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return ignoreNotFound(err)
		}
		spot := "null"
		if n.Labels["lifecycle"] != "spot" {
			spot = `"spot"`
		}
		if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"lifecycle":%s}}}`, spot), metav1.PatchOptions{}); err != nil {
			return ignoreNotFound(err)
		}
		if err := taint(ctx, f.cl, node, true); err != nil {
			return ignoreNotFound(err)
		}
		f.later(kind+"/"+node, hold, func() { _ = taint(context.Background(), f.cl, node, false) })
	case "node-add":
		f.seq++
		n := 5 + f.rng.IntN(16)
		logf("fault node-add: %d nodes", n)
		for i := range n {
			name := fmt.Sprintf("soak-added-%d-%d", f.seq, i)
			if _, err := f.cl.kwok.CreateNode(ctx, nodeSpec(name, i)); err != nil {
				return err
			}
			f.nodes = append(f.nodes, name)
		}
	case "node-cordon":
		logf("fault node-cordon: %s for %s", node, hold)
		if err := cordon(ctx, f.cl, node, true); err != nil {
			return ignoreNotFound(err)
		}
		f.later(kind+"/"+node, hold, func() { _ = cordon(context.Background(), f.cl, node, false) })
	case "node-delete":
		logf("fault node-delete: %s", node)
		return ignoreNotFound(c.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
	case "node-refuse":
		logf("fault node-refuse: %s refuses pods (%s) for %s", node, reason, 3*hold)
		if err := f.cl.kwok.Refuse(ctx, node, reason, refusalMessage(reason)); err != nil {
			return err
		}
		f.later(kind+"/"+node, 3*hold, func() { _ = f.cl.kwok.StopRefusing(context.Background(), node) })
	case "node-not-ready":
		logf("fault node-not-ready: %s for %s", node, 3*hold)
		if err := f.cl.kwok.SetNotReady(ctx, node, true); err != nil {
			return ignoreNotFound(err)
		}
		f.later(kind+"/"+node, 3*hold, func() { _ = f.cl.kwok.SetNotReady(context.Background(), node, false) })
	case "metrics-server-restart":
		if f.cl.ms == nil {
			logf("fault metrics-server-restart: no metrics-server in this soak")
			return nil
		}
		logf("fault metrics-server-restart: down for %s", hold)
		f.cl.ms.Stop()
		f.later(kind, hold, func() {
			// Its start waits up to a minute for metrics to be served:
			// not under f.mu, which the generator's goroutine needs.
			go func() {
				if err := f.cl.ms.Start(context.Background()); err != nil {
					logf("metrics-server did not come back: %v", err)
				}
			}()
		})
	}
	return nil
}

// refusalMessage is the admit handler's message, as the kubelet words it.
func refusalMessage(reason string) string {
	if reason == sandbox.ReasonOutOfCPU {
		return "Node didn't have enough resource: cpu, requested: 1000, used: 3500, capacity: 4000"
	}
	return "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
}

// later undoes the fault named key after d, unless a later fault of the same
// key (kind and node) has started since: that one's undo ends it. f.mu is
// held (inject).
func (f *faults) later(key string, d time.Duration, undo func()) {
	f.gen[key]++
	gen := f.gen[key]
	latest := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gen[key] == gen {
			undo()
		}
	}
	t := time.AfterFunc(d, latest)
	f.pending = append(f.pending, func() {
		if t.Stop() {
			latest()
		}
	})
}

// undoAll ends every fault still running (at the end of the soak), and
// waits for a restart under way.
func (f *faults) undoAll() {
	f.restarts.Wait()
	for _, u := range f.pending {
		u()
	}
	f.pending = nil
}

func taint(ctx context.Context, cl *cluster, node string, on bool) error {
	patch := `{"spec":{"taints":null}}`
	if on {
		patch = `{"spec":{"taints":[{"key":"soak.berth.dev/fault","value":"relabel","effect":"NoSchedule"}]}}`
	}
	_, err := cl.c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func cordon(ctx context.Context, cl *cluster, node string, on bool) error {
	_, err := cl.c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
	return err
}
