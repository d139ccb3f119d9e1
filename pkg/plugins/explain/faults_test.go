package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/podupdate"
	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// claimCheck rejects in PreFilter, as VolumeBinding rejects a pod whose
// claim does not exist.
type claimCheck struct{}

func (claimCheck) Name() string { return "VolumeBinding" }
func (claimCheck) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, `persistentvolumeclaim "data" not found`)
}
func (claimCheck) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Item 9 of issue #26: a pod that a PreFilter plugin before Explain rejects
// (the framework's PreFilter loop stops there, so Explain's PreFilter never
// runs) is explained all the same, naming the plugin and its message.
func TestPodRejectedInPreFilterBeforeExplainIsExplained(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("claims", "1")
	before := []tf.RegisterPluginFunc{tf.RegisterPreFilterPlugin("VolumeBinding", func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return claimCheck{}, nil
	})}
	s := newSimWith(t, nil, before, nodes, pods, pod)
	if out := s.schedule(pod); out.node != "" {
		t.Fatalf("placed on %s", out.node)
	}
	r := s.result(pod)
	want := []Rejection{{Plugin: "VolumeBinding", Nodes: 5, Reasons: []ReasonCount{{Reason: `persistentvolumeclaim "data" not found`, Nodes: 5}}}}
	if r.Outcome != OutcomePending || !cmp.Equal(want, r.Rejections) {
		t.Errorf("result %+v; rejections (-want,+got):\n%s", r, cmp.Diff(want, r.Rejections))
	}
}

// Item 11 of issue #26: with redactNodes, no name of a node other than the
// pod's own appears anywhere in the result, and a name is replaced only as a
// whole word (gpu-1 redacted leaves gpu-10 alone when gpu-10 is kept, and
// never yields "(redacted)0").
func TestRedactNodesEverywhere(t *testing.T) {
	nodes := []*v1.Node{mkNode("gpu-1", "4", "8Gi"), mkNode("gpu-10", "4", "8Gi"), mkNode("cpu-2", "4", "8Gi")}
	s := newSim(t, &config.ExplainArgs{TopNodes: 3, RedactNodes: true}, nodes, nil)
	snapshotNodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{
		Placed: &Placed{Node: "gpu-10", Top: []NodeScore{{Node: "gpu-10", Total: 90}, {Node: "gpu-1", Total: 80}, {Node: "cpu-2", Total: 10}}},
		Rejections: []Rejection{{Plugin: "AdmissionFeedback", Nodes: 1, Reasons: []ReasonCount{
			{Reason: "node gpu-1 refused pod default/web-1 (gpu-1: OutOfcpu); see gpu-10", Nodes: 1},
		}}},
		Nearest: []Nearest{{Node: "cpu-2", Plugin: "NodeResourcesFit", Short: map[string]string{"cpu": "1"}}},
	}
	s.pl.redact(r, snapshotNodes, sets.New("gpu-10"))
	wantReason := "node (redacted) refused pod default/web-1 ((redacted): OutOfcpu); see gpu-10"
	if got := r.Rejections[0].Reasons[0].Reason; got != wantReason {
		t.Errorf("reason %q, want %q", got, wantReason)
	}
	var top []string
	for _, n := range r.Placed.Top {
		top = append(top, n.Node)
	}
	if want := []string{"gpu-10", redacted, redacted}; !slices.Equal(top, want) {
		t.Errorf("top nodes %v, want %v: only the pod's own node is named", top, want)
	}
	if r.Nearest[0].Node != redacted {
		t.Errorf("nearest node %q, want it redacted", r.Nearest[0].Node)
	}
}

// Item 12 of issue #26: annotating a pending pod to ask for an explanation
// must bring it back for a cycle soon (an annotation-only update requeues
// nothing by itself): Explain activates it.
func TestAskingActivatesAPendingPod(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("late", "15")
	delete(pod.Annotations, AnnotationRequest)
	s := newSim(t, nil, nodes, pods, pod)
	factory := s.f.SharedInformerFactory()
	factory.Start(s.ctx.Done())
	factory.WaitForCacheSync(s.ctx.Done())
	asked := pod.DeepCopy()
	asked.Annotations = map[string]string{AnnotationRequest: "true"}
	if _, err := s.cs.CoreV1().Pods(pod.Namespace).Update(s.ctx, asked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(s.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Contains(s.rec.Activated(), "default/late"), nil
	}); err != nil {
		t.Errorf("activated %v after the pod asked for an explanation, want default/late", s.rec.Activated())
	}
	// The queue may hand the cycle the object from before the annotation
	// (informers call the queue's handler and Explain's in no fixed order):
	// the pod is explained all the same.
	if out := s.schedule(pod); out.node != "" {
		t.Fatalf("placed on %s", out.node)
	}
	if r := s.result(pod); r.Outcome != OutcomePending {
		t.Errorf("result %+v, want the pending pod explained", r)
	}
}

// The annotations Explain reads and writes are the ones other plugins' hints
// recognise as Berth's own writes (podupdate).
func TestAnnotationsAreBerths(t *testing.T) {
	for _, a := range []string{AnnotationRequest, AnnotationResult} {
		if !strings.HasPrefix(a, podupdate.AnnotationPrefix) {
			t.Errorf("%s lacks the prefix %s", a, podupdate.AnnotationPrefix)
		}
	}
}

// Item 11 of issue #26: any pod author can ask, and an explanation is
// computed inside the scheduling cycle: maxPerMinute bounds them per profile,
// counting the pods turned away; they are scheduled all the same.
func TestBudgetBoundsExplanations(t *testing.T) {
	nodes, pods := cluster()
	// Three namespaces: each namespace's share (one a minute here) is
	// TestANamespaceSpendsItsShareOfTheBudget's.
	asking3, objs := askingInTeams(3)
	s := newSim(t, &config.ExplainArgs{TopNodes: 5, MaxPerMinute: 2}, nodes, pods, objs...)
	before := skippedOverBudget(t)
	for _, p := range asking3 {
		s.schedule(p)
	}
	s.result(asking3[0])
	s.result(asking3[1])
	if got := skippedOverBudget(t) - before; got != 1 {
		t.Errorf("skipped{budget} grew by %v, want 1 (the third pod in the minute)", got)
	}
	// A pending pod is retried every backoff: within a minute its
	// explanation is not renewed, and no budget is spent on it.
	s.schedule(asking3[0])
	s.schedule(asking3[0])
	if got := skippedOverBudget(t) - before; got != 1 {
		t.Errorf("skipped{budget} grew by %v after two retries of an explained pending pod, want still 1", got)
	}
	p, err := s.cs.CoreV1().Pods("team-2").Get(s.ctx, "huge-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Annotations[AnnotationResult]; ok {
		t.Errorf("the third pod was explained over a budget of 2 a minute")
	}
	metricstest.ExpectSeries(t, "berth_explain_skipped_total", "reason", skippedBudget)
}

// askingInTeams is n pods that ask and fit no node, huge-i in namespace
// team-i, and the same as objects for the fake clientset.
func askingInTeams(n int) ([]*v1.Pod, []runtime.Object) {
	var pods []*v1.Pod
	var objs []runtime.Object
	for i := range n {
		p := asking(fmt.Sprintf("huge-%d", i), "40")
		p.Namespace = fmt.Sprintf("team-%d", i)
		pods = append(pods, p)
		objs = append(objs, p)
	}
	return pods, objs
}

// skippedOverBudget is berth_explain_skipped_total{reason="budget"}.
func skippedOverBudget(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(skipped.WithLabelValues(skippedBudget))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The budget is a rate: a pod refused over it is explained at its first
// attempt after the budget refilled (the soak's 6-explain exempts a refused
// pod on Explain's word, so a budget that never refills is this test's to
// catch).
func TestARefusedPodIsExplainedOnceTheBudgetRefills(t *testing.T) {
	nodes, pods := cluster()
	asking3, objs := askingInTeams(3)
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s := newSimClock(t, &config.ExplainArgs{TopNodes: 5, MaxPerMinute: 2}, now, nil, nodes, pods, objs...)
	for _, p := range asking3 {
		s.schedule(p)
	}
	s.result(asking3[1])
	refused := func() bool {
		p, err := s.cs.CoreV1().Pods("team-2").Get(s.ctx, "huge-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := p.Annotations[AnnotationResult]
		return !ok
	}
	if !refused() {
		t.Fatal("the third pod was explained over a budget of 2 a minute")
	}
	offset.Store(int64(time.Minute))
	s.schedule(asking3[2])
	if r := s.result(asking3[2]); r.Outcome != OutcomePending {
		t.Errorf("after a minute the refused pod's explanation says %q, want %q", r.Outcome, OutcomePending)
	}
}

// Found by the soak (seed 1, invariant 6): a placed pod's explanation was
// queued at Reserve for an asynchronous write, so the pod could be bound
// first, and a leader that exited in between (its lease lost as the API
// came back) left the pod bound and unexplained for good: the next leader
// does not explain bound pods. The explanation of a placement is written in
// the binding cycle before the bind (PreBind): when the binding cycle
// reaches Bind, the annotation is there, however slow the API server.
func TestPlacedExplanationIsWrittenBeforeBind(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("placed", "1")
	s := newSim(t, nil, nodes, pods, pod)
	// A slow API server: every pod patch takes 300ms.
	s.cs.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		time.Sleep(300 * time.Millisecond)
		return false, nil, nil
	})
	out := s.schedule(pod)
	if out.node == "" {
		t.Fatal("not placed")
	}
	// schedule ran the binding cycle's PreBind: no waiting here.
	p, err := s.cs.CoreV1().Pods(pod.Namespace).Get(s.ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Annotations[AnnotationResult]; !ok {
		t.Fatalf("the binding cycle reached Bind before %s was written", AnnotationResult)
	}
}

// gate rejects the pods it is closed for, as a node that fills up and frees
// again would.
type gate struct{ closed *sync.Map }

func (gate) Name() string { return "Gate" }
func (g gate) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeInfo) *fwk.Status {
	if _, ok := g.closed.Load(pod.Name); ok {
		return fwk.NewStatus(fwk.Unschedulable, "gate closed")
	}
	return nil
}

// Found by the cold CI run of the demo at 09d1105 (a gang member bound,
// "pods not settled": its latest Explained event still said pending): a
// pending pod's explanation waits in the writer's queue, and the pod's
// placement, explained in a later cycle, is written at once in its binding
// cycle; the queued explanation was written after it, so the bound pod was
// left with a pending explanation (annotation and latest event) for good.
// An explanation older than the pod's placement is never written, whether
// the placement is explained or not (here: the pod stopped asking; over
// the budget and a failed explanation are the same for the writer).
func TestPendingExplanationNeverOverwritesAPlacement(t *testing.T) {
	for _, explained := range []bool{true, false} {
		t.Run(fmt.Sprintf("placement explained %v", explained), func(t *testing.T) {
			nodes, pods := cluster()
			busy, late, sentinel := asking("busy-writer", "100"), asking("late", "1"), asking("sentinel", "100")
			closed := &sync.Map{}
			before := []tf.RegisterPluginFunc{tf.RegisterFilterPlugin("Gate", func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
				return gate{closed: closed}, nil
			})}
			s := newSimWith(t, nil, before, nodes, pods, busy, late, sentinel)
			// The writer is busy: its first event, busy-writer's, is held
			// until released, so what is queued behind it waits.
			entered, release := make(chan struct{}), make(chan struct{})
			var opened, released sync.Once
			open := func() { released.Do(func() { close(release) }) }
			t.Cleanup(open) // a failed test does not leave the writer held
			s.rec.BeforeEvent(func(regarding runtime.Object) {
				if p, ok := regarding.(*v1.Pod); ok && p.Name == busy.Name {
					opened.Do(func() { close(entered) })
					<-release
				}
			})
			if out := s.schedule(busy); out.node != "" {
				t.Fatalf("%s placed on %s", busy.Name, out.node)
			}
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s's explanation never reached the event recorder", busy.Name)
			}
			closed.Store(late.Name, struct{}{})
			if out := s.schedule(late); out.node != "" {
				t.Fatalf("%s placed on %s with the gate closed", late.Name, out.node)
			}
			closed.Delete(late.Name)
			placing := late
			if !explained {
				placing = late.DeepCopy()
				delete(placing.Annotations, AnnotationRequest)
			}
			out := s.schedule(placing) // an explained placement is written in PreBind
			if out.node == "" {
				t.Fatalf("%s not placed with the gate open", late.Name)
			}
			if explained {
				if r := s.result(late); r.Outcome != OutcomePlaced {
					t.Fatalf("after PreBind, %s's explanation is %q, want %q", late.Name, r.Outcome, OutcomePlaced)
				}
			}
			// The sentinel is queued last: once it is written, the queue is
			// drained.
			if out := s.schedule(sentinel); out.node != "" {
				t.Fatalf("%s placed on %s", sentinel.Name, out.node)
			}
			open()
			s.result(sentinel)
			p, err := s.cs.CoreV1().Pods(late.Namespace).Get(s.ctx, late.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			raw, written := p.Annotations[AnnotationResult]
			if explained != written {
				t.Errorf("bound to %s, %s has an explanation: %v, want %v (%s)", out.node, late.Name, written, explained, raw)
			}
			if written {
				if r := s.result(late); r.Outcome != OutcomePlaced || r.Placed == nil || r.Placed.Node != out.node {
					t.Errorf("bound to %s, %s's explanation is %+v: the queued pending one overwrote the placement", out.node, late.Name, r)
				}
			}
			want := 2 // busy-writer's and the sentinel's
			if explained {
				want++
			}
			var lateEvents []string
			for _, e := range s.events(want) {
				if strings.Contains(e, " "+late.Name+": ") {
					lateEvents = append(lateEvents, e)
				}
			}
			switch n := len(lateEvents); {
			case !explained && n > 0:
				t.Errorf("%s, placed unexplained, has events from before its placement: %q", late.Name, lateEvents)
			case explained && (n != 1 || !strings.Contains(lateEvents[0], ": placed on "+out.node)):
				t.Errorf("%s's events, placed on %s: %q, want its placement only", late.Name, out.node, lateEvents)
			}
		})
	}
}

// Issue 51, item 9: a name followed or led by '.', '/' or '=' is a name all
// the same (a reason may quote "node=gpu-1" or a path "nodes/gpu-1/"); a
// dotted node name is replaced whole; gpu-10 keeps its name beside a
// redacted gpu-1, and what follows a redacted name after a dot stays.
func TestRedactWordsEveryOccurrence(t *testing.T) {
	names := sets.New("gpu-1", "ip-10-0-0-1.ec2.internal", "b")
	for _, tc := range []struct{ in, want string }{
		{"node gpu-1.", "node (redacted)."},
		{"nodes/gpu-1/status", "nodes/(redacted)/status"},
		{"node=gpu-1,zone=a", "node=(redacted),zone=a"},
		{"kubernetes.io/hostname=gpu-1", "kubernetes.io/hostname=(redacted)"},
		{"on ip-10-0-0-1.ec2.internal: full", "on (redacted): full"},
		{"ip-10-0-0-1.ec2.internal.", "(redacted)."},
		{"gpu-10 and gpu-1.pool and gpu-1x", "gpu-10 and (redacted).pool and gpu-1x"},
		{"gpu-1_x GPU-1 gpu-1:", "(redacted)_x GPU-1 (redacted):"},
		// A one-letter name redacts the word, not every letter b.
		{"b is busy: 0/3 nodes", "(redacted) is busy: 0/3 nodes"},
	} {
		if got := redactWords(tc.in, names); got != tc.want {
			t.Errorf("redactWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Issue 51, item 9: one namespace cannot spend the profile's whole budget.
// While more than half is left any namespace takes from it; the last half is
// taken in shares of a quarter of maxPerMinute per namespace.
func TestANamespaceSpendsItsShareOfTheBudget(t *testing.T) {
	s := newSim(t, &config.ExplainArgs{TopNodes: 3, MaxPerMinute: 8}, nil, nil)
	pod := func(ns, name string) *v1.Pod {
		return st.MakePod().Namespace(ns).Name(name).UID(ns + "/" + name).Obj()
	}
	got := 0
	for i := range 8 {
		if s.pl.withinBudget(s.ctx, pod("greedy", fmt.Sprintf("p%d", i)), explainingPending) {
			got++
		}
	}
	if got != 6 {
		t.Errorf("one namespace got %d of a budget of 8 at once, want 6: the first half and its share of the rest", got)
	}
	for i := range 2 {
		if !s.pl.withinBudget(s.ctx, pod("team", fmt.Sprintf("p%d", i)), explainingPending) {
			t.Errorf("team's explanation %d refused: the greedy namespace spent what was its share", i)
		}
	}
	if s.pl.withinBudget(s.ctx, pod("team-2", "p"), explainingPending) {
		t.Error("the profile's budget of 8 was exceeded")
	}
}

// Issue 51, item 6: a PodGroup cycle, and ElasticQuota's pod-group
// preemption (which reserves the placed members again for every victim it
// tries), call Reserve on a member's state many times in one cycle. The
// member is explained, and charged, once per node and cycle state; the
// binding's Reserve keeps that explanation without charging again.
func TestAGroupTryIsExplainedOnceAndChargedOnce(t *testing.T) {
	nodes, pods := cluster()
	p := asking("member", "1")
	s := newSim(t, &config.ExplainArgs{TopNodes: 3, MaxPerMinute: 8}, nodes, pods, p)
	state := framework.NewCycleState()
	state.SetPodGroupSchedulingCycle(framework.NewCycleState())
	if _, st := s.pl.PreFilter(s.ctx, state, p, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	before := s.pl.budget.Tokens()
	var first *item
	for i := range 5 {
		s.pl.Reserve(s.ctx, state, p, "big")
		tried := explaining(state).tried
		if tried == nil {
			t.Fatalf("try %d: no explanation", i)
		}
		if i == 0 {
			first = tried
		} else if tried != first {
			t.Errorf("try %d on the same node computed the explanation again", i)
		}
		s.pl.Unreserve(s.ctx, state, p, "big")
	}
	if spent := before - s.pl.budget.Tokens(); spent < 0.5 || spent > 1.5 {
		t.Errorf("the group's five tries on one node spent %.1f of the budget, want 1", spent)
	}
	// The binding's Reserve keeps the try's explanation, charging nothing more.
	state.SetPodGroupSchedulingCycle(nil)
	s.pl.Reserve(s.ctx, state, p, "big")
	if explaining(state).placed == nil {
		t.Fatal("the binding's Reserve kept no explanation")
	}
	if spent := before - s.pl.budget.Tokens(); spent < 0.5 || spent > 1.5 {
		t.Errorf("the tries and the kept explanation cost %.1f of the budget, want 1", spent)
	}
}

// A review of the soak's per-pod oracle: a try the budget refused was
// refused again (counted in skipped{budget}, and logged) at every Reserve of
// the same cycle state on the same node, a count per victim ElasticQuota's
// pod-group preemption tries. It is refused once per node and cycle state,
// as a try is explained once.
func TestAGroupTryRefusedOverBudgetIsCountedOnce(t *testing.T) {
	nodes, pods := cluster()
	p := asking("member", "1")
	s := newSim(t, &config.ExplainArgs{TopNodes: 3, MaxPerMinute: 1}, nodes, pods, p)
	if !s.pl.budget.Allow() {
		t.Fatal("the budget of 1 a minute was spent before the test")
	}
	state := framework.NewCycleState()
	state.SetPodGroupSchedulingCycle(framework.NewCycleState())
	if _, st := s.pl.PreFilter(s.ctx, state, p, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	before := skippedOverBudget(t)
	for range 5 {
		s.pl.Reserve(s.ctx, state, p, "big")
		if explaining(state).tried != nil {
			t.Fatal("a try was explained over a spent budget")
		}
		s.pl.Unreserve(s.ctx, state, p, "big")
	}
	if got := skippedOverBudget(t) - before; got != 1 {
		t.Errorf("five tries on one node over the budget counted %v skips, want 1", got)
	}
}

// Found by the soak's control at 200 nodes (invariant 6): a pod explained
// as pending, then placed while the budget was spent, kept its Pending
// explanation once bound. Its placement is recorded unexplained (nothing is
// computed), so the pod's explanation names the node it is bound to.
func TestAPendingPodPlacedOverBudgetIsNotLeftPending(t *testing.T) {
	nodes, pods := cluster()
	huge := asking("grows-smaller", "40")
	s := newSim(t, &config.ExplainArgs{TopNodes: 5, MaxPerMinute: 1}, nodes, pods, huge)
	s.schedule(huge)
	if r := s.result(huge); r.Outcome != OutcomePending {
		t.Fatalf("first cycle: %s, want pending", r.Outcome)
	}
	// The same pod, now fitting (resized, say): placed with the budget spent.
	fits := huge.DeepCopy()
	fits.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
	s.schedule(fits)
	if err := wait.PollUntilContextTimeout(s.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r := s.result(fits)
		return r.Outcome == OutcomePlaced && r.Placed != nil && r.Placed.Node != "" && r.Placed.Unexplained != "", nil
	}); err != nil {
		t.Errorf("placed over budget: the explanation still says %+v, want the placement (unexplained)", s.result(fits))
	}
}

// Found by the 30-minute soak (invariant 6): a pod that asks and is placed
// while the budget is spent had no answer at all. It gets its placement,
// unexplained.
func TestAnAskingPodPlacedOverBudgetHasItsNode(t *testing.T) {
	nodes, pods := cluster()
	first, second := asking("first", "1"), asking("second", "1")
	s := newSim(t, &config.ExplainArgs{TopNodes: 5, MaxPerMinute: 1}, nodes, pods, first, second)
	s.schedule(first)
	s.schedule(second)
	if r := s.result(first); r.Placed == nil || r.Placed.Unexplained != "" {
		t.Errorf("first (within budget): %+v, want an explained placement", r.Placed)
	}
	if r := s.result(second); r.Placed == nil || r.Placed.Node == "" || r.Placed.Unexplained != notExplainedOverBudget {
		t.Errorf("second (over budget): %+v, want its node, unexplained", r.Placed)
	}
}
