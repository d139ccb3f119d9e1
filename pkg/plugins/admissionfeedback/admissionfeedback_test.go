package admissionfeedback

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/testing/handletest"
)

// testClock is the plugin's clock in these tests (UnixNano).
var testClock atomic.Int64

func init() {
	leadership.ElectionGrace = 0 // no leader election in these tests
	timeNow = func() time.Time { return time.Unix(0, testClock.Load()).UTC() }
}

func (e *env) setClock(t time.Time) { testClock.Store(t.UnixNano()) }

const ns = "default"

func defaultArgs() *config.AdmissionFeedbackArgs {
	return &config.AdmissionFeedbackArgs{
		Reasons:            []string{"OutOf*", "UnexpectedAdmissionError", "TopologyAffinityError", "SMTAlignmentError", "NodeAffinity", "NodePorts"},
		RefusalTTL:         metav1.Duration{Duration: 5 * time.Minute},
		MaxRefusalTTL:      metav1.Duration{Duration: time.Hour},
		BlackHoleThreshold: 3,
		BlackHoleWindow:    metav1.Duration{Duration: 10 * time.Minute},
	}
}

// env is the plugin built by New on a framework handle with a fake
// clientset holding the given objects, and a clock the test moves.
type env struct {
	t   *testing.T
	ctx context.Context
	pl  *AdmissionFeedback
	cs  *clientsetfake.Clientset
	rec *handletest.Recorder
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, args *config.AdmissionFeedbackArgs, objs ...runtime.Object) *env {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if args == nil {
		args = defaultArgs()
	}
	e := &env{t: t, ctx: ctx, cs: clientsetfake.NewClientset(objs...), rec: &handletest.Recorder{}}
	e.setClock(t0) // replayed refusals are timed by the pods' startTime against it
	informerFactory := informers.NewSharedInformerFactory(e.cs, 0)
	h, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(e.cs),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodActivator(e.rec),
		frameworkruntime.WithEventRecorder(e.rec))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, args, h)
	if err != nil {
		t.Fatal(err)
	}
	e.pl = p.(*AdmissionFeedback)
	informerFactory.Start(ctx.Done())
	// The scheduler's pod informer synced: this replica may record events.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return e.pl.shared.writer.Allowed(), nil
	}); err != nil {
		t.Fatal("the plugin never became the writer")
	}
	return e
}

func rsRef(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
}

// refused is a pod of ReplicaSet rs that node refused with reason at, bound
// to node by a scheduler (its creator's managed fields do not own
// spec.nodeName: the binding subresource wrote it).
func refused(name, rs, node, reason string, at time.Time) *v1.Pod {
	p := st.MakePod().Namespace(ns).Name(name).UID(name).Node(node).Obj()
	p.OwnerReferences = []metav1.OwnerReference{rsRef(rs)}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{}},"f:spec":{"f:containers":{}}}`)}}
	p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: reason,
		Message: "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/gpu", StartTime: &metav1.Time{Time: at}}
	return p
}

// pending is a new pod of ReplicaSet rs.
func pending(name, rs string) *v1.Pod {
	p := st.MakePod().Namespace(ns).Name(name).UID(name).Obj()
	if rs != "" {
		p.OwnerReferences = []metav1.OwnerReference{rsRef(rs)}
	}
	return p
}

func node(name string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourcePods: "110"}).Obj()
}

// observe feeds a Failed pod to the plugin, timed by its status (as a
// restarted scheduler times the pods it lists) so that a test sets each
// refusal's time; the live path times by the clock (TestRefusalOfAPodThatHadRunIsNotBornExpired).
func (e *env) observe(pods ...*v1.Pod) {
	for _, p := range pods {
		if o, ok := e.pl.shared.refusalOf(p, false); ok {
			e.pl.shared.record(klog.FromContext(e.ctx), o, true)
		}
	}
}

// avoided runs PreFilter and Filter over nodes and returns the rejected
// nodes with Filter's reasons; skipped reports a PreFilter Skip.
func (e *env) avoided(pod *v1.Pod, nodes ...string) (rejected map[string]string, skipped bool) {
	e.t.Helper()
	cs := framework.NewCycleState()
	_, s := e.pl.PreFilter(e.ctx, cs, pod, nil)
	if s.IsSkip() {
		return nil, true
	}
	if !s.IsSuccess() {
		e.t.Fatalf("PreFilter: %v", s)
	}
	rejected = map[string]string{}
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(node(n))
		if s := e.pl.Filter(e.ctx, cs, pod, ni); !s.IsSuccess() {
			if s.Code() != fwk.UnschedulableAndUnresolvable {
				e.t.Errorf("Filter on %s: code %v, want UnschedulableAndUnresolvable", n, s.Code())
			}
			rejected[n] = s.Message()
		}
	}
	return rejected, false
}

func TestReasons(t *testing.T) {
	tests := []struct {
		reason string
		want   bool
	}{
		{"OutOfcpu", true},
		{"OutOfmemory", true},
		{"OutOfpods", true},
		{"OutOfephemeral-storage", true},
		{"OutOfexample.com/gpu", true},
		{"UnexpectedAdmissionError", true},
		{"TopologyAffinityError", true},
		{"SMTAlignmentError", true},
		{"NodeAffinity", true},
		{"NodePorts", true},
		{"Evicted", false},          // ran, then evicted: not an admission refusal
		{"NodeShutdown", false},     // a node shutting down, not the node refusing the pod
		{"DeadlineExceeded", false}, // a Job's deadline
		{"", false},                 // a container failed
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			e := newEnv(t, nil)
			e.observe(refused("web-1", "web", "n1", tc.reason, t0))
			rejected, skipped := e.avoided(pending("web-2", "web"), "n1", "n2")
			if got := !skipped && rejected["n1"] != ""; got != tc.want {
				t.Errorf("reason %q: n1 avoided %v, want %v (rejected %v)", tc.reason, got, tc.want, rejected)
			}
			if len(rejected) > 1 {
				t.Errorf("rejected %v: only n1 refused", rejected)
			}
		})
	}
	t.Run("a reason added in args", func(t *testing.T) {
		args := defaultArgs()
		args.Reasons = []string{"NodeShutdown"}
		e := newEnv(t, args)
		e.observe(refused("web-1", "web", "n1", "NodeShutdown", t0), refused("web-3", "web", "n2", "OutOfcpu", t0))
		rejected, _ := e.avoided(pending("web-2", "web"), "n1", "n2")
		if diff := cmp.Diff([]string{"n1"}, keys(rejected)); diff != "" {
			t.Errorf("avoided (-want,+got):\n%s", diff)
		}
	})
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestFilterReasonAndEvent(t *testing.T) {
	e := newEnv(t, nil)
	e.observe(refused("web-1", "web", "gpu-3", "UnexpectedAdmissionError", t0))
	e.setClock(t0.Add(2 * time.Minute))
	rejected, _ := e.avoided(pending("web-2", "web"), "gpu-1", "gpu-3")
	want := map[string]string{"gpu-3": "node gpu-3 refused pod default/web-1 of ReplicaSet default/web 2m ago: UnexpectedAdmissionError " +
		"(Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/gpu)"}
	if diff := cmp.Diff(want, rejected); diff != "" {
		t.Errorf("Filter reasons (-want,+got):\n%s", diff)
	}
	// Another controller's pods are not affected; nor pods of none.
	if _, skipped := e.avoided(pending("api-1", "api"), "gpu-3"); !skipped {
		t.Error("a pod of another controller was not skipped")
	}
	_, evs := e.rec.Take()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal NodeRefusedSibling web-2: Skipping node gpu-3 refused pod default/web-1") {
		t.Errorf("events %q, want one NodeRefusedSibling on web-2", evs)
	}
	e.avoided(pending("web-2", "web"), "gpu-3") // the same pod again: rate-limited
	if _, evs := e.rec.Take(); len(evs) != 0 {
		t.Errorf("events %q on a retry within a minute, want none", evs)
	}
}

func TestExemptPods(t *testing.T) {
	e := newEnv(t, nil)
	ds := refused("ds-1", "x", "n1", "OutOfcpu", t0)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-agent", Controller: ptr.To(true)}}
	orphan := refused("solo", "x", "n1", "OutOfcpu", t0)
	orphan.OwnerReferences = nil
	e.observe(ds, orphan, refused("web-1", "web", "n1", "OutOfcpu", t0))
	if n := e.pl.shared.store.size(); n != 1 {
		t.Errorf("remembered %d refusals, want 1 (DaemonSet and owner-less refusals are not recorded)", n)
	}
	dsPod := pending("ds-2", "")
	dsPod.OwnerReferences = ds.OwnerReferences
	named := pending("web-9", "web")
	named.Spec.NodeName = "n1"
	for _, p := range []*v1.Pod{dsPod, pending("solo-2", ""), named} {
		if _, skipped := e.avoided(p, "n1"); !skipped {
			t.Errorf("pod %s: PreFilter did not skip", p.Name)
		}
		if s := e.pl.PreScore(e.ctx, framework.NewCycleState(), p, nil); !s.IsSkip() {
			t.Errorf("pod %s: PreScore %v, want Skip", p.Name, s)
		}
	}
}

func TestTTLDoublesUpToTheCap(t *testing.T) {
	e := newEnv(t, nil)
	at := t0
	var got []time.Duration
	for i := range 7 {
		e.observe(refused(fmt.Sprintf("web-%d", i), "web", "n1", "OutOfcpu", at))
		r := e.pl.shared.store.byCtrl["uid-web"]["n1"]
		got = append(got, r.until.Sub(r.at))
		at = r.until.Add(time.Minute) // refused again a minute after the avoidance ended
	}
	want := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour, time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("avoidance per refusal (-want,+got):\n%s", diff)
	}
	// The same pod seen twice (a relist) is one refusal.
	e.observe(refused("web-6", "web", "n1", "OutOfcpu", at))
	if c := e.pl.shared.store.byCtrl["uid-web"]["n1"].count; c != 7 {
		t.Errorf("count %d after a pod seen twice, want 7", c)
	}
	// Past its memory (maxRefusalTTL after the avoidance) the streak ends.
	r := e.pl.shared.store.byCtrl["uid-web"]["n1"]
	e.pl.shared.store.sweep(r.forgetAt)
	e.observe(refused("web-new", "web", "n1", "OutOfcpu", r.forgetAt))
	r = e.pl.shared.store.byCtrl["uid-web"]["n1"]
	if d := r.until.Sub(r.at); d != 5*time.Minute {
		t.Errorf("avoidance %s after the streak was forgotten, want 5m", d)
	}
}

func TestAvoidanceEndsAndActivatesWaitingPods(t *testing.T) {
	e := newEnv(t, nil)
	e.observe(refused("web-1", "web", "n1", "OutOfcpu", t0))
	e.avoided(pending("web-2", "web"), "n1")
	e.setClock(t0.Add(4 * time.Minute))
	e.pl.shared.sweep(e.ctx)
	if a, _ := e.rec.Take(); len(a) != 0 {
		t.Errorf("activated %v before the avoidance ended", a)
	}
	e.setClock(t0.Add(5 * time.Minute))
	e.pl.shared.sweep(e.ctx)
	if a, _ := e.rec.Take(); !slices.Equal(a, []string{"default/web-2"}) {
		t.Errorf("activated %v when the avoidance ended, want [default/web-2]", a)
	}
	if _, skipped := e.avoided(pending("web-2", "web"), "n1"); !skipped {
		t.Error("n1 still avoided after its avoidance ended")
	}
}

func TestNodeChangeForgetsItsRefusals(t *testing.T) {
	e := newEnv(t, nil)
	e.observe(refused("web-1", "web", "n1", "UnexpectedAdmissionError", t0), refused("web-3", "web", "n2", "UnexpectedAdmissionError", t0))
	e.avoided(pending("web-2", "web"), "n1")
	old := node("n1")
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{"x": "y"}
	e.pl.shared.nodeUpdated(klog.FromContext(e.ctx), old, annotated)
	if rejected, _ := e.avoided(pending("web-2", "web"), "n1", "n2"); len(rejected) != 2 {
		t.Errorf("rejected %v after an annotation change, want n1 and n2 still avoided", rejected)
	}
	e.rec.Take()
	recovered := old.DeepCopy()
	recovered.Status.Allocatable["example.com/gpu"] = resource.MustParse("8") // the device plugin is back
	e.pl.shared.nodeUpdated(klog.FromContext(e.ctx), old, recovered)
	if a, _ := e.rec.Take(); !slices.Equal(a, []string{"default/web-2"}) {
		t.Errorf("activated %v after n1 recovered, want [default/web-2]", a)
	}
	if rejected, _ := e.avoided(pending("web-2", "web"), "n1", "n2"); !slices.Equal(keys(rejected), []string{"n2"}) {
		t.Errorf("rejected %v after n1's allocatable changed, want only n2", rejected)
	}
	relabelled := node("n2")
	relabelled.Labels = map[string]string{"fixed": "true"}
	e.pl.shared.nodeUpdated(klog.FromContext(e.ctx), node("n2"), relabelled)
	if _, skipped := e.avoided(pending("web-2", "web"), "n2"); !skipped {
		t.Error("n2 still avoided after its labels changed")
	}
	// Deleted nodes are dropped.
	e.observe(refused("web-4", "web", "n3", "OutOfcpu", t0))
	e.pl.shared.nodeDeleted(klog.FromContext(e.ctx), node("n3"))
	if n := e.pl.shared.store.size(); n != 0 {
		t.Errorf("%d refusals remembered after n3 was deleted, want 0", n)
	}
}

func TestQueueingHint(t *testing.T) {
	e := newEnv(t, nil)
	old := node("n1")
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{"x": "y"}
	grown := old.DeepCopy()
	grown.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("8")
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"fixed": "true"}
	for _, tc := range []struct {
		name string
		new  *v1.Node
		want fwk.QueueingHint
	}{
		{"annotation only", annotated, fwk.QueueSkip},
		{"allocatable", grown, fwk.Queue},
		{"labels", relabelled, fwk.Queue},
	} {
		got, err := e.pl.isSchedulableAfterNodeChange(klog.FromContext(e.ctx), pending("web-2", "web"), old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: hint %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestStateRebuiltFromFailedPods(t *testing.T) {
	// A restarted scheduler lists these. web was refused by n1 three
	// times in a row (the last a minute ago: avoided for 20m), api by n2
	// an hour ago (long over), and a running pod and a pod that failed
	// on its own are not refusals.
	running := pending("web-run", "web")
	running.Spec.NodeName = "n3"
	running.Status.Phase = v1.PodRunning
	crashed := refused("web-crash", "web", "n4", "", t0.Add(-time.Minute))
	e := newEnv(t, nil,
		refused("web-c", "web", "n1", "OutOfcpu", t0.Add(-time.Minute)),
		refused("web-a", "web", "n1", "OutOfcpu", t0.Add(-16*time.Minute)),
		refused("web-b", "web", "n1", "OutOfcpu", t0.Add(-10*time.Minute)),
		refused("api-1", "api", "n2", "OutOfcpu", t0.Add(-time.Hour)),
		running, crashed)
	r := e.pl.shared.store.byCtrl["uid-web"]["n1"]
	if r == nil || r.count != 3 || r.until.Sub(r.at) != 20*time.Minute || r.pod != "default/web-c" {
		t.Fatalf("web on n1 after the replay: %+v, want 3 refusals, the latest web-c, avoided for 20m", r)
	}
	rejected, _ := e.avoided(pending("web-2", "web"), "n1", "n2", "n3", "n4")
	if !slices.Equal(keys(rejected), []string{"n1"}) {
		t.Errorf("rejected %v, want n1", rejected)
	}
	if _, skipped := e.avoided(pending("api-2", "api"), "n2"); !skipped {
		t.Error("n2 avoided for api an hour after its 5m avoidance")
	}
}

func TestBlackHoleScoresLowestForEveryPod(t *testing.T) {
	e := newEnv(t, nil)
	score := func(pod *v1.Pod, n string) int64 {
		t.Helper()
		cs := framework.NewCycleState()
		if s := e.pl.PreScore(e.ctx, cs, pod, nil); s.IsSkip() {
			return -1
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(node(n))
		v, s := e.pl.Score(e.ctx, cs, pod, ni)
		if !s.IsSuccess() {
			t.Fatal(s)
		}
		return v
	}
	e.observe(refused("a-1", "a", "bh", "UnexpectedAdmissionError", t0), refused("b-1", "b", "bh", "UnexpectedAdmissionError", t0))
	if v := score(pending("c-1", "c"), "bh"); v != -1 {
		t.Errorf("PreScore did not skip with no black hole (score %d)", v)
	}
	e.observe(refused("c-1", "c", "bh", "UnexpectedAdmissionError", t0.Add(time.Second)))
	if v, w := score(pending("d-1", "d"), "bh"), score(pending("d-1", "d"), "ok"); v != fwk.MinScore || w != fwk.MaxScore {
		t.Errorf("scores bh %d, ok %d: want %d and %d", v, w, fwk.MinScore, fwk.MaxScore)
	}
	// Enabled under score alone (no PreScore ran): the same scores.
	for n, want := range map[string]int64{"bh": fwk.MinScore, "ok": fwk.MaxScore} {
		ni := framework.NewNodeInfo()
		ni.SetNode(node(n))
		if v, s := e.pl.Score(e.ctx, framework.NewCycleState(), pending("d-1", "d"), ni); !s.IsSuccess() || v != want {
			t.Errorf("Score without PreScore on %s: %d, %v; want %d", n, v, s, want)
		}
	}
	// A pod of another controller may still go there: not a filter.
	if _, skipped := e.avoided(pending("d-1", "d"), "bh"); !skipped {
		t.Error("a black hole filtered a pod of a controller it never refused")
	}
	_, evs := e.rec.Take()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning NodeRefusingPods bh: Node refused pods of 3 controllers within 10m0s") {
		t.Errorf("events %q, want one NodeRefusingPods on bh", evs)
	}
	e.setClock(t0.Add(11 * time.Minute)) // out of the window
	e.pl.shared.sweep(e.ctx)
	if v := score(pending("d-1", "d"), "bh"); v != -1 {
		t.Errorf("bh still a black hole after the window (score %d)", v)
	}
}

func TestStateIsBounded(t *testing.T) {
	e := newEnv(t, nil)
	quiet := klog.Background() // 15,000 refusals: the test logger would print each
	for i := range 15000 {
		o, _ := e.pl.shared.refusalOf(refused(fmt.Sprintf("p-%d", i), fmt.Sprintf("rs-%d", i%5000), fmt.Sprintf("n-%d", i%3), "OutOfcpu", t0.Add(time.Duration(i)*time.Millisecond)), false)
		e.pl.shared.record(quiet, o, true)
	}
	if n := e.pl.shared.store.size(); n > maxRefusals || n < maxRefusals*9/10 {
		t.Errorf("%d refusals held after 15000 distinct ones, want between 90%% of the cap and the cap %d", n, maxRefusals)
	}
	// The newest are kept.
	if _, skipped := e.avoided(pending("x", "rs-4999"), "n-2"); skipped {
		t.Error("the newest refusal was evicted")
	}
	e.setClock(t0.Add(2 * time.Hour)) // every avoidance over and forgotten
	e.pl.shared.sweep(e.ctx)
	if n := e.pl.shared.store.size(); n != 0 {
		t.Errorf("%d refusals held after they all expired, want 0", n)
	}
	if len(e.pl.shared.store.byNode) != 0 || len(e.pl.shared.store.byCtrl) != 0 {
		t.Errorf("indexes not empty: %d nodes, %d controllers", len(e.pl.shared.store.byNode), len(e.pl.shared.store.byCtrl))
	}
}

func TestSignPod(t *testing.T) {
	e := newEnv(t, nil)
	sig := func(p *v1.Pod) any {
		f, s := e.pl.SignPod(e.ctx, p)
		if !s.IsSuccess() || len(f) != 1 {
			t.Fatalf("SignPod: %v %v", f, s)
		}
		return f[0].Value
	}
	if a, b, c := sig(pending("a", "web")), sig(pending("b", "web")), sig(pending("c", "api")); a != b || a == c {
		t.Errorf("signatures %v %v %v: pods of one controller must sign alike, of two differently", a, b, c)
	}
}

func TestSlimFailedPodKeepsWhatARefusalNeeds(t *testing.T) {
	e := newEnv(t, nil)
	full := refused("web-1", "web", "n1", "OutOfcpu", t0.Add(-time.Minute))
	full.Labels = map[string]string{"app": "web"}
	full.Spec.Containers = []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}
	full.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-3 * time.Minute))},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Minute))},
	}
	slim, err := slimFailedPod(full)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := e.pl.shared.refusalOf(full, false)
	got, ok := e.pl.shared.refusalOf(slim.(*v1.Pod), false)
	if !ok || !cmp.Equal(want, got, cmp.AllowUnexported(observed{}, controller{})) {
		t.Errorf("refusal of the slim pod %+v (%v), want %+v", got, ok, want)
	}
	if p := slim.(*v1.Pod); len(p.Spec.Containers) != 0 || len(p.Labels) != 0 {
		t.Errorf("slim pod keeps containers or labels: %+v", p)
	}
}

// Filter's reason is the refusal as PreFilter saw it, at PreFilter's clock
// (formatted only when Filter rejects the node), for a short list of
// avoided nodes and beyond smallSet (the map).
func TestFilterReasonIsPreFilters(t *testing.T) {
	for _, n := range []int{1, smallSet + 2} {
		e := newEnv(t, nil)
		var nodes []string
		for i := range n {
			nodes = append(nodes, fmt.Sprintf("gpu-%d", i))
			e.observe(refused(fmt.Sprintf("web-%d", i), "web", nodes[i], "OutOfcpu", t0))
		}
		e.setClock(t0.Add(2 * time.Minute))
		pod := pending("web-new", "web")
		cs := framework.NewCycleState()
		if _, s := e.pl.PreFilter(e.ctx, cs, pod, nil); !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s)
		}
		e.setClock(t0.Add(time.Hour)) // Filter's reasons keep PreFilter's clock
		for i, name := range append(nodes, "other") {
			ni := framework.NewNodeInfo()
			ni.SetNode(node(name))
			s := e.pl.Filter(e.ctx, cs, pod, ni)
			if name == "other" {
				if !s.IsSuccess() {
					t.Errorf("%d avoided: Filter on a node that refused nothing: %v", n, s)
				}
				continue
			}
			want := fmt.Sprintf("node %s refused pod default/web-%d of ReplicaSet default/web 2m ago: OutOfcpu", name, i)
			if !strings.HasPrefix(s.Message(), want) {
				t.Errorf("%d avoided: Filter on %s: %q, want it to start %q", n, name, s.Message(), want)
			}
		}
	}
}
