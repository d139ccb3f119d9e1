package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The foreign binder plays what ConfirmBinder exists for: another binder
// beside Berth (a second scheduler, a user or controller setting
// spec.nodeName). While a gang member waits at Permit, its node is in its
// status.nominatedNodeName (upstream's NominatedNodeNameForExpectation, on
// by default since 1.35); the foreign binder then binds a pod of its own to
// that node, taking all the CPU the API shows free there. Berth's view
// still has the room: ConfirmBinder (confirm: Always, the chart's default
// beside another binder) must refuse the member's binding when its gang is
// released. A node the member overcommits is a violation (1); one the
// foreign pod overcommits (it arrived last: a Berth binding landed between
// this binder's read and its write) is the kubelet's to refuse and is
// counted, not judged (checkOvercommit).
//
// Unlike the generator, what it does depends on the cluster's state (which
// members wait, and where): a seed does not replay it exactly. Its own
// random stream keeps the generator's replayable.

const (
	// foreignLabel marks the foreign binder's pods.
	foreignLabel = "soak.berth.dev/foreign"
	// foreignEvery: how often it looks for a waiting member (and times the
	// API, see probe).
	foreignEvery = 500 * time.Millisecond
	// foreignGap: at most one foreign pod this often.
	foreignGap = time.Second
	// waitedAtPermit: how long a member must have waited with its node
	// nominated to be one waiting at Permit.
	waitedAtPermit = 500 * time.Millisecond
	// raceSlack: a member bound this soon after the foreign pod on its node
	// may have been confirmed before the foreign pod existed (ConfirmBinder
	// lists the node's pods, then binds): a race, counted, not judged. The
	// window grows by the API's latency at the time (raceWindow).
	raceSlack = 2 * time.Second
	// latencyAround: how far from a binding a probe's latency stretches its
	// race window.
	latencyAround = 15 * time.Second
	// outsideWindow: why a binding is judged by the time window.
	outsideWindow = "bound outside the race window of the foreign pod (judged by time: the audit log could not judge it)"
	// auditWait: how long a binding may take to appear in the audit log
	// before the time window judges it instead.
	auditWait = time.Minute
	// keepLatencies: how long a probe's sample is kept (a verdict is taken
	// latencyAround after a binding, or later while the watcher lagged).
	keepLatencies = 10 * time.Minute
)

type foreignBinder struct {
	c    kubernetes.Interface
	w    *watcher
	rng  *rand.Rand
	seq  int
	last time.Time // the last foreign pod's creation
}

func newForeignBinder(seed int64, c kubernetes.Interface, w *watcher) *foreignBinder {
	return &foreignBinder{c: c, w: w, rng: rand.New(rand.NewPCG(uint64(seed), 0xf0e))}
}

// step binds one foreign pod beside one waiting member, if any waits, and
// deletes the foreign pods that finished.
func (f *foreignBinder) step(ctx context.Context, logf func(string, ...any)) {
	waiting, finished := f.w.waitingPods()
	for _, p := range finished {
		if err := f.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); ignoreNotFound(err) != nil && ctx.Err() == nil {
			logf("foreign binder: deleting %s: %v", p.Name, err)
		}
	}
	if len(waiting) == 0 || time.Since(f.last) < foreignGap {
		// Time the API anyway: what a confirmation costs now.
		if node := f.w.anyNode(f.rng); node != "" {
			if _, err := f.freeCPU(ctx, node); err != nil && ctx.Err() == nil {
				logf("foreign binder: timing the API on node %s: %v", node, err)
			}
		}
		return
	}
	m := waiting[f.rng.IntN(len(waiting))]
	node := m.Status.NominatedNodeName
	free, err := f.freeCPU(ctx, node)
	if err != nil {
		if ctx.Err() == nil {
			logf("foreign binder: reading node %s: %v", node, err)
		}
		return
	}
	need := podRequests(m)[v1.ResourceCPU]
	// Only where the member still fits: otherwise the member's binding
	// fails for want of room whatever ConfirmBinder does.
	if free.Cmp(need) < 0 || free.IsZero() {
		return
	}
	f.seq++
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "foreign-" + strconv.Itoa(f.seq), Namespace: freeNamespace,
			Labels: map[string]string{foreignLabel: "true"},
			// It outlives the member's wait: a gang waiting for room is
			// often released tens of seconds later.
			Annotations: map[string]string{sandbox.RunForAnnotation: strconv.Itoa(120+f.rng.IntN(120)) + "s"},
		},
		Spec: v1.PodSpec{
			NodeName:      node,
			RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name: "c", Image: "registry.example/soak:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: free}},
			}},
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
		},
	}
	created, err := f.c.CoreV1().Pods(freeNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() == nil {
			logf("foreign binder: binding beside %s/%s on %s: %v", m.Namespace, m.Name, node, err)
		}
		return
	}
	// Stored by the time the create returned: a LIST the API server
	// received after now includes it.
	f.last = time.Now()
	f.w.raced(m, node, created.UID, f.last)
}

// freeCPU is the node's allocatable CPU less its active pods' requests, as
// the API has them now. Its reads are ConfirmBinder's (a node GET, a LIST
// of the node's pods): their latency is recorded (probe).
func (f *foreignBinder) freeCPU(ctx context.Context, node string) (resource.Quantity, error) {
	start := time.Now()
	defer func() { f.w.probe(start, time.Since(start)) }()
	n, err := f.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return resource.Quantity{}, err
	}
	pods, err := f.c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return resource.Quantity{}, err
	}
	free := n.Status.Allocatable.Cpu().DeepCopy()
	for i := range pods.Items {
		if p := &pods.Items[i]; !terminal(p) {
			free.Sub(podRequests(p)[v1.ResourceCPU])
		}
	}
	if free.Sign() < 0 {
		return resource.Quantity{}, nil
	}
	return free, nil
}

// waitingPods: pods that have waited with a node nominated and not bound
// for at least waitedAtPermit: a gang member at Permit, a pod whose PreBind
// (Explain's write) or whose confirmation is slow (upstream nominates the
// node of a binding that waits on Permit or PreBind), a preemptor waiting
// for its victims; a pod that can never be bound (a never-starting gang's)
// excepted. And the foreign pods that finished.
func (w *watcher) waitingPods() (waiting, finished []*v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		switch {
		case p.Labels[foreignLabel] != "":
			if terminal(p) && p.DeletionTimestamp == nil {
				finished = append(finished, p)
			}
		case p.Labels[misfitLabel] == "" && p.Spec.NodeName == "" && p.DeletionTimestamp == nil:
			if since, ok := w.nominatedSince[p.UID]; ok && now.Sub(since) >= waitedAtPermit {
				waiting = append(waiting, p)
			}
		}
	}
	return waiting, finished
}

// raced records a foreign binding beside a waiting member on node: every
// gang with a member waiting on that node may stay partial while its
// refused member finds another node.
func (w *watcher) raced(m *v1.Pod, node string, foreign types.UID, stored time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.foreignStored[foreign] = stored
	w.foreignPins++
	w.pins[m.UID] = node
	for _, o := range w.pods.List() {
		if p := o.(*v1.Pod); p.Spec.NodeName == "" && p.Status.NominatedNodeName == node && gangKey(p) != "" {
			w.groupRaced[gangKey(p)] = now
		}
	}
}

// pinnedBound: a member the foreign binder raced is bound, on the raced
// node (ConfirmBinder let it bind there: the overcommit invariant judges
// it) or elsewhere (its binding there was refused, or its gang was
// rejected and tried again).
func (w *watcher) pinnedBound(p *v1.Pod) {
	node, ok := w.pins[p.UID]
	if !ok {
		return
	}
	delete(w.pins, p.UID)
	if p.Spec.NodeName == node {
		w.foreignSameNode++
	} else {
		w.foreignElsewhere++
	}
}

// nominated keeps when each unbound pod's nominated node was first seen,
// and when a nomination that did not end in a bind was last seen.
func (w *watcher) nominated(old, p *v1.Pod) {
	switch {
	case p.Spec.NodeName != "":
		delete(w.nominatedSince, p.UID)
		delete(w.nominationEnded, p.UID)
	case p.Status.NominatedNodeName == "":
		if _, ok := w.nominatedSince[p.UID]; ok {
			w.nominationEnded[p.UID] = time.Now()
		}
		delete(w.nominatedSince, p.UID)
	case old == nil || old.Status.NominatedNodeName != p.Status.NominatedNodeName:
		w.nominatedSince[p.UID] = time.Now()
	}
}

// nominatedAround: p was pending with a node nominated at some time in
// [t-window, now] (a gang member held at Permit is reserved, and counts in
// its quota's use, until it is released; its nomination is cleared then).
func (w *watcher) nominatedAround(p *v1.Pod, t time.Time, window time.Duration) bool {
	if p.Status.NominatedNodeName != "" {
		return true
	}
	ended, ok := w.nominationEnded[p.UID]
	return ok && !ended.Before(t.Add(-window))
}

// foreignOverrun reports whether a foreign pod's arrival took node's r over
// alloc: walking the node's active pods in the order this watcher saw them
// bound, the first to exceed alloc is a foreign pod (a kubelet refuses such
// a pod: OutOfcpu; KWOK's does not), or a Berth pod bound within the race
// window of a foreign pod (raceWindow, which a fault that slows or holds
// the replicas' path widens). A relist (an API server restart) replays pods in key
// order, so pods bound before one are ordered as first seen after it.
//
// A Berth pod's verdict waits until latencyAround has passed since its
// binding (the reads timed around it are in), then stands: the samples
// that made it age out, and a race must not turn into an overcommit while
// the foreign pod lives (later: not judged yet).
func (w *watcher) foreignOverrun(node string, r v1.ResourceName, alloc resource.Quantity) (foreign bool, who string, later bool) {
	var pods []*v1.Pod
	total := resource.Quantity{}
	for _, o := range w.pods.List() {
		if p := o.(*v1.Pod); p.Spec.NodeName == node && active(p) {
			pods = append(pods, p)
			total.Add(podRequests(p)[r])
		}
	}
	// The informer's store moves between the usage the check read and this
	// second read: a pod that ended or left in between leaves the node
	// within its room, and the overrun is judged again at the next check
	// (or not at all), never called a violation on a read that shows none.
	if total.Cmp(alloc) <= 0 {
		return false, "", true
	}
	sortByBound(pods, w.boundAt)
	for _, p := range pods {
		foreign = foreign || p.Labels[foreignLabel] != ""
	}
	if !foreign {
		return false, "no foreign pod on the node: " + w.boundOrder(pods), false
	}
	sum := resource.Quantity{}
	var lastForeign time.Time
	var lastForeignUID types.UID
	for _, p := range pods {
		if p.Labels[foreignLabel] != "" {
			lastForeign, lastForeignUID = w.boundAt[p.UID], p.UID
		}
		q := podRequests(p)[r]
		sum.Add(q)
		if sum.Cmp(alloc) > 0 {
			who := fmt.Sprintf("%s/%s", p.Namespace, p.Name)
			if p.Labels[foreignLabel] != "" {
				return true, who, false
			}
			if lastForeign.IsZero() {
				return false, who, false
			}
			v, decided := w.raceVerdicts[p.UID]
			if !decided {
				bound := w.boundAt[p.UID]
				stored := w.foreignStored[lastForeignUID]
				// The API server's audit log first: exact (audit.go).
				v.race, decided, v.why = w.audit.auditVerdict(p.UID, node, stored)
				// Else the time window, once the reads around the binding
				// are timed: without an audit log, without the foreign
				// pod's creation time (its create returned an error), or
				// when the log was read well past the binding without it
				// (a restart lost it); the log may still bring it until
				// auditWait.
				byWindow := w.audit == nil || stored.IsZero() || w.audit.lacks(p.UID, bound, 10*time.Second) || time.Since(bound) >= auditWait
				switch {
				case decided:
				case !byWindow || time.Since(bound) < latencyAround:
					return false, who, true
				default:
					v = raceVerdict{race: bound.Sub(lastForeign) < w.raceWindow(bound), why: outsideWindow}
				}
				w.raceVerdicts[p.UID] = v
			}
			if v.race {
				return true, who + " (a race)", false
			}
			return false, who + ": " + v.why, false
		}
	}
	return false, "never over in bound order: " + w.boundOrder(pods), false
}

// boundOrder lists pods as the judge ordered them, for a violation's
// message: name, requests, when this watcher saw each bound.
func (w *watcher) boundOrder(pods []*v1.Pod) string {
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		at := "not seen bound"
		if t, ok := w.boundAt[p.UID]; ok {
			at = t.UTC().Format("15:04:05.000")
		}
		req := podRequests(p)[v1.ResourceCPU]
		parts = append(parts, fmt.Sprintf("%s/%s cpu %s bound %s", p.Namespace, p.Name, req.String(), at))
	}
	return strings.Join(parts, ", ")
}

// raceVerdict: whether a Berth pod's overcommit beside a foreign pod was a
// race, and if not, why.
type raceVerdict struct {
	race bool
	why  string
}

// sortByBound orders pods by when this watcher saw each bound (pods it saw
// bound at its start, before it recorded any, first).
func sortByBound(pods []*v1.Pod, boundAt map[types.UID]time.Time) {
	sort.SliceStable(pods, func(i, j int) bool { return boundAt[pods[i].UID].Before(boundAt[pods[j].UID]) })
}

// slowPath marks a fault that delays the replicas' path (slow-api,
// leader-partition) by delay each way beginning or ending; key names the
// fault as its undo timer does (a fault of the same key that begins again
// replaces the one before, whose undo then never runs). A request sent just
// before the end still takes its delays.
func (w *watcher) slowPath(key string, begins bool, delay time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for i := range w.delays {
		if d := &w.delays[i]; d.key == key && d.to.IsZero() {
			d.to = now.Add(d.delay + 10*time.Second)
		}
	}
	if begins {
		w.delays = append(w.delays, delaySpan{key: key, from: now, delay: delay})
	}
}

// delaySpan: the replicas' path delayed by delay each way from from to to
// (zero while it lasts), a request's own delays after the end included.
type delaySpan struct {
	key      string
	from, to time.Time
	delay    time.Duration
}

// slowAt reports whether t fell while the replicas' path was slowed or held.
// Caller holds w.mu.
func (w *watcher) slowAt(t time.Time) bool { return w.delayAt(t) > 0 }

// delayAt is the longest delay each way on the replicas' path at t.
// Caller holds w.mu.
func (w *watcher) delayAt(t time.Time) time.Duration {
	var longest time.Duration
	for _, d := range w.delays {
		if !t.Before(d.from) && (d.to.IsZero() || !t.After(d.to)) && d.delay > longest {
			longest = d.delay
		}
	}
	return longest
}

// probe records how long the API took, at start, to answer ConfirmBinder's
// reads (a node GET and a LIST of its pods); samples older than
// keepLatencies are dropped.
func (w *watcher) probe(start time.Time, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readLatencies = append(w.readLatencies, latencySample{at: start, d: d})
	cut := 0
	for cut < len(w.readLatencies) && start.Sub(w.readLatencies[cut].at) > keepLatencies {
		cut++
	}
	w.readLatencies = w.readLatencies[cut:]
	if d > w.maxLatency {
		w.maxLatency = d
	}
}

type latencySample struct {
	at time.Time
	d  time.Duration
}

// raceWindow: how long after a foreign pod a Berth binding at t may still
// have been confirmed before that pod existed. ConfirmBinder's LIST is read
// at the API server, its answer travels back, and the binding it then
// posts travels there: under load (a starved API server at 1,000 nodes)
// those take seconds, and a fault that delays the replicas' path
// (slow-api, leader-partition) adds its delay each way. So the window is
// raceSlack, plus twice the slowest read timed within latencyAround of t,
// plus twice the path's delay at t. A foreign pod that was there well
// before the LIST (a member held at Permit, a pod whose PreBind or
// confirmation waits on a slow path) is outside it: a binding onto its
// room is the scheduler's overcommit.
// Caller holds w.mu.
func (w *watcher) raceWindow(t time.Time) time.Duration {
	var slowest time.Duration
	for _, s := range w.readLatencies {
		if s.at.After(t.Add(-latencyAround)) && s.at.Before(t.Add(latencyAround)) && s.d > slowest {
			slowest = s.d
		}
	}
	return raceSlack + 2*slowest + 2*w.delayAt(t)
}

// anyNode: a node to time the API on.
func (w *watcher) anyNode(rng *rand.Rand) string {
	keys := w.nodes.ListKeys()
	if len(keys) == 0 {
		return ""
	}
	return keys[rng.IntN(len(keys))]
}
