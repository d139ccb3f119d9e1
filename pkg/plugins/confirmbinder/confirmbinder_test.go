package confirmbinder

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
	"github.com/berth-scheduler/berth/internal/fakeapi"
)

// testHandle is the part of the framework handle ConfirmBinder and
// DefaultBinder use.
type testHandle struct {
	fwk.Handle
	client   kubernetes.Interface
	recorder *events.FakeRecorder
	snapshot *cache.Snapshot
}

func (h *testHandle) ClientSet() kubernetes.Interface                        { return h.client }
func (h *testHandle) EventRecorder() events.EventRecorderLogger              { return h.recorder }
func (h *testHandle) SnapshotSharedLister() fwk.SharedLister                 { return h.snapshot }
func (h *testHandle) APICacher() fwk.APICacher                               { return nil }
func (h *testHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

func args(t testing.TB, mutate func(*configv1.ConfirmBinderArgs)) *config.ConfirmBinderArgs {
	t.Helper()
	a := &configv1.ConfirmBinderArgs{}
	if mutate != nil {
		mutate(a)
	}
	configv1.SetDefaults_ConfirmBinderArgs(a)
	out := &config.ConfirmBinderArgs{}
	if err := configv1.Convert_v1_ConfirmBinderArgs_To_config_ConfirmBinderArgs(a, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// node n1 has 4 CPU, 8Gi, 10 pods, 2 GPUs.
func liveNode() *v1.Node {
	return st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "10", "nvidia.com/gpu": "2"}).Obj()
}

func boundPod(name string, req map[v1.ResourceName]string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Node("n1").Container("c").Req(req).Obj()
}

func newTestPlugin(t testing.TB, mutate func(*configv1.ConfirmBinderArgs), objs ...runtime.Object) (*ConfirmBinder, *fake.Clientset, *testHandle) {
	t.Helper()
	client := fake.NewClientset(objs...)
	// The fake does not apply Bindings: do it, so that a bound pod shows in
	// the next LIST, as it does on an API server.
	client.PrependReactor("create", "pods", fakeapi.BindThroughTracker(client.Tracker(), nil))
	h := &testHandle{client: client, recorder: events.NewFakeRecorder(10000), snapshot: cache.NewSnapshot(nil, []*v1.Node{liveNode()})}
	_, ctx := ktesting.NewTestContext(t)
	// The plugin's goroutines (the process fence's beat) end with the test.
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	p, err := New(ctx, args(t, mutate), h)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*ConfirmBinder), client, h
}

func always(a *configv1.ConfirmBinderArgs) { a.Confirm = configv1.ConfirmAlways }

func bind(t *testing.T, pl *ConfirmBinder, pod *v1.Pod) *fwk.Status {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	if s := pl.Reserve(ctx, state, pod, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	return pl.Bind(ctx, state, pod, "n1")
}

// A Kubernetes PodGroup cycle's try of a member is no binding in flight:
// the cycle may revert it, and the binding's own Reserve counts it. Were it
// counted, another pod's confirmation on the node would see room taken that
// no pod may ever hold.
func TestAPodGroupCyclesTryIsNotInFlight(t *testing.T) {
	pl, _, _ := newTestPlugin(t, always, liveNode(), boundPod("bound", map[v1.ResourceName]string{"cpu": "2"}))
	_, ctx := ktesting.NewTestContext(t)
	groupCycle := framework.NewCycleState()
	groupCycle.SetPodGroupSchedulingCycle(framework.NewCycleState())
	member := st.MakePod().Namespace("ns").Name("member").UID("member").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	if s := pl.Reserve(ctx, groupCycle, member, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	// 2 bound + 2 for x = 4 of n1's 4 CPUs: x fits unless the try counts.
	x := st.MakePod().Namespace("ns").Name("x").UID("x").Container("c").Req(map[v1.ResourceName]string{"cpu": "2"}).Obj()
	if _, err := pl.handle.ClientSet().CoreV1().Pods("ns").Create(ctx, x, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := bind(t, pl, x); !s.IsSuccess() {
		t.Errorf("x refused with a gang member only tried on n1: %v", s)
	}
	// The revert of the try leaves a binding's entry alone.
	pl.Unreserve(ctx, groupCycle, member, "n1")
	binding := framework.NewCycleState()
	pl.Reserve(ctx, binding, member, "n1")
	pl.Unreserve(ctx, groupCycle, member, "n1")
	if got := inFlight(pl.nodes); got["n1"] != 1 {
		t.Errorf("in flight after a late revert of the try: %v, want the binding's member on n1", got)
	}
}

func countActions(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

func TestConfirm(t *testing.T) {
	incoming := func(req map[v1.ResourceName]string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name("incoming").UID("incoming").Container("c").Req(req).Obj()
	}
	tainted := liveNode()
	tainted.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
	cordoned := liveNode()
	cordoned.Spec.Unschedulable = true
	finished := boundPod("done", map[v1.ResourceName]string{"cpu": "3"})
	finished.Status.Phase = v1.PodSucceeded
	tenPods := []runtime.Object{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		tenPods = append(tenPods, boundPod("p-"+n, map[v1.ResourceName]string{"cpu": "10m"}))
	}
	tests := []struct {
		name    string
		node    *v1.Node
		objs    []runtime.Object
		pod     *v1.Pod
		wantErr string // substring of the failure; "" means bound
	}{
		{name: "fits", node: liveNode(), objs: []runtime.Object{boundPod("a", map[v1.ResourceName]string{"cpu": "2"})}, pod: incoming(map[v1.ResourceName]string{"cpu": "2"})},
		{name: "cpu conflict", node: liveNode(), objs: []runtime.Object{boundPod("a", map[v1.ResourceName]string{"cpu": "3"})}, pod: incoming(map[v1.ResourceName]string{"cpu": "2"}),
			wantErr: "insufficient cpu: requested 2, used 3, allocatable 4"},
		{name: "memory conflict", node: liveNode(), objs: []runtime.Object{boundPod("a", map[v1.ResourceName]string{"memory": "7Gi"})}, pod: incoming(map[v1.ResourceName]string{"memory": "2Gi"}),
			wantErr: "insufficient memory: requested 2Gi, used 7Gi, allocatable 8Gi"},
		{name: "extended resource conflict", node: liveNode(), objs: []runtime.Object{boundPod("a", map[v1.ResourceName]string{"nvidia.com/gpu": "2"})}, pod: incoming(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}),
			wantErr: "insufficient nvidia.com/gpu: requested 1, used 2, allocatable 2"},
		{name: "pod count conflict", node: liveNode(), objs: tenPods, pod: incoming(map[v1.ResourceName]string{"cpu": "10m"}), wantErr: "pods: 10 bound, allocatable 10"},
		{name: "host port conflict", node: liveNode(), objs: []runtime.Object{st.MakePod().Namespace("ns").Name("a").UID("a").Node("n1").HostPort(8080).Obj()},
			pod: st.MakePod().Namespace("ns").Name("incoming").UID("incoming").HostPort(8080).Obj(), wantErr: "host port TCP/8080 is in use"},
		{name: "terminal pods ignored", node: liveNode(), objs: []runtime.Object{finished}, pod: incoming(map[v1.ResourceName]string{"cpu": "2"})},
		{name: "node deleted", pod: incoming(map[v1.ResourceName]string{"cpu": "1"}), wantErr: "the node was deleted"},
		{name: "node cordoned", node: cordoned, pod: incoming(map[v1.ResourceName]string{"cpu": "1"}), wantErr: "the node was cordoned"},
		{name: "node newly tainted", node: tainted, pod: incoming(map[v1.ResourceName]string{"cpu": "1"}), wantErr: "taint maintenance:NoSchedule"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]runtime.Object{tc.pod}, tc.objs...)
			if tc.node != nil {
				objs = append(objs, tc.node)
			}
			pl, client, h := newTestPlugin(t, always, objs...)
			s := bind(t, pl, tc.pod)
			bindings := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
					bindings++
				}
			}
			if tc.wantErr == "" {
				if !s.IsSuccess() || bindings != 1 {
					t.Fatalf("status %v, %d bindings; want success and one binding", s, bindings)
				}
				return
			}
			if s.IsSuccess() || !strings.Contains(s.Message(), tc.wantErr) {
				t.Fatalf("status %v, want a failure containing %q", s, tc.wantErr)
			}
			if bindings != 0 {
				t.Errorf("%d bindings written for a conflicting pod", bindings)
			}
			select {
			case e := <-h.recorder.Events:
				if !strings.Contains(e, EventReasonBindConflict) || !strings.Contains(e, tc.wantErr) {
					t.Errorf("event %q lacks the reason or the detail", e)
				}
			default:
				t.Error("no BindConflict event")
			}
		})
	}
}

func TestWhenTightSkipsRoomyNodes(t *testing.T) {
	pod := st.MakePod().Namespace("ns").Name("small").UID("small").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	pl, client, _ := newTestPlugin(t, nil, pod, liveNode())
	if s := bind(t, pl, pod); !s.IsSuccess() {
		t.Fatal(s)
	}
	if n := countActions(client, "list", "pods") + countActions(client, "get", "nodes"); n != 0 {
		t.Errorf("a roomy node was confirmed: %d API reads, want 0", n)
	}
	// 3.7 of 4 CPU leaves 7.5% < 10%: tight, confirmed.
	big := st.MakePod().Namespace("ns").Name("big").UID("big").Container("c").Req(map[v1.ResourceName]string{"cpu": "3700m"}).Obj()
	pl, client, _ = newTestPlugin(t, nil, big, liveNode())
	if s := bind(t, pl, big); !s.IsSuccess() {
		t.Fatal(s)
	}
	if n := countActions(client, "list", "pods"); n != 1 {
		t.Errorf("tight node: %d pod LISTs, want 1", n)
	}
}

func TestConfirmErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   configv1.ConfirmErrorPolicy
		reactor  clienttesting.ReactionFunc
		wantBind bool
	}{
		{"API error, Requeue", configv1.ConfirmErrorRequeue, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("etcdserver: leader changed")
		}, false},
		{"API error, Bind", configv1.ConfirmErrorBind, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("etcdserver: leader changed")
		}, true},
		{"timeout, Requeue", configv1.ConfirmErrorRequeue, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, context.DeadlineExceeded
		}, false},
		{"timeout, Bind", configv1.ConfirmErrorBind, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, context.DeadlineExceeded
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := st.MakePod().Namespace("ns").Name("p").UID("p").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			pl, client, _ := newTestPlugin(t, func(a *configv1.ConfirmBinderArgs) {
				a.Confirm = configv1.ConfirmAlways
				a.OnConfirmError = tc.policy
				a.ConfirmTimeout = &metav1.Duration{Duration: time.Second}
			}, pod, liveNode())
			client.PrependReactor("list", "pods", tc.reactor)
			s := bind(t, pl, pod)
			if s.IsSuccess() != tc.wantBind {
				t.Errorf("status %v, want bound=%v", s, tc.wantBind)
			}
		})
	}
}

// TestParallelBindsSeeEachOther releases binding cycles for one node at once,
// as the scheduler reserves them: its cache shows 4 free CPUs and it reserves
// four 1-CPU pods, while another scheduler has bound a 1-CPU pod there. With
// the node lock and the in-flight pods counted, exactly three bind: the
// first confirmation counts all four in flight and refuses its pod, and each
// later one sees the pods bound before it.
func TestParallelBindsSeeEachOther(t *testing.T) {
	var objs []runtime.Object
	var pods []*v1.Pod
	for i := range 4 {
		p := st.MakePod().Namespace("ns").Name("p" + string(rune('a'+i))).UID("p" + string(rune('a'+i))).Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
		pods = append(pods, p)
		objs = append(objs, p)
	}
	objs = append(objs, liveNode(), boundPod("other-scheduler", map[v1.ResourceName]string{"cpu": "1"}))
	pl, client, _ := newTestPlugin(t, always, objs...)
	_, ctx := ktesting.NewTestContext(t)
	states := make([]fwk.CycleState, len(pods))
	for i, p := range pods {
		states[i] = framework.NewCycleState()
		pl.Reserve(ctx, states[i], p, "n1")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	bound, refused := 0, 0
	for i, p := range pods {
		wg.Go(func() {
			s := pl.Bind(ctx, states[i], p, "n1")
			if !s.IsSuccess() {
				pl.Unreserve(ctx, states[i], p, "n1")
			}
			mu.Lock()
			defer mu.Unlock()
			if s.IsSuccess() {
				bound++
			} else if strings.Contains(s.Message(), "insufficient cpu") {
				refused++
			}
		})
	}
	wg.Wait()
	if bound != 3 || refused != 1 {
		t.Errorf("%d bound, %d refused for cpu; want 3 and 1 (4 CPU, 1 taken by another scheduler's pod)", bound, refused)
	}
	if n := countActions(client, "list", "pods"); n != len(pods) {
		t.Errorf("%d pod LISTs, want one per binding (%d)", n, len(pods))
	}
}
