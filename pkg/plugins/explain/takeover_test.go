package explain

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// holdingCluster is writingCluster with a profile, "holding", whose
// PreEnqueue holds every pod labelled held: the scheduler never runs its
// cycle, so whatever explains it is not that cycle's PostFilter. objs are
// in the API before the scheduler starts.
func holdingCluster(t *testing.T, objs ...runtime.Object) (*podgroupcycle.Cluster, *Explain) {
	t.Helper()
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: holding
  plugins:
    multiPoint:
      enabled:
      - name: Explain
      - name: Holds
`
	return writingClusterOf(t, config, frameworkruntime.Registry{"Holds": func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return holds{}, nil
	}}, objs...)
}

// holds keeps a pod labelled held out of the queue.
type holds struct{}

func (holds) Name() string { return "Holds" }
func (holds) PreEnqueue(_ context.Context, p *v1.Pod) *fwk.Status {
	if p.Labels["held"] == "true" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "held by the test")
	}
	return nil
}

// decidedBefore is a held pod that asks, with the PodScheduled condition a
// scheduler wrote (reason, message) and no explanation.
func decidedBefore(name, reason, msg string) *v1.Pod {
	p := st.MakePod().Namespace("a").Name(name).UID(name).SchedulerName("holding").Label("held", "true").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Annotation(AnnotationRequest, "true").Obj()
	if reason != "" {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}}
	}
	return p
}

const lostDecision = "0/1000 nodes are available: 1000 Insufficient cpu. (the decision of the leader before)"

// A replica that comes to lead explains each pending pod that asks and has
// a decision (PodScheduled False, Unschedulable) but no explanation: the
// replica that led before made it, and the explanation it queued went with
// it (the 30-minute 1,000-node soak: a partitioned leader rejected a gang's
// members and lost its lease; no later cycle explained them within 30 s of
// queue time). It does not wait for the pod's next cycle, which may be
// minutes away (a takeover pass of hundreds of pods, a long backoff): here
// there is none. A pod gated or failed by an error has no decision to
// explain, and an explanation already there stands.
func TestALeaderThatTakesOverExplainsTheDecisionBeforeIt(t *testing.T) {
	explained := decidedBefore("explained", v1.PodReasonUnschedulable, "an older decision")
	const before = `{"version":"explain.berth.dev/v1alpha1","profile":"holding","time":"2026-12-07T00:00:00Z","outcome":"Pending","nodes":1}`
	explained.Annotations[AnnotationResult] = before
	c, _ := holdingCluster(t,
		decidedBefore("lost", v1.PodReasonUnschedulable, lostDecision),
		decidedBefore("failed", v1.PodReasonSchedulerError, "binding failed: the API server is down"),
		decidedBefore("gated", v1.PodReasonSchedulingGated, "Scheduling is blocked due to non-empty scheduling gates"),
		explained,
	)
	r, err := explainedPending(t, c, "lost")
	if err != nil {
		t.Fatalf("the decision of the leader before was not explained (last result %+v): %v", r, err)
	}
	if r.Decision != lostDecision || r.Rejection != "" || r.GroupFailure != "" {
		t.Errorf("explanation %+v: want the condition's message as the decision, nothing else", r)
	}
	// The takeover's pass queued every explanation it made before the
	// first was written; the writer writes them in order.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, name := range []string{"failed", "gated"} {
			got, err := c.Client.CoreV1().Pods("a").Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if raw := got.Annotations[AnnotationResult]; raw != "" {
				t.Fatalf("pod %s (no decision: %s) explained: %s", name, got.Status.Conditions[0].Reason, raw)
			}
		}
		got, err := c.Client.CoreV1().Pods("a").Get(t.Context(), "explained", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if raw := got.Annotations[AnnotationResult]; raw != before {
			t.Fatalf("a pod already explained was explained again: %s", raw)
		}
	}
}

// A decision whose status write lands after this replica took over (the
// leader before was partitioned with the write held, and lost its lease)
// is explained when the condition arrives, as the takeover's pass was
// over by then.
func TestADecisionThatLandsAfterTheTakeoverIsExplained(t *testing.T) {
	c, pl := holdingCluster(t)
	// The takeover's pass is over (it would explain the pod itself).
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.inheritedPasses.Load() > 0, nil
	}); err != nil {
		t.Fatal("the takeover's pass never ran")
	}
	p := decidedBefore("late", "", "")
	p, err := c.Client.CoreV1().Pods("a").Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: lostDecision, LastTransitionTime: metav1.Now()}}
	if _, err := c.Client.CoreV1().Pods("a").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := explainedPending(t, c, "late")
	if err != nil {
		t.Fatalf("the decision that landed late was not explained (last result %+v): %v", r, err)
	}
	if r.Decision != lostDecision {
		t.Errorf("decision %q: want the condition's message %q", r.Decision, lostDecision)
	}
	if raw, _ := json.Marshal(r); !strings.Contains(string(raw), `"decision"`) {
		t.Errorf("the result's JSON %s has no decision", raw)
	}
}

// A pod whose failure this replica's PostFilter saw, and chose not to
// explain (here the budget was spent), is not explained from the condition
// the scheduler then writes, nor charged to the budget again: that path is
// for decisions no PostFilter of this replica saw.
func TestADecisionThisReplicaSawIsNotExplainedFromItsCondition(t *testing.T) {
	nodes, pods := cluster()
	big := asking("huge", "40")
	big.Spec.SchedulerName = "berth" // the sim's profile
	s := newSim(t, &config.ExplainArgs{TopNodes: 5, MaxPerMinute: 1}, nodes, pods, big)
	s.pl.leader = nil // no election: this replica schedules
	// The minute's one explanation, spent.
	if !s.pl.withinBudget(s.ctx, big, explainingPending) {
		t.Fatal("the budget of one was spent before the test")
	}
	before := skippedOverBudget(t)
	s.schedule(big)
	if got := skippedOverBudget(t) - before; got != 1 {
		t.Fatalf("skipped{budget} grew by %v at PostFilter, want 1", got)
	}
	failed := big.DeepCopy()
	failed.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu."}}
	store := s.f.SharedInformerFactory().Core().V1().Pods().Informer().GetStore()
	if err := store.Update(failed); err != nil { // the informer's store holds the update its handler runs for
		t.Fatal(err)
	}
	logger := klog.FromContext(s.ctx)
	s.pl.podUpdated(logger, big, failed)
	if got := skippedOverBudget(t) - before; got != 1 {
		t.Errorf("skipped{budget} grew by %v once the condition arrived, want still 1: the decision PostFilter saw was taken again", got)
	}
	// The condition spent PostFilter's record: a decision no PostFilter
	// saw after it (no node at all: upstream runs no PostFilter) is taken
	// from its condition (here the budget refuses it: counted).
	noNodes := failed.DeepCopy()
	noNodes.Status.Conditions[0].Message = "no nodes available to schedule pods"
	if err := store.Update(noNodes); err != nil {
		t.Fatal(err)
	}
	s.pl.podUpdated(logger, failed, noNodes)
	if got := skippedOverBudget(t) - before; got != 2 {
		t.Errorf("skipped{budget} grew by %v after a decision no PostFilter saw, want 2: it was not taken from its condition", got)
	}
}

// A new leader does not renew the explanation of a pending pod the leader
// before explained within the minute (read from the pod's annotation): it
// would spend its budget on pods that have one at every takeover (the
// 1,000-node soak: 1,688 pods skipped over the budget in the new leader's
// first three minutes, and a gang's members that had none went
// unexplained). One older than that, or one made from the pod's condition,
// is renewed.
func TestANewLeaderDoesNotRenewAnExplanationTheLeaderBeforeMadeWithinTheMinute(t *testing.T) {
	nodes, pods := cluster()
	explainedAt := func(name string, ago time.Duration, decision string) *v1.Pod {
		p := asking(name, "40")
		r := &Result{Version: ResultVersion, Profile: "berth", Time: metav1.NewTime(time.Now().Add(-ago).UTC().Truncate(time.Second)), Outcome: OutcomePending, Nodes: 3, Decision: decision}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations[AnnotationResult] = string(raw)
		return p
	}
	recent := explainedAt("recent", 20*time.Second, "")
	old := explainedAt("old", 2*time.Minute, "")
	fromCondition := explainedAt("from-condition", 20*time.Second, "0/3 nodes are available: 3 Insufficient cpu.")
	s := newSim(t, &config.ExplainArgs{TopNodes: 5}, nodes, pods, recent, old, fromCondition)
	computed := func() float64 {
		v, err := testutil.GetCounterMetricValue(explanations.WithLabelValues(OutcomePending))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		pod     *v1.Pod
		renewed bool
	}{{recent, false}, {old, true}, {fromCondition, true}} {
		before := computed()
		s.schedule(tc.pod)
		if renewed := computed() > before; renewed != tc.renewed {
			t.Errorf("pod %s: renewed %v, want %v", tc.pod.Name, renewed, tc.renewed)
		}
	}
}

// A pod placed since its pending explanation (then rejected at Permit, or
// its binding failed) has its next pending explanation made, whatever the
// explanation it carries says (a review found the annotation's time read
// again once the placement had cleared this replica's record: a gang
// member released at Permit kept saying it fit no node for a minute).
func TestAPlacementRenewsThePendingExplanation(t *testing.T) {
	nodes, pods := cluster()
	p := asking("placed", "1")
	p.Spec.SchedulerName = "berth"
	r := &Result{Version: ResultVersion, Profile: "berth", Time: metav1.NewTime(time.Now().Add(-10 * time.Second).UTC().Truncate(time.Second)), Outcome: OutcomePending, Nodes: 3}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[AnnotationResult] = string(raw)
	s := newSim(t, nil, nodes, pods, p)
	s.pl.leader = nil
	if !s.pl.recentlyExplained(p, time.Now()) {
		t.Fatal("an explanation made 10 s ago is not recent: the test tests nothing")
	}
	state := framework.NewCycleState()
	if _, st, _ := s.f.RunPreFilterPlugins(s.ctx, state, p); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := s.f.RunReservePluginsReserve(s.ctx, state, assumed(p, "big"), "big"); !st.IsSuccess() {
		t.Fatal(st)
	}
	s.f.RunReservePluginsUnreserve(s.ctx, state, assumed(p, "big"), "big")
	if s.pl.recentlyExplained(p, time.Now()) {
		t.Error("placed and unreserved since its pending explanation, the pod's next one is held back by the annotation's time")
	}
}

// A standby replica does not mark a pod that starts asking as due: it
// keeps no record of its own, and after a takeover the explanation the
// leader before made stands its minute.
func TestAStandbyDoesNotMarkAPodThatStartsAsking(t *testing.T) {
	nodes, pods := cluster()
	s := newSim(t, nil, nodes, pods)
	s.pl.leader = leadership.NewWriter(s.ctx, func() bool { return false }) // never synced: a standby
	quiet := st.MakePod().Namespace("default").Name("quiet").UID("quiet").SchedulerName("berth").Obj()
	asks := quiet.DeepCopy()
	asks.Annotations = map[string]string{AnnotationRequest: "true"}
	s.pl.podUpdated(klog.FromContext(s.ctx), quiet, asks)
	if v, ok := s.pl.lastPending.Load(asks.UID); ok {
		t.Errorf("a standby marked the pod that starts asking: %v", v)
	}
}
