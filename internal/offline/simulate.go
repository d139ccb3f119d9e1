package offline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"
	crdscheme "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/scheme"

	"github.com/berth-scheduler/berth/internal/snapshot"
)

// Mode says which pods a simulation places.
type Mode string

const (
	// ModePending places the snapshot's pending pods; bound pods stay.
	ModePending Mode = "pending"
	// ModeReplace unbinds every pod and places them all again, one at a
	// time in creation order.
	ModeReplace Mode = "replace"
)

// Outcome is what the simulated scheduler did with one pod.
type Outcome struct {
	// Namespace and Name name the pod (as in the snapshot).
	Namespace, Name string
	// Node is where it was bound; empty when it stayed pending.
	Node string
	// Reason is the scheduler's PodScheduled condition message of a pod
	// that stayed pending.
	Reason string
}

// Simulation is a simulation's result.
type Simulation struct {
	// Outcomes are the placed pods' outcomes, sorted by namespace and name.
	Outcomes []Outcome
	// Unmodelled lists snapshot objects the simulator could not load.
	Unmodelled []string
}

// settle is how long a scheduler with nothing in its queues, in flight or
// waiting at Permit must stay so before a simulation ends.
const settle = 300 * time.Millisecond

// Simulate runs Berth's scheduler, built from cfg as Build builds it, on the
// objects of snap and returns where it placed the pods mode says. The
// scheduler runs for real — its queue, its cache, every plugin at every
// extension point, bindings through the (in-memory) API — so the result is
// the scheduler's, up to what differs by construction: time (timeouts,
// backoffs, LoadAware's samples as of the snapshot), and the order in which
// pods that are pending together reach the queue.
func Simulate(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, snap *snapshot.File, mode Mode) (*Simulation, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim := &Simulation{}
	c, places, later, err := load(snap, mode, cfg, sim)
	if err != nil {
		return nil, err
	}
	s, err := Build(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	s.Informers.Start(ctx.Done())
	s.DynInformers.Start(ctx.Done())
	s.Informers.WaitForCacheSync(ctx.Done())
	s.DynInformers.WaitForCacheSync(ctx.Done())
	go s.Run(ctx)

	settled := func() error { return waitSettled(ctx, s) }
	if err := settled(); err != nil {
		return nil, err
	}
	for _, p := range later {
		if _, err := c.Kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if err := waitAttempted(ctx, s, c, p); err != nil {
			return nil, err
		}
	}
	if len(later) > 0 {
		if err := settled(); err != nil {
			return nil, err
		}
	}

	for _, key := range places {
		p, err := c.Kube.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading pod %s/%s back: %w", key.Namespace, key.Name, err)
		}
		o := Outcome{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName}
		if o.Node == "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
					o.Reason = cond.Message
				}
			}
		}
		sim.Outcomes = append(sim.Outcomes, o)
	}
	sort.Slice(sim.Outcomes, func(i, j int) bool {
		a, b := sim.Outcomes[i], sim.Outcomes[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return sim, nil
}

// waitSettled waits until the scheduler has nothing to do: its active and
// backoff queues empty, no pod in flight, none waiting at Permit, for
// settle in a row. Pods the scheduler found unschedulable stay where the
// queue keeps them; the simulation does not wait for the queue's periodic
// flush.
func waitSettled(ctx context.Context, s *Scheduler) error {
	var quietSince time.Time
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		q := s.SchedulingQueue
		busy := len(q.PodsInActiveQ())+len(q.PodsInBackoffQ())+len(q.InFlightPods()) > 0
		for _, fw := range s.Scheduler.Profiles {
			fw.IterateOverWaitingPods(func(fwk.WaitingPod) { busy = true })
		}
		if busy {
			quietSince = time.Time{}
			return false, nil
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		return time.Since(quietSince) >= settle, nil
	})
}

// waitAttempted waits until the scheduler is done with p for now: p bound,
// waiting at Permit (a gang member), or back in the queue as unschedulable
// (or held by a PreEnqueue plugin) with nothing else to do.
func waitAttempted(ctx context.Context, s *Scheduler, c *Clients, p *v1.Pod) error {
	pods := v1.SchemeGroupVersion.WithResource("pods")
	return wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		obj, err := c.Kube.Tracker().Get(pods, p.Namespace, p.Name)
		if err != nil {
			return false, err
		}
		if obj.(*v1.Pod).Spec.NodeName != "" {
			return true, nil
		}
		for _, fw := range s.Scheduler.Profiles {
			if fw.GetWaitingPod(p.UID) != nil {
				return true, nil
			}
		}
		q := s.SchedulingQueue
		if _, queued := q.GetPod(p.Name, p.Namespace, p.Spec.SchedulingGroup); !queued {
			return false, nil // not seen yet, or in flight
		}
		return len(q.PodsInActiveQ())+len(q.PodsInBackoffQ())+len(q.InFlightPods()) == 0, nil
	})
}

// podKey names a pod.
type podKey struct{ Namespace, Name string }

// load fills in-memory clients with snap's objects. It returns the pods
// the simulation places and, in replace mode, the pods to create one by
// one in creation order (unbound).
func load(snap *snapshot.File, mode Mode, cfg *schedconfig.KubeSchedulerConfiguration, sim *Simulation) (*Clients, []podKey, []*v1.Pod, error) {
	var kube, crds, metrics []runtime.Object
	var dyn []runtime.Object
	var places []podKey
	var later []*v1.Pod
	profiles := map[string]bool{}
	for _, p := range cfg.Profiles {
		profiles[p.SchedulerName] = true
	}
	for _, u := range snap.Items {
		gvk := u.GroupVersionKind()
		switch {
		case kubescheme.Scheme.Recognizes(gvk):
			obj, err := kubescheme.Scheme.New(gvk)
			if err != nil {
				return nil, nil, nil, err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				sim.Unmodelled = append(sim.Unmodelled, fmt.Sprintf("%s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err))
				continue
			}
			if p, ok := obj.(*v1.Pod); ok {
				ours := profiles[p.Spec.SchedulerName] && p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded
				switch {
				case mode == ModeReplace && ours:
					unbind(p)
					later = append(later, p)
					places = append(places, podKey{p.Namespace, p.Name})
					continue
				case mode == ModePending && ours && p.Spec.NodeName == "":
					places = append(places, podKey{p.Namespace, p.Name})
				}
			}
			kube = append(kube, obj)
		case crdscheme.Scheme.Recognizes(gvk):
			obj, err := crdscheme.Scheme.New(gvk)
			if err != nil {
				return nil, nil, nil, err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				sim.Unmodelled = append(sim.Unmodelled, fmt.Sprintf("%s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err))
				continue
			}
			crds = append(crds, obj)
			dyn = append(dyn, u.DeepCopy())
		case metricsscheme.Scheme.Recognizes(gvk):
			obj, err := metricsscheme.Scheme.New(gvk)
			if err != nil {
				return nil, nil, nil, err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				sim.Unmodelled = append(sim.Unmodelled, fmt.Sprintf("%s %s: %v", gvk.Kind, u.GetName(), err))
				continue
			}
			metrics = append(metrics, obj)
		default:
			sim.Unmodelled = append(sim.Unmodelled, fmt.Sprintf("%s %s/%s: a kind the simulator does not know", gvk, u.GetNamespace(), u.GetName()))
		}
	}
	slices.SortStableFunc(later, func(a, b *v1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	c := NewClientsWith(kube, crds, metrics, dyn)
	return c, places, later, nil
}

// unbind makes p a pod no scheduler has seen.
func unbind(p *v1.Pod) {
	p.Spec.NodeName = ""
	p.ResourceVersion = ""
	p.Status = v1.PodStatus{Phase: v1.PodPending}
}

// bindThroughTracker makes the in-memory API server do what kube-apiserver
// does on pods/binding: set the pod's nodeName and its PodScheduled
// condition.
func bindThroughTracker(c *Clients) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(clienttesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return false, nil, nil
		}
		obj, err := c.Kube.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*v1.Pod).DeepCopy()
		if p.Spec.NodeName != "" {
			return true, nil, fmt.Errorf("pod %s/%s is already bound to %s", p.Namespace, p.Name, p.Spec.NodeName)
		}
		p.Spec.NodeName = b.Target.Name
		cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodScheduled {
				p.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			p.Status.Conditions = append(p.Status.Conditions, cond)
		}
		return true, b, c.Kube.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace)
	}
}
