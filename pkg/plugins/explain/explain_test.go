package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/pluginclock"
	"github.com/berth-scheduler/berth/internal/testing/handletest"
)

func init() {
	schedmetrics.Register()
}

// filterCalls counts Filter calls of the counting plugin, to show that a
// pod that does not ask costs no extra plugin runs.
type countingFilter struct{ calls *atomic.Int64 }

func (c countingFilter) Name() string { return "CountingFilter" }
func (c countingFilter) Filter(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) *fwk.Status {
	c.calls.Add(1)
	return nil
}

// sim is a real framework: NodeResourcesFit (LeastAllocated, weight 1),
// NodeResourcesBalancedAllocation (weight 2), TaintToleration (weight 3), a
// counting filter, and Explain at PreFilter, PreScore, Reserve, PreBind,
// PostFilter.
type sim struct {
	t        testing.TB
	ctx      context.Context
	f        framework.Framework
	snapshot *internalcache.Snapshot
	cs       *clientsetfake.Clientset
	rec      *handletest.Recorder
	filters  atomic.Int64
	pl       *Explain
}

func newSim(t testing.TB, args *config.ExplainArgs, nodes []*v1.Node, pods []*v1.Pod, objs ...runtime.Object) *sim {
	t.Helper()
	return newSimWith(t, args, nil, nodes, pods, objs...)
}

// newSimWith is newSim with more plugins registered before Explain.
func newSimWith(t testing.TB, args *config.ExplainArgs, before []tf.RegisterPluginFunc, nodes []*v1.Node, pods []*v1.Pod, objs ...runtime.Object) *sim {
	t.Helper()
	return newSimClock(t, args, nil, before, nodes, pods, objs...)
}

// newSimClock is newSimWith with the plugin's clock (nil: time.Now).
func newSimClock(t testing.TB, args *config.ExplainArgs, now func() time.Time, before []tf.RegisterPluginFunc, nodes []*v1.Node, pods []*v1.Pod, objs ...runtime.Object) *sim {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if now != nil {
		ctx = pluginclock.With(ctx, now)
	}
	if args == nil {
		args = &config.ExplainArgs{TopNodes: 5}
	}
	s := &sim{t: t, ctx: ctx, cs: clientsetfake.NewClientset(objs...), rec: &handletest.Recorder{}}
	informerFactory := informers.NewSharedInformerFactory(s.cs, 0)
	s.snapshot = internalcache.NewSnapshot(pods, nodes)
	fts := plfeature.Features{}
	registrations := []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		// First: it sees every node (a rejecting filter stops the rest).
		tf.RegisterFilterPlugin("CountingFilter", func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			return countingFilter{calls: &s.filters}, nil
		}),
		tf.RegisterFilterPlugin(nodename.Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return nodename.New(ctx, nil, h, fts)
		}),
		tf.RegisterPluginAsExtensionsWithWeight(noderesources.Name, 1, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
				Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
			}}, h, fts)
		}, "PreFilter", "Filter", "PreScore", "Score"),
		tf.RegisterPluginAsExtensionsWithWeight(noderesources.BalancedAllocationName, 2, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return noderesources.NewBalancedAllocation(ctx, &schedconfig.NodeResourcesBalancedAllocationArgs{
				Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}, h, fts)
		}, "PreScore", "Score"),
		tf.RegisterPluginAsExtensionsWithWeight(tainttoleration.Name, 3, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return tainttoleration.New(ctx, nil, h, fts)
		}, "Filter", "PreScore", "Score"),
	}
	registrations = append(registrations, before...)
	registrations = append(registrations,
		tf.RegisterPluginAsExtensions(Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := New(ctx, args, h)
			if err == nil {
				s.pl = p.(*Explain)
			}
			return p, err
		}, "PreFilter", "PreScore", "Reserve", "PreBind", "PostFilter"))
	f, err := tf.NewFramework(ctx, registrations, "berth",
		frameworkruntime.WithClientSet(s.cs),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
		frameworkruntime.WithSnapshotSharedLister(s.snapshot),
		frameworkruntime.WithEventRecorder(s.rec),
		frameworkruntime.WithPodActivator(s.rec),
	)
	if err != nil {
		t.Fatal(err)
	}
	s.f = f
	return s
}

// cycleOutcome is what the simulated scheduling cycle did.
type cycleOutcome struct {
	node   string
	scores []fwk.NodePluginScores
}

// schedule runs one scheduling cycle as schedule_one.go does: PreFilter,
// Filter on every node, PreScore and Score over the feasible nodes (unless
// one), the best node (lowest name on a tie), Reserve of the assumed pod; or
// PostFilter. The framework has NodeName among its filters, as the default
// profile does.
func (s *sim) schedule(pod *v1.Pod) cycleOutcome {
	s.t.Helper()
	state := framework.NewCycleState()
	nodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		s.t.Fatal(err)
	}
	m := framework.NewDefaultNodeToStatus()
	_, status, _ := s.f.RunPreFilterPlugins(s.ctx, state, pod)
	var feasible []fwk.NodeInfo
	if status.IsSuccess() {
		for _, ni := range nodes {
			if st := s.f.RunFilterPluginsWithNominatedPods(s.ctx, state, pod, ni); st.IsSuccess() {
				feasible = append(feasible, ni)
			} else {
				m.Set(ni.Node().Name, st)
			}
		}
	} else {
		m.SetAbsentNodesStatus(status)
	}
	switch len(feasible) {
	case 0:
		s.f.RunPostFilterPlugins(s.ctx, state, pod, m)
		return cycleOutcome{}
	case 1:
		s.f.RunReservePluginsReserve(s.ctx, state, assumed(pod, feasible[0].Node().Name), feasible[0].Node().Name)
		s.preBind(state, pod, feasible[0].Node().Name)
		return cycleOutcome{node: feasible[0].Node().Name}
	}
	if st := s.f.RunPreScorePlugins(s.ctx, state, pod, feasible); !st.IsSuccess() {
		s.t.Fatal(st)
	}
	scores, st := s.f.RunScorePlugins(s.ctx, state, pod, feasible)
	if !st.IsSuccess() {
		s.t.Fatal(st)
	}
	best := scores[0]
	for _, sc := range scores[1:] {
		if sc.TotalScore > best.TotalScore || (sc.TotalScore == best.TotalScore && sc.Name < best.Name) {
			best = sc
		}
	}
	if st := s.f.RunReservePluginsReserve(s.ctx, state, assumed(pod, best.Name), best.Name); !st.IsSuccess() {
		s.t.Fatal(st)
	}
	s.preBind(state, pod, best.Name)
	return cycleOutcome{node: best.Name, scores: scores}
}

// preBind runs the binding cycle up to Bind, as schedule_one.go does:
// PreBindPreFlight, then PreBind (Permit admits every pod here).
func (s *sim) preBind(state fwk.CycleState, pod *v1.Pod, node string) {
	s.t.Helper()
	p := assumed(pod, node)
	if st := s.f.RunPreBindPreFlights(s.ctx, state, p, node); !st.IsSuccess() && !st.IsSkip() {
		s.t.Fatal(st)
	}
	if st := s.f.RunPreBindPlugins(s.ctx, state, p, node); !st.IsSuccess() {
		s.t.Fatal(st)
	}
}

// assumed is the pod as the scheduler hands it to Reserve: a copy naming
// the chosen node.
func assumed(pod *v1.Pod, node string) *v1.Pod {
	p := pod.DeepCopy()
	p.Spec.NodeName = node
	return p
}

// result waits for the pod's explanation annotation and decodes it.
func (s *sim) result(pod *v1.Pod) *Result {
	s.t.Helper()
	var r *Result
	if err := wait.PollUntilContextTimeout(s.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := s.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		raw, ok := p.Annotations[AnnotationResult]
		if !ok {
			return false, nil
		}
		r = &Result{}
		return true, json.Unmarshal([]byte(raw), r)
	}); err != nil {
		s.t.Fatalf("no explanation on %s: %v", pod.Name, err)
	}
	return r
}

// events waits until Explain has recorded n events and takes them: its writer
// patches the pod's annotation first and records the event after, so the
// annotation result waits for can be there before the event is.
func (s *sim) events(n int) []string {
	s.t.Helper()
	if err := wait.PollUntilContextTimeout(s.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(s.rec.Events()) >= n, nil
	}); err != nil {
		s.t.Fatalf("%d event(s) wanted, have %q: %v", n, s.rec.Events(), err)
	}
	_, evs := s.rec.Take()
	return evs
}

func asking(name, cpu string) *v1.Pod {
	return st.MakePod().Namespace("default").Name(name).UID(name).Annotation(AnnotationRequest, "true").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "1Gi"}).Obj()
}

func mkNode(name, cpu, mem string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: mem, v1.ResourcePods: "110"}).Obj()
}

func cluster() ([]*v1.Node, []*v1.Pod) {
	nodes := []*v1.Node{
		mkNode("big", "16", "32Gi"), mkNode("mid", "8", "32Gi"), mkNode("small", "2", "4Gi"), mkNode("busy", "8", "16Gi"),
		st.MakeNode().Name("tainted").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "32", v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}).
			Taints([]v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Namespace("default").Name("existing-1").Node("busy").Req(map[v1.ResourceName]string{v1.ResourceCPU: "6", v1.ResourceMemory: "2Gi"}).Obj(),
		st.MakePod().Namespace("default").Name("existing-2").Node("big").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "20Gi"}).Obj(),
	}
	return nodes, pods
}

func TestPlacedExplanationMatchesTheCycle(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("web", "3")
	s := newSim(t, nil, nodes, pods, pod)
	out := s.schedule(pod)
	r := s.result(pod)
	if r.Version != ResultVersion || r.Outcome != OutcomePlaced || r.Profile != "berth" || r.Nodes != 5 {
		t.Errorf("header %+v", r)
	}
	p := r.Placed
	if p.Node != out.node || !p.Scored || p.Rank != 1 || p.Feasible != 2 || p.ScoredNodes != 2 {
		t.Errorf("placed %+v, want node %s scored first among 2 feasible", p, out.node)
	}
	// The explanation's scores are the framework's own, plugin by plugin.
	want := map[string]NodeScore{}
	for _, sc := range out.scores {
		want[sc.Name] = nodeScore(sc)
	}
	got := map[string]NodeScore{}
	for _, ns := range p.Top {
		got[ns.Node] = ns
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-plugin scores (-cycle,+explanation):\n%s", diff)
	}
	// Infeasible nodes: small and busy (cpu), tainted, by plugin.
	wantRej := []Rejection{
		{Plugin: noderesources.Name, Nodes: 2, Reasons: []ReasonCount{{Reason: "Insufficient cpu", Nodes: 2}}},
		{Plugin: tainttoleration.Name, Nodes: 1, Reasons: []ReasonCount{{Reason: "node(s) had untolerated taint(s)", Nodes: 1}}},
	}
	if diff := cmp.Diff(wantRej, r.Rejections); diff != "" {
		t.Errorf("rejections (-want,+got):\n%s", diff)
	}
	evs := s.events(1)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], fmt.Sprintf("Normal Explained web: placed on %s, rank 1 of 2 scored (2 of 5 nodes feasible): won by ", out.node)) {
		t.Errorf("events %q", evs)
	}
}

func TestPendingExplanationNamesTheNearestNodes(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("huge", "15")
	s := newSim(t, nil, nodes, pods, pod)
	if out := s.schedule(pod); out.node != "" {
		t.Fatalf("placed on %s", out.node)
	}
	r := s.result(pod)
	if r.Outcome != OutcomePending || r.Placed != nil || r.Nodes != 5 {
		t.Fatalf("result %+v", r)
	}
	wantRej := []Rejection{
		{Plugin: noderesources.Name, Nodes: 4, Reasons: []ReasonCount{{Reason: "Insufficient cpu", Nodes: 4}}},
		{Plugin: tainttoleration.Name, Nodes: 1, Reasons: []ReasonCount{{Reason: "node(s) had untolerated taint(s)", Nodes: 1}}},
	}
	if diff := cmp.Diff(wantRej, r.Rejections); diff != "" {
		t.Errorf("rejections (-want,+got):\n%s", diff)
	}
	// Closest first, by the share of capacity each node lacks.
	wantNearest := []Nearest{
		{Node: "big", Plugin: noderesources.Name, Short: map[string]string{"cpu": "1"}},
		{Node: "mid", Plugin: noderesources.Name, Short: map[string]string{"cpu": "7"}},
		{Node: "busy", Plugin: noderesources.Name, Short: map[string]string{"cpu": "13"}},
		{Node: "small", Plugin: noderesources.Name, Short: map[string]string{"cpu": "13"}},
	}
	if diff := cmp.Diff(wantNearest, r.Nearest); diff != "" {
		t.Errorf("nearest (-want,+got):\n%s", diff)
	}
	evs := s.events(1)
	want := "Normal Explained huge: fits none of 5 nodes: NodeResourcesFit 4 (Insufficient cpu), TaintToleration 1 (node(s) had untolerated taint(s)); nearest big: short 1 cpu"
	if len(evs) != 1 || evs[0] != want {
		t.Errorf("events %q, want %q", evs, want)
	}
}

func TestPodsThatDoNotAskCostNothing(t *testing.T) {
	nodes, pods := cluster()
	plain := st.MakePod().Namespace("default").Name("plain").UID("plain").Req(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).Obj()
	pendingPlain := st.MakePod().Namespace("default").Name("plain-big").UID("plain-big").Req(map[v1.ResourceName]string{v1.ResourceCPU: "64"}).Obj()
	s := newSim(t, nil, nodes, pods, plain, pendingPlain)
	before := len(s.cs.Actions())
	s.schedule(plain)
	s.schedule(pendingPlain)
	if n := s.filters.Load(); n != 10 {
		t.Errorf("the counting filter ran %d times for two pods on 5 nodes, want 10 (no re-run)", n)
	}
	if a := s.cs.Actions()[before:]; len(a) != 0 {
		t.Errorf("API calls for pods that did not ask: %v", a)
	}
	if _, evs := s.rec.Take(); len(evs) != 0 {
		t.Errorf("events %q", evs)
	}
	// The pod that asks re-runs Filter once per node.
	pod := asking("web", "3")
	if _, err := s.cs.CoreV1().Pods("default").Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.filters.Store(0)
	s.schedule(pod)
	s.result(pod)
	if n := s.filters.Load(); n != 10 {
		t.Errorf("the counting filter ran %d times for an explained pod on 5 nodes, want 10 (the cycle's and the re-run)", n)
	}
}

func TestSamplingAndNamespaces(t *testing.T) {
	s := newSim(t, &config.ExplainArgs{TopNodes: 5, SampleOneIn: 10}, nil, nil)
	sampled := 0
	for i := range 10000 {
		if s.pl.wants(st.MakePod().Namespace("default").Name("p").UID(fmt.Sprintf("uid-%d", i)).Obj()) {
			sampled++
		}
	}
	if sampled < 900 || sampled > 1100 {
		t.Errorf("sampled %d of 10000 with sampleOneIn 10, want about 1000", sampled)
	}
	s = newSim(t, &config.ExplainArgs{TopNodes: 5, Namespaces: []string{"team-a"}}, nil, nil)
	if s.pl.wants(asking("web", "1")) {
		t.Error("a pod of namespace default was explained with namespaces [team-a]")
	}
	a := asking("web", "1")
	a.Namespace = "team-a"
	if !s.pl.wants(a) {
		t.Error("a pod of team-a that asks was not explained")
	}
	if _, st := s.pl.SignPod(s.ctx, a); st.Code() != fwk.Unschedulable {
		t.Errorf("SignPod of an explained pod: %v, want Unschedulable (no batching)", st)
	}
}

func TestResultBoundedAt5000Nodes(t *testing.T) {
	var nodes []*v1.Node
	for i := range 5000 {
		// Every node rejected with a reason of its own: the worst case.
		n := mkNode(fmt.Sprintf("node-%04d-with-a-long-name-for-the-test", i), "4", "8Gi")
		n.Spec.Taints = []v1.Taint{{Key: fmt.Sprintf("team-%d", i), Value: strings.Repeat("x", 40), Effect: v1.TaintEffectNoSchedule}}
		nodes = append(nodes, n)
	}
	pod := asking("huge", "2")
	s := newSim(t, &config.ExplainArgs{TopNodes: 20}, nodes, nil, pod)
	s.schedule(pod)
	r := s.result(pod)
	p, err := s.cs.CoreV1().Pods("default").Get(s.ctx, "huge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.Annotations[AnnotationResult])
	if n > MaxResultBytes {
		t.Errorf("annotation of %d bytes, want at most %d", n, MaxResultBytes)
	}
	t.Logf("annotation %d bytes, truncated %v, %d rejecting plugins, first with %d reasons", n, r.Truncated, len(r.Rejections), len(r.Rejections[0].Reasons))
	if r.Nodes != 5000 || len(r.Rejections) == 0 {
		t.Errorf("result %+v", r)
	}
}

func TestEncodeBoundsTheWorstCase(t *testing.T) {
	r := &Result{Version: ResultVersion, Outcome: OutcomePlaced, Nodes: 5000, Placed: &Placed{Node: "n", Scored: true}}
	long := strings.Repeat("r", maxReasonLen)
	for i := range 40 {
		rj := Rejection{Plugin: fmt.Sprintf("Plugin%02d", i), Nodes: 100}
		for j := range maxReasonsPerPlugin {
			rj.Reasons = append(rj.Reasons, ReasonCount{Reason: fmt.Sprintf("%d-%d-%s", i, j, long), Nodes: 10})
		}
		r.Rejections = append(r.Rejections, rj)
	}
	for i := range 20 {
		ns := NodeScore{Node: fmt.Sprintf("node-%d-%s", i, strings.Repeat("n", 200)), Plugins: map[string]int64{}}
		for j := range 30 {
			ns.Plugins[fmt.Sprintf("ScorePlugin%02d", j)] = 100
		}
		r.Placed.Top = append(r.Placed.Top, ns)
	}
	b, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Errorf("encoded %d bytes, want at most %d", len(b), MaxResultBytes)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || !back.Truncated || back.Placed.Node != "n" {
		t.Errorf("decoded %+v (%v): want a truncated result that still names the node", back, err)
	}
}

func TestRedactNodes(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("web", "3")
	s := newSim(t, &config.ExplainArgs{TopNodes: 1, RedactNodes: true}, nodes, pods, pod)
	r := &Result{Rejections: []Rejection{{Plugin: "AdmissionFeedback", Nodes: 2, Reasons: []ReasonCount{
		{Reason: "node small refused pod default/web-1 of ReplicaSet default/web 2m ago: OutOfcpu (...)", Nodes: 1},
		{Reason: "node big refused pod default/web-2 of ReplicaSet default/web 1m ago: OutOfcpu (...)", Nodes: 1},
	}}}}
	snapshotNodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	s.pl.redact(r, snapshotNodes, sets.New("big"))
	want := []ReasonCount{
		{Reason: "node (redacted) refused pod default/web-1 of ReplicaSet default/web 2m ago: OutOfcpu (...)", Nodes: 1},
		{Reason: "node big refused pod default/web-2 of ReplicaSet default/web 1m ago: OutOfcpu (...)", Nodes: 1},
	}
	if diff := cmp.Diff(want, r.Rejections[0].Reasons); diff != "" {
		t.Errorf("redacted reasons (-want,+got):\n%s", diff)
	}
}

func TestNotScoredWhenOneNodeFits(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("wide", "9") // only big (14 free) fits
	s := newSim(t, nil, nodes, pods, pod)
	if out := s.schedule(pod); out.node != "big" || out.scores != nil {
		t.Fatalf("cycle %+v, want big without scoring", out)
	}
	p := s.result(pod).Placed
	if p.Node != "big" || p.Scored || p.Feasible != 1 || p.NotScored != "one feasible node: the cycle did not score" || p.Top != nil {
		t.Errorf("placed %+v", p)
	}
}

func TestRejectionWithoutAPluginNameCountsItsNodes(t *testing.T) {
	nodes, pods := cluster()
	pod := asking("huge", "1")
	s := newSim(t, nil, nodes, pods)
	m := framework.NewDefaultNodeToStatus()
	m.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "rejected by an extender")) // no plugin named
	r, err := s.pl.explainPending(pod, m)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rejection{{Plugin: "(unknown)", Nodes: 5, Reasons: []ReasonCount{{Reason: "rejected by an extender", Nodes: 5}}}}
	if diff := cmp.Diff(want, r.Rejections); diff != "" {
		t.Errorf("rejections (-want,+got):\n%s", diff)
	}
}

// The event's summary of a placement names a tie as one, and never ends in
// an empty list of plugins (make demo showed "won by 0 over gang-3: ").
func TestSummaryOfPlacementMargins(t *testing.T) {
	placed := func(top ...NodeScore) *Result {
		return &Result{Nodes: 3, Placed: &Placed{Node: "a", Scored: true, Feasible: 3, ScoredNodes: 3, Rank: 1, Top: top}}
	}
	for _, tc := range []struct {
		name string
		r    *Result
		want string
	}{
		{"won", placed(NodeScore{Node: "a", Total: 10, Plugins: map[string]int64{"P": 10, "Q": 0}}, NodeScore{Node: "b", Total: 4, Plugins: map[string]int64{"P": 2, "Q": 2}}),
			"placed on a, rank 1 of 3 scored (3 of 3 nodes feasible): won by 6 over b: P +8, Q -2"},
		{"tie on every plugin", placed(NodeScore{Node: "a", Total: 5, Plugins: map[string]int64{"P": 5}}, NodeScore{Node: "b", Total: 5, Plugins: map[string]int64{"P": 5}}),
			"placed on a, rank 1 of 3 scored (3 of 3 nodes feasible): tied with b (the scheduler picks among equal totals at random), equal on every plugin"},
		{"tie by different plugins", placed(NodeScore{Node: "a", Total: 5, Plugins: map[string]int64{"P": 5, "Q": 0}}, NodeScore{Node: "b", Total: 5, Plugins: map[string]int64{"P": 0, "Q": 5}}),
			"placed on a, rank 1 of 3 scored (3 of 3 nodes feasible): tied with b (the scheduler picks among equal totals at random): P +5, Q -5"},
		{"not ranked first", &Result{Nodes: 3, Placed: &Placed{Node: "a", Scored: true, Feasible: 3, ScoredNodes: 3, Rank: 2,
			Top: []NodeScore{{Node: "b", Total: 9, Plugins: map[string]int64{"P": 9}}, {Node: "a", Total: 6, Plugins: map[string]int64{"P": 6}}}}},
			"placed on a, rank 2 of 3 scored (3 of 3 nodes feasible): 3 below b: P -3"},
	} {
		if got := summarizePlaced(tc.r); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
