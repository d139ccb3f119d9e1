package confirmbinder

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

// A pod the scheduler accepted and the kubelet would admit is never refused:
// ConfirmBinder confirms what the kubelet confirms, no more.
func TestNoFalseConflicts(t *testing.T) {
	incoming := func(req map[v1.ResourceName]string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name("incoming").UID("incoming").Container("c").Req(req).Obj()
	}
	draBacked := incoming(map[v1.ResourceName]string{"cpu": "1", "example.com/gpu": "1"})
	draBacked.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "incoming-extended-resources",
		RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: lastContainer(draBacked), ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}},
	}
	gpuNode := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "10", "example.com/gpu": "1"}).Obj()
	gpuUser := boundPod("gpu-user", map[v1.ResourceName]string{"example.com/gpu": "1"})

	// Resized in place: the spec asks 3 CPU, the resize is infeasible, and the
	// kubelet runs (and counts) the 1 CPU it allocated.
	resized := boundPod("resized", map[v1.ResourceName]string{"cpu": "3"})
	one := v1.ResourceList{v1.ResourceCPU: *resourceQuantity("1")}
	resized.Status.ContainerStatuses = []v1.ContainerStatus{{Name: lastContainer(resized), AllocatedResources: one, Resources: &v1.ResourceRequirements{Requests: one}}}
	resized.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible}}

	for _, tc := range []struct {
		name string
		node *v1.Node
		objs []runtime.Object
		pod  *v1.Pod
	}{
		{"an extended resource the node does not advertise (NodeResourcesFit ignoredResources: example.com/licence)",
			liveNode(), nil, incoming(map[v1.ResourceName]string{"cpu": "1", "example.com/licence": "1"})},
		{"an extended resource backed by a DRA claim (DRAExtendedResource)",
			gpuNode, []runtime.Object{gpuUser}, draBacked},
		{"a pod resized in place counts what it was allocated",
			liveNode(), []runtime.Object{resized}, incoming(map[v1.ResourceName]string{"cpu": "2"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]runtime.Object{tc.pod, tc.node}, tc.objs...)
			pl, _, h := newTestPlugin(t, always, objs...)
			if s := bind(t, pl, tc.pod); !s.IsSuccess() {
				t.Errorf("status %v, want the pod bound", s)
			}
			select {
			case e := <-h.recorder.Events:
				t.Errorf("unexpected event %q", e)
			default:
			}
		})
	}
	t.Run("an extended resource the node advertises is still confirmed", func(t *testing.T) {
		p := incoming(map[v1.ResourceName]string{"nvidia.com/gpu": "1"})
		pl, _, _ := newTestPlugin(t, always, p, liveNode(), boundPod("a", map[v1.ResourceName]string{"nvidia.com/gpu": "2"}))
		if s := bind(t, pl, p); s.IsSuccess() || !strings.Contains(s.Message(), "insufficient nvidia.com/gpu") {
			t.Errorf("status %v, want an nvidia.com/gpu conflict", s)
		}
	})
	t.Run("the node no longer matches the pod's required node affinity", func(t *testing.T) {
		p := st.MakePod().Namespace("ns").Name("incoming").UID("incoming").NodeSelector(map[string]string{"pool": "batch"}).Obj()
		pl, _, _ := newTestPlugin(t, always, p, liveNode())
		if s := bind(t, pl, p); s.IsSuccess() || !strings.Contains(s.Message(), "node affinity") {
			t.Errorf("status %v, want a node-affinity conflict", s)
		}
	})
}

// lastContainer names the container st's Req added.
func lastContainer(p *v1.Pod) string { return p.Spec.Containers[len(p.Spec.Containers)-1].Name }

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// confirmTimeout bounds the whole confirmation: a binding cycle waiting for a
// node's lock, held by a confirmation whose API calls hang, gives up within it.
func TestConfirmTimeoutBoundsTheLockWait(t *testing.T) {
	slow := st.MakePod().Namespace("ns").Name("slow").UID("slow").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	p := st.MakePod().Namespace("ns").Name("p").UID("p").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	pl, client, _ := newTestPlugin(t, func(a *configv1.ConfirmBinderArgs) {
		a.Confirm = configv1.ConfirmAlways
		a.ConfirmTimeout = &metav1.Duration{Duration: 200 * time.Millisecond}
	}, slow, p, liveNode())
	// The first LIST hangs (an API server that does not answer, and a client
	// that does not give up) until the test ends.
	release, listing := make(chan struct{}), make(chan struct{})
	var once sync.Once
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(listing)
			<-release
		}
		return false, nil, nil
	})
	_, ctx := ktesting.NewTestContext(t)
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		state := framework.NewCycleState()
		pl.Reserve(ctx, state, slow, "n1")
		pl.Bind(ctx, state, slow, "n1")
	}()
	// The slow cycle logs through the test's logger: it must end before the test.
	defer func() {
		close(release)
		<-slowDone
	}()
	<-listing // slow holds n1's lock
	done := make(chan *fwk.Status, 1)
	go func() {
		state := framework.NewCycleState()
		pl.Reserve(ctx, state, p, "n1")
		done <- pl.Bind(ctx, state, p, "n1")
	}()
	select {
	case s := <-done:
		if s.IsSuccess() || !strings.Contains(s.Message(), "confirmation lock") {
			t.Errorf("status %v, want a failure that names the lock wait", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Bind still waiting for the node's lock 30s after a 200ms confirmTimeout")
	}
}

// Two profiles in one process bind to the same nodes: they share the lock
// and each sees the other's pods in flight.
func TestProfilesShareLockAndInFlight(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := st.MakePod().Namespace("ns").Name("a").UID("a").Container("c").Req(map[v1.ResourceName]string{"cpu": "3"}).Obj()
	b := st.MakePod().Namespace("ns").Name("b").UID("b").Container("c").Req(map[v1.ResourceName]string{"cpu": "3"}).Obj()
	client := fake.NewClientset(a, b, liveNode())
	newProfile := func() *ConfirmBinder {
		h := &testHandle{client: client, recorder: events.NewFakeRecorder(100), snapshot: cache.NewSnapshot(nil, []*v1.Node{liveNode()})}
		p, err := New(ctx, args(t, always), h)
		if err != nil {
			t.Fatal(err)
		}
		return p.(*ConfirmBinder)
	}
	one, two := newProfile(), newProfile()
	// Profile one reserved a on n1 and has not bound it yet; profile two's b
	// would overcommit n1 (3 + 3 > 4 CPU).
	one.Reserve(ctx, framework.NewCycleState(), a, "n1")
	state := framework.NewCycleState()
	two.Reserve(ctx, state, b, "n1")
	if s := two.Bind(ctx, state, b, "n1"); s.IsSuccess() || !strings.Contains(s.Message(), "insufficient cpu") {
		t.Errorf("status %v, want a cpu conflict with the other profile's pod in flight", s)
	}
}

type informerHandle struct {
	*testHandle
	factory informers.SharedInformerFactory
}

func (h *informerHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// Node churn must not grow the lock map: a deleted node's lock is forgotten.
func TestNodeLocksShrinkWithNodeChurn(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	h := &informerHandle{testHandle: &testHandle{client: client, recorder: events.NewFakeRecorder(10)}, factory: factory}
	p, err := New(ctx, args(t, always), h)
	if err != nil {
		t.Fatal(err)
	}
	pl := p.(*ConfirmBinder)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// The fake clientset does not replay what happened between the
	// informer's list and its watch: events before the watch is established
	// are lost (and their locks with them; this test then hung until its
	// timeout under load). A sentinel seen through the informer proves the
	// watch is up; one created too early is lost too, so another follows.
	nodeLister := factory.Core().V1().Nodes().Lister()
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("the node informer never saw a sentinel node")
		}
		name := fmt.Sprintf("sentinel-%d", i)
		if _, err := client.CoreV1().Nodes().Create(ctx, st.MakeNode().Name(name).Obj(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		seen := false
		for deadline := time.Now().Add(time.Second); !seen && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			_, err := nodeLister.Get(name)
			seen = err == nil
		}
		if seen {
			break
		}
	}
	locks := func() int {
		n := 0
		pl.nodes.locks.Range(func(any, any) bool { n++; return true })
		return n
	}
	// waitForNoLocks polls the informer's handler (the fake's watch buffers
	// 100 events, so the test lets it drain batch by batch).
	waitForNoLocks := func() {
		deadline := time.Now().Add(30 * time.Second)
		for locks() != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for batch := range 40 {
		for i := batch * 25; i < (batch+1)*25; i++ {
			n := st.MakeNode().Name(fmt.Sprintf("n%d", i)).Obj()
			if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			unlock, err := pl.nodes.lock(ctx, n.Name) // as a confirmation does
			if err != nil {
				t.Fatal(err)
			}
			unlock()
			if err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitForNoLocks()
	}
	if n := locks(); n != 0 {
		t.Errorf("%d node locks left after every node was deleted, want 0", n)
	}
	// A binding cycle that ends after its node's deletion does not bring the lock back.
	late := st.MakePod().Namespace("ns").Name("late").UID("late").Obj()
	state := framework.NewCycleState()
	pl.Reserve(ctx, state, late, "n999")
	if s := pl.Bind(ctx, state, late, "n999"); s.IsSuccess() {
		t.Errorf("bound to a deleted node")
	}
	if n := locks(); n != 0 {
		t.Errorf("%d node locks left after a late binding cycle for a deleted node, want 0", n)
	}
	if len(pl.nodes.inFlight) != 0 {
		t.Errorf("%d nodes with pods in flight, want 0", len(pl.nodes.inFlight))
	}
}
