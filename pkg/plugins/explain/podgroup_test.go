package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // the plugins' args in the config scheme, as in main
	"github.com/berth-scheduler/berth/internal/leadership"
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// A member of a Kubernetes PodGroup is explained from the PodGroup cycle's
// try, which saw the members placed before it: the cycle reverts every
// member and reserves it again for binding, when its snapshot holds none of
// them, and an explanation computed then would tell another story. Run
// through the real cycle (scheduler.New with the GenericWorkload gate).
func TestAGangMemberIsExplainedAsTheCyclePlacedIt(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: Explain
    reserve:
      enabled:
      - name: Explain
`
	node := func(name, cpu string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	}
	// The first member goes to the roomier n1; the second, with the first
	// counted, to n2.
	c := podgroupcycle.New(t, config, frameworkruntime.Registry{Name: New}, node("n1", "4"), node("n2", "3"))
	members := c.Gang(t, "a", "g", 2, 2, func(i int) *v1.Pod {
		p := st.MakePod().Name(fmt.Sprintf("m-%d", i)).SchedulerName("gangs").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj()
		p.Annotations = map[string]string{AnnotationRequest: "true"}
		return p
	})
	results := map[string]*Result{}
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, m := range members {
			p, err := c.Client.CoreV1().Pods("a").Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			raw := p.Annotations[AnnotationResult]
			if p.Spec.NodeName == "" || raw == "" {
				return false, nil
			}
			r := &Result{}
			if err := json.Unmarshal([]byte(raw), r); err != nil {
				return false, err
			}
			if r.Placed == nil || r.Placed.Node != p.Spec.NodeName {
				return false, nil
			}
			results[p.Name] = r
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the members were not bound and explained: %v (explained: %d)", err, len(results))
	}
	for name, r := range results {
		if r.PodGroup != "a/g" {
			t.Errorf("%s: podGroup %q, want a/g", name, r.PodGroup)
		}
		p := r.Placed
		if p.Rank != 1 || p.Note != "" || len(p.Top) < 2 || p.Top[0].Node != p.Node || p.Top[0].Total <= p.Top[1].Total {
			t.Errorf("%s on %s: rank %d, note %q, top %+v: want its node first and ahead, as the cycle scored it", name, p.Node, p.Rank, p.Note, p.Top)
		}
	}
}

// A member of a Kubernetes PodGroup that its cycle could not place whole is
// explained as pending with its group, in the scheduler's own words: the
// cycle runs no per-pod PostFilter, so Explain takes the message the
// scheduler writes on the member.
func TestAPendingGangMemberIsExplainedWithItsGroup(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: Explain
    reserve:
      enabled:
      - name: Explain
`
	c := writingCluster(t, config)
	// Room for two of three.
	members := c.Gang(t, "a", "g", 3, 3, func(i int) *v1.Pod {
		p := podgroupcycle.Member("1")(i)
		p.Annotations = map[string]string{AnnotationRequest: "true"}
		return p
	})
	var r *Result
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, m := range members {
			p, err := c.Client.CoreV1().Pods("a").Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if raw := p.Annotations[AnnotationResult]; raw != "" {
				r = &Result{}
				return true, json.Unmarshal([]byte(raw), r)
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no member was explained: %v", err)
	}
	if r.Outcome != OutcomePending || r.PodGroup != "a/g" || !strings.Contains(r.GroupFailure, "cannot be satisfied") && !strings.Contains(r.GroupFailure, "Insufficient cpu") {
		t.Errorf("explanation %+v: want pending, podGroup a/g and the scheduler's reason", r)
	}
}

// A member that asks after its group failed is explained from the reason it
// already has: the scheduler writes the reason once per change, so no later
// update would bring it.
func TestAGangMemberThatAsksAfterItsGroupFailedIsExplained(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: Explain
`
	c := writingCluster(t, config)
	members := c.Gang(t, "a", "g", 3, 3, podgroupcycle.Member("1"))
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False", got)
	}
	if !c.Unschedulable(t, members[:1], "") {
		t.Fatal("the member has no PodScheduled=False condition")
	}
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationRequest + `":"true"}}}`)
	if _, err := c.Client.CoreV1().Pods("a").Patch(t.Context(), members[0].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("a").Get(ctx, members[0].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r := &Result{}
		if raw := p.Annotations[AnnotationResult]; raw == "" || json.Unmarshal([]byte(raw), r) != nil {
			return false, nil
		}
		return r.Outcome == OutcomePending && r.PodGroup == "a/g" && r.GroupFailure != "", nil
	}); err != nil {
		t.Errorf("the member that asked after its group failed was not explained: %v", err)
	}
}

// A pod that a cycle placed and a Permit plugin then rejected (a gang
// member Coscheduling held until its gang timed out, or released) never
// reaches PostFilter: it is explained as pending in the scheduler's words,
// from its PodScheduled condition. Seen in the 30-minute soak as gang
// members that asked and had no explanation.
func TestAPodRejectedAtPermitIsExplained(t *testing.T) {
	c := rejectingCluster(t)
	p := st.MakePod().Namespace("a").Name("held").UID("held").SchedulerName("rejecting").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).
		Annotation(AnnotationRequest, "true").Obj()
	if _, err := c.Client.CoreV1().Pods("a").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := explainedPending(t, c, "held")
	if err != nil {
		t.Fatalf("the pod rejected at Permit was not explained as pending (last result %+v): %v", r, err)
	}
	if !strings.Contains(r.Rejection, rejectedAtPermit) {
		t.Errorf("rejection %q: want the scheduler's message, with %q", r.Rejection, rejectedAtPermit)
	}
}

// A pod rejected at Permit with the message its PodScheduled condition
// already holds (a gang member held and released again, its earlier
// explanation lost with the leader that wrote it, or never made) gets no
// status update: the scheduler writes the condition only when it changes,
// and no update reached Explain. It is explained all the same, from the
// message it has. Seen in every 30-minute soak at 1,000 nodes: the held
// members of a gang with a misfit member, rejected again and again with one
// message, never explained.
func TestAPodRejectedAtPermitAgainWithTheSameMessageIsExplained(t *testing.T) {
	c := rejectingCluster(t)
	p := st.MakePod().Namespace("a").Name("again").UID("again").SchedulerName("rejecting").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).
		Annotation(AnnotationRequest, "true").Condition(v1.PodScheduled, v1.ConditionFalse, v1.PodReasonUnschedulable).Obj()
	// The message the scheduler writes for a rejection at Permit in the
	// scheduling cycle.
	p.Status.Conditions[0].Message = "0/1 nodes are available: 1 " + rejectedAtPermit + "."
	p.Status.Conditions[0].LastTransitionTime = metav1.Now()
	if _, err := c.Client.CoreV1().Pods("a").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := explainedPending(t, c, "again")
	if err != nil {
		t.Fatalf("the pod rejected at Permit with its condition's message was not explained as pending (last result %+v): %v", r, err)
	}
	for _, a := range c.Client.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetName() == "again" && strings.Contains(string(pa.GetPatch()), `"conditions"`) {
			t.Fatalf("the scheduler wrote the pod's condition (%s): the message must be the one the scheduler writes, for this test", pa.GetPatch())
		}
	}
	if !strings.Contains(r.Rejection, rejectedAtPermit) {
		t.Errorf("rejection %q: want the scheduler's message, with %q", r.Rejection, rejectedAtPermit)
	}
}

// A pod that fits no node keeps the explanation its PostFilter wrote (the
// nodes that rejected it, the nearest): only a pod Unreserve marked is
// explained from the scheduler's message.
func TestAPodThatFitsNoNodeKeepsItsPostFilterExplanation(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: plain
  plugins:
    multiPoint:
      enabled:
      - name: Explain
`
	c := writingClusterWith(t, config, nil)
	p := st.MakePod().Namespace("a").Name("big").UID("big").SchedulerName("plain").Req(map[v1.ResourceName]string{v1.ResourceCPU: "8"}).
		Annotation(AnnotationRequest, "true").Obj()
	if _, err := c.Client.CoreV1().Pods("a").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !c.Unschedulable(t, []*v1.Pod{p}, "Insufficient cpu") {
		t.Fatal("the pod has no PodScheduled=False condition")
	}
	result := func(ctx context.Context) (*Result, error) {
		got, err := c.Client.CoreV1().Pods("a").Get(ctx, "big", metav1.GetOptions{})
		if err != nil || got.Annotations[AnnotationResult] == "" {
			return nil, err
		}
		r := &Result{}
		return r, json.Unmarshal([]byte(got.Annotations[AnnotationResult]), r)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := result(ctx)
		return r != nil, err
	}); err != nil {
		t.Fatalf("not explained: %v", err)
	}
	// The condition's update has reached the informer (Unschedulable saw
	// it): the explanation must stay PostFilter's.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		r, err := result(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Rejection != "" || len(r.Rejections) == 0 {
			t.Fatalf("explanation %+v: want PostFilter's (the nodes that rejected it), no rejection message", r)
		}
	}
}

// A rejection explained late (its informer handler ran after the next
// cycle's Reserve) is numbered as of its Unreserve, so that placement
// supersedes it and the writer drops it.
func TestALateRejectionIsSupersededByThePlacementAfterIt(t *testing.T) {
	w := &writer{}
	atUnreserve := w.next()
	w.placing("p", false)
	if w.superseded(item{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}, seq: atUnreserve}) {
		t.Fatal("a placement of a pod with nothing queued and no Unreserve before marked it")
	}
	w.placing("p", true)
	if !w.superseded(item{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}, seq: atUnreserve}) {
		t.Error("the rejection numbered at Unreserve is not superseded by the placement after it")
	}
}

// explainedPending waits until the pod's explanation says Pending, and
// returns it (the last one read, if it never does).
func explainedPending(t *testing.T, c *podgroupcycle.Cluster, name string) (*Result, error) {
	const ns = "a" // every such test's pods are in namespace a
	t.Helper()
	var r *Result
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if raw := got.Annotations[AnnotationResult]; raw != "" {
			r = &Result{}
			if err := json.Unmarshal([]byte(raw), r); err != nil {
				return false, err
			}
			return r.Outcome == OutcomePending, nil
		}
		return false, nil
	})
	return r, err
}

// rejectingCluster is writingCluster with a profile, "rejecting", whose
// Permit rejects every pod.
func rejectingCluster(t *testing.T) *podgroupcycle.Cluster {
	t.Helper()
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: rejecting
  plugins:
    multiPoint:
      enabled:
      - name: Explain
      - name: RejectsAtPermit
`
	return writingClusterWith(t, config, frameworkruntime.Registry{"RejectsAtPermit": func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return rejectsAtPermit{}, nil
	}})
}

const rejectedAtPermit = "the test's Permit rejects every pod"

// rejectsAtPermit rejects every pod at Permit.
type rejectsAtPermit struct{}

func (rejectsAtPermit) Name() string { return "RejectsAtPermit" }
func (rejectsAtPermit) Permit(context.Context, fwk.CycleState, *v1.Pod, string) (*fwk.Status, time.Duration) {
	return fwk.NewStatus(fwk.Unschedulable, rejectedAtPermit), 0
}

func init() {
	// No leader election in these tests: write once synced. Set before any
	// test starts (as the other plugins' tests do): a test's scheduler
	// informers still read it while the next test starts, and writing it
	// from a test raced with them (seen under -race in CI).
	leadership.ElectionGrace = 0
	// An unreserved pod whose message stays is explained at once.
	unchangedGrace = 100 * time.Millisecond
}

// writingCluster runs config's scheduler on one node of 2 CPUs and waits
// until Explain may write from its pod informer (its explanations of
// pending group members): the process has synced and, with no leader
// election in these tests, needs no grace.
func writingCluster(t *testing.T, config string) *podgroupcycle.Cluster {
	t.Helper()
	return writingClusterWith(t, config, nil)
}

// writingClusterWith is writingCluster with more out-of-tree plugins, and
// objs in the API before the scheduler starts.
func writingClusterWith(t *testing.T, config string, more frameworkruntime.Registry, objs ...runtime.Object) *podgroupcycle.Cluster {
	t.Helper()
	c, _ := writingClusterOf(t, config, more, objs...)
	return c
}

// writingClusterOf is writingClusterWith that also returns the plugin.
func writingClusterOf(t *testing.T, config string, more frameworkruntime.Registry, objs ...runtime.Object) (*podgroupcycle.Cluster, *Explain) {
	t.Helper()
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	var pl *Explain
	reg := frameworkruntime.Registry{Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, obj, h)
		if err == nil {
			pl = p.(*Explain)
		}
		return p, err
	}}
	for name, f := range more {
		reg[name] = f
	}
	c := podgroupcycle.New(t, config, reg, append([]runtime.Object{n1}, objs...)...)
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.leader.Allowed(), nil
	}); err != nil {
		t.Fatal("Explain never learnt that it may write")
	}
	return c, pl
}

// A PodGroup member's group failure delivered late, after the member's next
// Reserve (routine with upstream's SchedulerAsyncAPICalls: the failure's
// status write lands after that Reserve), is not explained: it is older
// than the placement, and written after it would leave the bound member
// explained as pending (seen in the 1,000-node soak). It spends no budget
// and no repeatPending, so the failure after the placement is undone is
// explained.
func TestALateGroupFailureDoesNotOverwriteThePlacement(t *testing.T) {
	nodes, pods := cluster()
	s := newSim(t, nil, nodes, pods)
	s.pl.out = newQueue(s.f) // no worker: what is queued stays to be read
	t.Cleanup(s.pl.out.queue.ShutDown)
	s.pl.leader = nil // no election: this replica schedules
	member := asking("member", "1")
	member.Spec.SchedulerName = "berth"
	member.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
	failed := func(p *v1.Pod, msg string) *v1.Pod {
		p = p.DeepCopy()
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg}}
		return p
	}
	late := failed(member, "pod group is unschedulable (the failure before the placement)")
	store := s.f.SharedInformerFactory().Core().V1().Pods().Informer().GetStore()
	if err := store.Add(late); err != nil { // the informer's store holds the update its handler runs for
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	if _, st, _ := s.f.RunPreFilterPlugins(s.ctx, state, member); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := s.f.RunReservePluginsReserve(s.ctx, state, assumed(member, "big"), "big"); !st.IsSuccess() {
		t.Fatal(st)
	}
	logger := klog.FromContext(s.ctx)
	s.pl.podUpdated(logger, member, late)
	if n := s.pl.out.queue.Len(); n != 0 {
		t.Fatalf("%d explanations queued: the group failure delivered after the member's Reserve was taken for its explanation", n)
	}
	if v, _ := s.pl.lastPending.Load(member.UID); func() bool { _, made := v.(time.Time); return made }() {
		t.Fatal("the stale group failure counted as the member's explanation (repeatPending)")
	}
	s.f.RunReservePluginsUnreserve(s.ctx, state, assumed(member, "big"), "big")
	again := failed(member, "pod group is unschedulable (after the placement was undone)")
	if err := store.Update(again); err != nil {
		t.Fatal(err)
	}
	s.pl.podUpdated(logger, late, again)
	if n := s.pl.out.queue.Len(); n != 1 {
		t.Fatalf("%d explanations queued after the placement was undone, want the new failure's", n)
	}
}
