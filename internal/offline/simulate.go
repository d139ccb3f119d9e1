package offline

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	berthconfig "github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/pluginclock"
	"github.com/berth-scheduler/berth/internal/snapshot"
	crdscheme "github.com/berth-scheduler/berth/internal/spclient/clientset/versioned/scheme"
)

// Mode says which pods a simulation places.
type Mode string

const (
	// ModePending places the snapshot's pending pods; bound pods stay.
	ModePending Mode = "pending"
	// ModeReplace unbinds every pod and places them all again, one at a
	// time in placementOrder (DaemonSets' pods, then by priority, then by
	// creation).
	ModeReplace Mode = "replace"
	// ModeDrain drains Plan.Drain's nodes as kubectl drain does: it cordons
	// them and evicts their pods (DaemonSet and mirror pods stay), whose
	// controllers' replacements it places one at a time in placementOrder.
	ModeDrain Mode = "drain"
)

// Plan says what a simulation does.
type Plan struct {
	Mode Mode
	// Drain names the nodes ModeDrain drains (every one must be in the
	// snapshot); empty in the other modes.
	Drain []string
	// Compare names, per pod ("namespace/name"), the node another
	// simulation placed it on: where this one places the pod elsewhere or
	// leaves it pending, its Outcome says how that node fared (Other).
	Compare map[string]string
	// Timeout ends the simulation (0: none): the pods placed by then are
	// reported, the others as not placed before the deadline, and
	// Simulation.TimedOut is set.
	Timeout time.Duration
	// KeepTerminating keeps the pods being deleted where they are, holding
	// their room; by default they are left out, as they leave the cluster
	// within their grace period.
	KeepTerminating bool
	// Progress, if set, is called about every second while pods are
	// placed.
	Progress func(Progress)
	// AddNodes adds copies of snapshot nodes, in any mode.
	AddNodes []NodeCopies
	// RemoveNodes removes snapshot nodes, in any mode: their pods are
	// placed again as their controllers' replacements would be (but
	// DaemonSets' and mirror pods, which go with their node).
	RemoveNodes []string
	// CallExtenders lets a configuration with extenders run: their
	// filter, prioritize and preempt verbs are called for real, their bind
	// verb never (a simulation writes nothing anywhere). Without it such a
	// configuration is refused.
	CallExtenders bool
}

// Progress is how far a simulation is: Placed pods bound so far (the
// pods it places, and pods pending before a drain), of Total to place.
type Progress struct{ Placed, Total int }

// Check says what is wrong with p for snap, if anything (Simulate checks
// it too).
func (p Plan) Check(snap *snapshot.File) error {
	switch p.Mode {
	case ModePending, ModeReplace:
		if len(p.Drain) > 0 {
			return fmt.Errorf("nodes to drain given in %s mode: only drain mode drains nodes", p.Mode)
		}
	case ModeDrain:
		if len(p.Drain) == 0 {
			return errors.New("drain mode needs the nodes to drain")
		}
	default:
		return fmt.Errorf("mode %q: pending, replace or drain", p.Mode)
	}
	known := map[string]bool{}
	for _, u := range snap.Items {
		if u.GetKind() == "Node" && u.GroupVersionKind().Group == "" {
			known[u.GetName()] = true
		}
	}
	missing := func(what string, names []string) error {
		var out []string
		for _, n := range names {
			if !known[n] {
				out = append(out, n)
			}
		}
		if len(out) > 0 {
			return fmt.Errorf("%s not in the snapshot: %s", what, strings.Join(out, ", "))
		}
		return nil
	}
	templates := make([]string, len(p.AddNodes))
	for i, c := range p.AddNodes {
		if c.Count < 1 {
			return fmt.Errorf("copies of node %s: %d, want at least 1", c.Template, c.Count)
		}
		templates[i] = c.Template
	}
	return errors.Join(missing("nodes to drain", p.Drain), missing("nodes to copy", templates), missing("nodes to remove", p.RemoveNodes))
}

// Outcome is what the simulated scheduler did with one pod.
type Outcome struct {
	// Namespace and Name name the pod (as in the snapshot), SchedulerName
	// the profile that placed it.
	Namespace, Name, SchedulerName string
	// Node is where it was bound; empty when it stayed pending.
	Node string
	// Reason is the scheduler's PodScheduled condition message of a pod
	// that stayed pending.
	Reason string
	// Preempted: the simulated scheduler deleted the pod (a preemption
	// victim: DefaultPreemption's, ElasticQuota's reclaim).
	Preempted bool
	// Score is how Node scored in the pod's last scheduling cycle; nil
	// when that cycle scored no node (a single feasible node, or the
	// nominated or batch-hinted node taken without a search).
	Score *Score
	// Ties counts the other nodes that scored as high as Node in that
	// cycle (the scheduler picks among them by the order its filter
	// workers finish in); TiedWith names the first of them, sorted.
	Ties     int
	TiedWith []string
	// Other is how the node Plan.Compare names for the pod fared in its
	// last cycle, when the pod is not on it.
	Other *Verdict
	// Rejections count, for a pod left pending, the nodes each filter
	// status ("Plugin: reason") rejected in its last cycle.
	Rejections map[string]int
}

// Simulation is a simulation's result.
type Simulation struct {
	// Outcomes are the placed pods' outcomes, sorted by namespace and name.
	Outcomes []Outcome
	// Unmodelled lists snapshot objects the simulator could not load.
	Unmodelled []string
	// Nodes, Quotas and Gangs are the totals when the simulation ends:
	// every node's requests, every ElasticQuota's use and borrowing, every
	// scheduler-plugins PodGroup's bound members.
	Nodes  []NodeUse
	Quotas []QuotaUse
	Gangs  []GangUse
	// Warnings say where the simulation departs from what would happen:
	// in drain mode, drained pods another scheduler would replace, pods
	// kubectl drain refuses to evict without a flag.
	Warnings []string
	// OtherSchedulers count, by schedulerName, the pods of schedulers the
	// configuration has no profile for (ended and mirror pods aside): they
	// stay where they are, pending or bound, in every mode.
	OtherSchedulers map[string]int
	// Ours counts the pods of the configuration's profiles (ended and
	// mirror pods aside), placed by the simulation or not.
	Ours int
	// Terminating counts the pods being deleted that were left out
	// (Plan.KeepTerminating keeps them).
	Terminating int
	// TimedOut: Plan.Timeout passed before the scheduler was done.
	TimedOut bool

	// Profiles name the configuration's profiles (schedulerName).
	Profiles []string
	// AddedNodes name the copies Plan.AddNodes made.
	AddedNodes []string

	// schedulerOf names the profile of each pod placed.
	schedulerOf map[podKey]string
	// toPlace counts the pods the scheduler places (in drain mode, the
	// pods pending before it too).
	toPlace int
}

// ErrConfig wraps the errors of a configuration that does not build (a
// plugin's args, a CEL rule): the scheduler would not start with it.
var ErrConfig = errors.New("the configuration does not build")

// notPlacedInTime is the reason of a pod the scheduler had not placed when
// Plan.Timeout passed.
const notPlacedInTime = "not placed before the simulation's deadline (--timeout)"

// settle is how long a scheduler with nothing in its queues, in flight or
// waiting at Permit must stay so before a simulation ends.
const settle = 300 * time.Millisecond

// Simulate runs Berth's scheduler, built from cfg as Build builds it, on the
// objects of snap and returns where it placed the pods plan says. The
// scheduler runs for real — its queue, its cache, every plugin at every
// extension point, bindings through the (in-memory) API — so the result is
// the scheduler's, up to what differs by construction: time (the plugins
// read a clock that starts at the snapshot's time; timeouts and backoffs
// are real), and the order in which pods that are pending together reach
// the queue. What the cluster's controllers would do meanwhile is done as
// they would (volumes provisioned, DRA claims made from their templates and
// released).
func Simulate(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, snap *snapshot.File, plan Plan) (*Simulation, error) {
	if err := plan.Check(snap); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The snapshot's time is the plugins' clock: a sample, a refusal, a
	// grace period is as old as it was when the snapshot was taken. The
	// scheduler's own timers (backoffs, Permit's waits) keep real time.
	now := time.Now
	if !snap.Taken.IsZero() {
		now = pluginclock.At(snap.Taken.Time)
		ctx = pluginclock.With(ctx, now)
	}
	if len(cfg.Extenders) > 0 {
		if !plan.CallExtenders {
			urls := make([]string, len(cfg.Extenders))
			for i, e := range cfg.Extenders {
				urls[i] = e.URLPrefix
			}
			return nil, fmt.Errorf("%w: it calls extenders (%s), which a simulation does not call unless asked to (--call-extenders: their filter, prioritize and preempt verbs, never bind)", ErrConfig, strings.Join(urls, ", "))
		}
		// Never their bind: the in-memory API binds.
		cfg = cfg.DeepCopy()
		for i := range cfg.Extenders {
			cfg.Extenders[i].BindVerb = ""
		}
	}
	sim := &Simulation{}
	c, places, bound, later, err := load(snap, plan, cfg, sim)
	if err != nil {
		return nil, err
	}
	c.SetClock(now)
	// The scheduler runs until the simulation is over or its deadline
	// passes; the results are read after it stopped.
	schedCtx, stopScheduler := context.WithCancel(ctx)
	defer stopScheduler()
	runCtx := schedCtx
	if plan.Timeout > 0 {
		var cancelRun context.CancelFunc
		runCtx, cancelRun = context.WithTimeout(schedCtx, plan.Timeout)
		defer cancelRun()
	}
	// timedOut says whether err ended the run at its deadline (the
	// simulation then reports what was placed); any other error stands.
	timedOut := func(err error) bool {
		if err != nil && runCtx.Err() != nil && ctx.Err() == nil && errors.Is(context.Cause(runCtx), context.DeadlineExceeded) {
			sim.TimedOut = true
			return true
		}
		return false
	}
	s, err := Build(schedCtx, cfg, c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	sim.Warnings = append(sim.Warnings, byConstruction(s.Profiles)...)
	sim.Warnings = append(sim.Warnings, annotationsNotHeld(cfg, snap)...)
	var recs []*recorder
	for name, fw := range s.Scheduler.Profiles {
		r := newRecorder(fw, plan.Compare)
		s.Scheduler.Profiles[name] = r
		recs = append(recs, r)
	}
	s.Informers.Start(schedCtx.Done())
	s.DynInformers.Start(schedCtx.Done())
	s.Informers.WaitForCacheSync(schedCtx.Done())
	s.DynInformers.WaitForCacheSync(schedCtx.Done())
	// LoadAware's MetricsAPI source lists NodeMetrics as it starts: let that
	// first listing be answered before the first pod is scheduled.
	if len(metricsOf(snap)) > 0 {
		_ = wait.PollUntilContextTimeout(schedCtx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			for _, a := range c.Metrics.Actions() {
				if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
					return true, nil
				}
			}
			return false, nil
		})
	}
	// As app.Run: every informer's handlers have seen the initial objects
	// (nodes and bound pods in the cache, pending pods in the queue).
	if err := s.WaitForHandlersSync(schedCtx); err != nil {
		return nil, fmt.Errorf("waiting for the scheduler's event handlers: %w", err)
	}
	go s.Run(schedCtx)
	if plan.Progress != nil {
		progressCtx, stopProgress := context.WithCancel(runCtx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			reportProgress(progressCtx, plan.Progress, c, sim.toPlace)
		}()
		// Not called once Simulate returns.
		defer func() { stopProgress(); <-done }()
	}

	// created counts the pods of later created, in order.
	created := 0
	err = waitSettled(runCtx, s)
	for _, p := range later {
		if err != nil {
			break
		}
		if _, err = c.Kube.CoreV1().Pods(p.Namespace).Create(runCtx, p, metav1.CreateOptions{}); err != nil {
			err = fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
			break
		}
		created++
		err = waitAttempted(runCtx, s, c, p)
	}
	if err == nil && len(later) > 0 {
		err = waitSettled(runCtx, s)
	}
	if err != nil && !timedOut(err) {
		return nil, err
	}
	// Nothing changes from here: the results are read from the API and
	// the cache as the scheduler left them, once the bindings in flight
	// when it stopped (after a deadline) have ended: a binding cycle
	// whose context is done forgets its pod, or binds it first.
	stopScheduler()
	if sim.TimedOut {
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return len(s.Cache.Dump().AssumedPods) == 0, nil
		})
	}
	for _, r := range recs {
		r.freeze()
	}
	unplaced := map[podKey]bool{}
	for _, p := range later[created:] {
		unplaced[podKey{p.Namespace, p.Name}] = true
	}

	for _, key := range places {
		p, err := c.Kube.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && unplaced[key] {
			sim.Outcomes = append(sim.Outcomes, Outcome{Namespace: key.Namespace, Name: key.Name, SchedulerName: sim.schedulerOf[key], Reason: notPlacedInTime})
			continue
		}
		if apierrors.IsNotFound(err) {
			sim.Outcomes = append(sim.Outcomes, Outcome{Namespace: key.Namespace, Name: key.Name, SchedulerName: sim.schedulerOf[key], Preempted: true})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading pod %s/%s back: %w", key.Namespace, key.Name, err)
		}
		o := Outcome{Namespace: p.Namespace, Name: p.Name, SchedulerName: p.Spec.SchedulerName, Node: p.Spec.NodeName}
		for _, r := range recs {
			r.fill(&o)
		}
		if o.Node == "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
					o.Reason = cond.Message
				}
			}
			if sim.TimedOut && o.Reason == "" {
				o.Reason = notPlacedInTime
			}
		}
		sim.Outcomes = append(sim.Outcomes, o)
	}
	// Pods bound in the snapshot that the simulation's preemption deleted.
	for _, key := range bound {
		if _, err := c.Kube.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			sim.Outcomes = append(sim.Outcomes, Outcome{Namespace: key.Namespace, Name: key.Name, SchedulerName: sim.schedulerOf[key], Preempted: true})
		}
	}
	sort.Slice(sim.Outcomes, func(i, j int) bool {
		a, b := sim.Outcomes[i], sim.Outcomes[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	eqs, err := c.CRD.SchedulingV1alpha1().ElasticQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ElasticQuotas back: %w", err)
	}
	pgs, err := c.CRD.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PodGroups back: %w", err)
	}
	var quotas []*schedv1alpha1.ElasticQuota
	for i := range eqs.Items {
		quotas = append(quotas, &eqs.Items[i])
	}
	var groups []*schedv1alpha1.PodGroup
	for i := range pgs.Items {
		groups = append(groups, &pgs.Items[i])
	}
	totals(sim, s.Cache.Dump().Nodes, quotas, groups)
	if w := provisionedWarning(c.Provisioned()); w != "" {
		sim.Warnings = append(sim.Warnings, w)
	}
	return sim, nil
}

// provisionedWarning says which claims the simulation provisioned.
func provisionedWarning(made []Provisioned) string {
	if len(made) == 0 {
		return ""
	}
	names := make([]string, 0, min(len(made), 10))
	for i, p := range made {
		if i == 10 {
			names = append(names, fmt.Sprintf("… %d more", len(made)-i))
			break
		}
		names = append(names, p.Claim+" on "+p.Node)
	}
	return fmt.Sprintf("%d claims waiting for their first consumer were provisioned as their StorageClass's provisioner would, on the node the pod was placed on (%s): VolumeBinding checked the class's allowedTopologies, and CSIStorageCapacity as the snapshot holds it (not reduced by these volumes); a provisioner's own failures are not simulated",
		len(made), strings.Join(names, ", "))
}

// byConstruction says, for the plugins of profiles that decide on what a
// snapshot cannot hold, where the simulation cannot agree with the cluster.
func byConstruction(profiles []Profile) []string {
	var out []string
	uses := func(plugin string) []string {
		var names []string
		for _, p := range profiles {
			if slices.Contains(p.Plugins, plugin) {
				names = append(names, p.SchedulerName)
			}
		}
		return names
	}
	if ps := uses("LoadAware"); len(ps) > 0 {
		out = append(out, fmt.Sprintf("LoadAware (profiles %s) reads node usage as the snapshot holds it (NodeMetrics as fresh as when it was taken, usage annotations): the pods the simulation places add only LoadAware's own estimate of them, not the usage they would show later",
			strings.Join(ps, ", ")))
	}
	if ps := uses("Coscheduling"); len(ps) > 0 {
		out = append(out, fmt.Sprintf("Coscheduling (profiles %s) runs on the simulation's clock: members reach the queue one at a time (replace, drain) or all at once (pending), a gang waits at Permit as long as its timeout, and the simulation ends without the queue's periodic retry of gangs that timed out",
			strings.Join(ps, ", ")))
	}
	return out
}

// reportProgress calls progress every second until ctx is done with the
// pods bound so far.
func reportProgress(ctx context.Context, progress func(Progress), c *Clients, total int) {
	wait.UntilWithContext(ctx, func(context.Context) {
		progress(Progress{Placed: int(c.bindings.Load()), Total: total})
	}, time.Second)
}

// quoted finds a CEL expression's string literals.
var quoted = regexp.MustCompile(`'([^'\\]*)'|"([^"\\]*)"`)

// annotationsNotHeld warns of the annotation keys CELPolicy rules name
// (a string literal with a "/" in a rule that reads annotations) that the
// snapshot left out: the rule decides without them.
func annotationsNotHeld(cfg *schedconfig.KubeSchedulerConfiguration, snap *snapshot.File) []string {
	var out []string
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			args, ok := pc.Args.(*berthconfig.CELPolicyArgs)
			if !ok {
				continue
			}
			for _, r := range args.Rules {
				for _, expr := range []string{r.Match, r.Filter, r.Score} {
					if !strings.Contains(expr, "annotations") {
						continue
					}
					for _, m := range quoted.FindAllStringSubmatch(expr, -1) {
						key := m[1] + m[2]
						if strings.Contains(key, "/") && !snapshot.KeptAnnotation(key, snap.KeptAnnotations) {
							out = append(out, fmt.Sprintf("CELPolicy rule %s (profile %s) reads annotation %s, which the snapshot does not hold: take it with kubectl berth snapshot --keep-annotation %s", r.Name, p.SchedulerName, key, key))
						}
					}
				}
			}
		}
	}
	return out
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
		// A pod in PreBind or Bind is in no queue and not waiting, but
		// assumed in the cache until its binding is seen.
		if !busy && len(s.Cache.Dump().AssumedPods) > 0 {
			busy = true
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
		switch {
		case apierrors.IsNotFound(err):
			return true, nil // deleted: a preemption victim already
		case err != nil:
			return false, err
		case obj.(*v1.Pod).Spec.NodeName != "":
			return true, nil
		}
		for _, fw := range s.Scheduler.Profiles {
			if fw.GetWaitingPod(p.UID) != nil {
				return true, nil
			}
		}
		if assumed, _ := s.Cache.IsAssumedPod(p); assumed {
			return false, nil // in PreBind or Bind
		}
		q := s.SchedulingQueue
		if _, queued := q.GetPod(p.Name, p.Namespace, p.Spec.SchedulingGroup); !queued {
			return false, nil // not seen yet, or in flight
		}
		return len(q.PodsInActiveQ())+len(q.PodsInBackoffQ())+len(q.InFlightPods()) == 0, nil
	})
}

// metricsOf returns snap's NodeMetrics items.
func metricsOf(snap *snapshot.File) []int {
	var idx []int
	for i, u := range snap.Items {
		if u.GetKind() == "NodeMetrics" {
			idx = append(idx, i)
		}
	}
	return idx
}

// podKey names a pod.
type podKey struct{ Namespace, Name string }

// load fills in-memory clients with snap's objects. It returns the pods
// the simulation places, the pods bound before it (a preemption may delete
// them) and, in replace and drain mode, the pods to create one by one in
// placementOrder (unbound).
func load(snap *snapshot.File, plan Plan, cfg *schedconfig.KubeSchedulerConfiguration, sim *Simulation) (*Clients, []podKey, []podKey, []*v1.Pod, error) {
	mode := plan.Mode
	drained, removed := map[string]bool{}, map[string]bool{}
	for _, n := range plan.Drain {
		drained[n] = true
	}
	for _, n := range plan.RemoveNodes {
		removed[n] = true
	}
	gonePods := 0
	templates, daemons := map[string]bool{}, map[string][]templateDaemon{}
	for _, c := range plan.AddNodes {
		templates[c.Template] = true
	}
	var kube, crds, metrics []runtime.Object
	var dyn []runtime.Object
	var places, bound []podKey
	var later []*v1.Pod
	// The pods placed (their DRA claims prepared as the resourceclaim
	// controller would), and the pods gone from where they were (placed
	// again, or left out as terminating), whose claims are released.
	var placing []*v1.Pod
	gone := map[types.UID]bool{}
	pendingBefore := 0
	profiles := map[string]bool{}
	for _, p := range cfg.Profiles {
		profiles[p.SchedulerName] = true
		sim.Profiles = append(sim.Profiles, p.SchedulerName)
	}
	sim.OtherSchedulers = map[string]int{}
	sim.schedulerOf = map[podKey]string{}
	// place records a pod the simulation places; placeAgain one it
	// creates again, unbound, one at a time.
	place := func(p *v1.Pod) {
		places = append(places, podKey{p.Namespace, p.Name})
		sim.schedulerOf[podKey{p.Namespace, p.Name}] = p.Spec.SchedulerName
		placing = append(placing, p)
	}
	placeAgain := func(p *v1.Pod) {
		place(p)
		later = append(later, p)
	}
	for _, u := range snap.Items {
		gvk := u.GroupVersionKind()
		switch {
		case kubescheme.Scheme.Recognizes(gvk):
			obj, err := kubescheme.Scheme.New(gvk)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				sim.Unmodelled = append(sim.Unmodelled, fmt.Sprintf("%s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err))
				continue
			}
			if p, ok := obj.(*v1.Pod); ok {
				ended := p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded
				// Mirror pods (static pods' mirrors) were never scheduled:
				// they stay where their kubelet runs them.
				_, mirror := p.Annotations[v1.MirrorPodAnnotationKey]
				// A pod being deleted leaves within its grace period:
				// left out, its room free, unless the plan keeps it.
				if p.DeletionTimestamp != nil && !ended && !plan.KeepTerminating {
					sim.Terminating++
					gone[p.UID] = true
					continue
				}
				ours := profiles[p.Spec.SchedulerName] && p.DeletionTimestamp == nil && !ended && !mirror
				// A copied node gets its template's DaemonSet pods, as the
				// DaemonSet controller would run them there.
				if templates[p.Spec.NodeName] && ownedByDaemonSet(p) && !ended && p.DeletionTimestamp == nil {
					daemons[p.Spec.NodeName] = append(daemons[p.Spec.NodeName], templateDaemon{p.DeepCopy(), mode == ModeReplace && ours})
				}
				// A removed node's DaemonSet and mirror pods go with it;
				// another scheduler's pods leave it for where that
				// scheduler puts them, not simulated.
				if removed[p.Spec.NodeName] && !ended && (mirror || ownedByDaemonSet(p) || !ours) {
					switch {
					case mirror || ownedByDaemonSet(p):
					case !profiles[p.Spec.SchedulerName]:
						sim.Warnings = append(sim.Warnings, fmt.Sprintf("pod %s/%s on removed node %s is scheduled by %q, which the configuration has no profile for: left out, where it goes next is not simulated", p.Namespace, p.Name, p.Spec.NodeName, p.Spec.SchedulerName))
					default:
						sim.Warnings = append(sim.Warnings, fmt.Sprintf("pod %s/%s on removed node %s is being deleted: left out with its node", p.Namespace, p.Name, p.Spec.NodeName))
					}
					gone[p.UID] = true
					gonePods++
					continue
				}
				switch {
				case ended || mirror:
				case profiles[p.Spec.SchedulerName]:
					sim.Ours++
				default:
					sim.OtherSchedulers[p.Spec.SchedulerName]++
				}
				// kubectl drain evicts a drained node's pods but its
				// DaemonSets' (--ignore-daemonsets) and mirror pods; a
				// controller's replacement is then placed.
				// A pod already being deleted is leaving anyway.
				onDrained := mode == ModeDrain && drained[p.Spec.NodeName] && !ended && !mirror && !ownedByDaemonSet(p) && p.DeletionTimestamp == nil
				evicted := onDrained && ours || removed[p.Spec.NodeName] && ours
				if onDrained {
					sim.Warnings = append(sim.Warnings, drainWarnings(p, ours)...)
				}
				if mode == ModeDrain && drained[p.Spec.NodeName] && !ended && ownedByDaemonSet(p) {
					sim.Warnings = append(sim.Warnings, fmt.Sprintf("pod %s/%s on drained node %s is a DaemonSet's: kubectl drain fails unless --ignore-daemonsets, with which it stays (as simulated)", p.Namespace, p.Name, p.Spec.NodeName))
				}
				placedAgain := mode == ModeReplace && ours || evicted
				if p.Spec.NodeName != "" && !ended && !placedAgain {
					bound = append(bound, podKey{p.Namespace, p.Name})
					sim.schedulerOf[podKey{p.Namespace, p.Name}] = p.Spec.SchedulerName
				}
				switch {
				case placedAgain:
					gone[p.UID] = true
					unbind(p)
					placeAgain(p)
					continue
				case mode == ModePending && ours && p.Spec.NodeName == "":
					place(p)
				case mode == ModeDrain && ours && p.Spec.NodeName == "":
					placing = append(placing, p)
					// In the queue before the evicted pods: placed first,
					// taking room they might need, but not the drain's
					// outcome (--fail-on pending is about the drain).
					pendingBefore++
				}
			}
			if n, ok := obj.(*v1.Node); ok && drained[n.Name] {
				n.Spec.Unschedulable = true // cordoned, as kubectl drain does first
			}
			kube = append(kube, obj)
		case crdscheme.Scheme.Recognizes(gvk):
			obj, err := crdscheme.Scheme.New(gvk)
			if err != nil {
				return nil, nil, nil, nil, err
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
				return nil, nil, nil, nil, err
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
	if len(removed) > 0 {
		sim.Warnings = append(sim.Warnings, fmt.Sprintf("nodes removed: %s; their pods are placed again as their controllers' replacements would be, %d DaemonSet, mirror or other schedulers' pods left with them", strings.Join(plan.RemoveNodes, ", "), gonePods))
	}
	kube, metrics, added, again := reshape(kube, metrics, plan.AddNodes, removed, daemons, snap.Taken.Time)
	for _, p := range again {
		placeAgain(p)
		sim.Ours++
	}
	sim.AddedNodes = added
	if len(added) > 0 {
		sim.Warnings = append(sim.Warnings, fmt.Sprintf("nodes added: %s (copies of their templates' shape and DaemonSet pods: no usage sample, no images, no annotations)", strings.Join(added, ", ")))
	}
	if sim.Terminating > 0 {
		sim.Warnings = append(sim.Warnings, fmt.Sprintf("%d pods being deleted were left out, their room free: in a cluster they leave within their grace period (--keep-terminating keeps them where they are)", sim.Terminating))
	}
	if pendingBefore > 0 {
		sim.Warnings = append(sim.Warnings, fmt.Sprintf("%d pods were pending before the drain: they are placed first (taking room the evicted pods might need) and not listed; --mode pending shows where they go", pendingBefore))
	}
	slices.SortStableFunc(later, placementOrder)
	kube = prepareClaims(kube, placing, gone, sim)
	sim.toPlace = len(placing)
	c := NewClientsWith(kube, crds, metrics, dyn)
	return c, places, bound, later, nil
}

// placementOrder is the order replace and drain mode create the pods they
// place again in: as a cluster's pods came to be. DaemonSets' pods first:
// their controller makes one for each node as the node joins, before the
// apps (each is pinned to its node by affinity); then by priority, highest
// first, as the scheduling queue takes them and as preemption would
// settle them; then by creation.
func placementOrder(a, b *v1.Pod) int {
	if da, db := ownedByDaemonSet(a), ownedByDaemonSet(b); da != db {
		if da {
			return -1
		}
		return 1
	}
	if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
		if pa > pb {
			return -1
		}
		return 1
	}
	return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
}

// drainWarnings says how draining p's node departs from the simulation's
// eviction and replacement of p (ours: a profile of the configuration
// places it).
func drainWarnings(p *v1.Pod, ours bool) []string {
	name := p.Namespace + "/" + p.Name
	var out []string
	// kubectl drain's filters hold for every pod, whoever schedules it; one
	// that refuses fails the whole drain (nothing evicted, the node left
	// cordoned).
	if metav1.GetControllerOf(p) == nil {
		replaced := "simulated as if replaced"
		if !ours {
			replaced = "not simulated"
		}
		out = append(out, fmt.Sprintf("pod %s on drained node %s has no controller: kubectl drain fails unless --force, which deletes it for good (%s)", name, p.Spec.NodeName, replaced))
	}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			out = append(out, fmt.Sprintf("pod %s on drained node %s has emptyDir volume %s: kubectl drain fails unless --delete-emptydir-data", name, p.Spec.NodeName, v.Name))
			break
		}
	}
	if !ours {
		out = append(out, fmt.Sprintf("pod %s on drained node %s is scheduled by %q, which the configuration has no profile for: a drain evicts it too, but where it goes next is not simulated (its requests stay on %s)",
			name, p.Spec.NodeName, p.Spec.SchedulerName, p.Spec.NodeName))
	}
	return out
}

// ownedByDaemonSet says whether a DaemonSet controls p.
func ownedByDaemonSet(p *v1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// unbind makes p a pod no scheduler has seen. It keeps the names of its
// DRA claims (the resourceclaim controller's, in its status).
func unbind(p *v1.Pod) {
	p.Spec.NodeName = ""
	p.ResourceVersion = ""
	p.Status = v1.PodStatus{Phase: v1.PodPending, ResourceClaimStatuses: p.Status.ResourceClaimStatuses}
}

// podFields are the fields a pod list or watch may select on here, as
// kube-apiserver computes them (pkg/registry/core/pod's
// ToSelectableFields, which works on the internal types): the ones the
// scheduler and Berth's plugins select on, and the common others.
func podFields(p *v1.Pod) fields.Set {
	return fields.Set{
		"metadata.name":            p.Name,
		"metadata.namespace":       p.Namespace,
		"spec.nodeName":            p.Spec.NodeName,
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"status.phase":             string(p.Status.Phase),
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// fieldSelector parses a list or watch's field selector; nil selects all.
func fieldSelector(restrictions clienttesting.ListRestrictions) fields.Selector {
	if restrictions.Fields == nil || restrictions.Fields.Empty() {
		return nil
	}
	return restrictions.Fields
}

// listPodsByField answers a pod list with a field selector from the tracker,
// filtered as kube-apiserver filters it.
func listPodsByField(c *Clients) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		la, ok := action.(clienttesting.ListAction)
		if !ok {
			return false, nil, nil
		}
		sel := fieldSelector(la.GetListRestrictions())
		if sel == nil {
			return false, nil, nil
		}
		obj, err := c.Kube.Tracker().List(v1.SchemeGroupVersion.WithResource("pods"), v1.SchemeGroupVersion.WithKind("Pod"), la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*v1.PodList)
		out := &v1.PodList{ListMeta: list.ListMeta}
		labels := la.GetListRestrictions().Labels
		for i := range list.Items {
			p := &list.Items[i]
			if sel.Matches(podFields(p)) && (labels == nil || labels.Matches(k8slabels.Set(p.Labels))) {
				out.Items = append(out.Items, *p)
			}
		}
		return true, out, nil
	}
}

// watchPodsByField answers a pod watch with a field selector with the
// tracker's watch, filtered.
func watchPodsByField(c *Clients) clienttesting.WatchReactionFunc {
	return func(action clienttesting.Action) (bool, watch.Interface, error) {
		wa, ok := action.(clienttesting.WatchAction)
		if !ok {
			return false, nil, nil
		}
		r := wa.GetWatchRestrictions()
		sel := fieldSelector(clienttesting.ListRestrictions{Labels: r.Labels, Fields: r.Fields})
		if sel == nil {
			return false, nil, nil
		}
		w, err := c.Kube.Tracker().Watch(v1.SchemeGroupVersion.WithResource("pods"), wa.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			p, ok := e.Object.(*v1.Pod)
			return e, !ok || sel.Matches(podFields(p)) && (r.Labels == nil || r.Labels.Matches(k8slabels.Set(p.Labels)))
		}), nil
	}
}
