package confirmbinder

import (
	"maps"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // the plugins' args in the config scheme, as in main
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// gangProfile is a profile with upstream's GangScheduling and ConfirmBinder
// binding (Reserve and Bind, before DefaultBinder) as its README enables it.
const gangProfile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
    reserve:
      enabled:
      - name: ConfirmBinder
    bind:
      disabled:
      - name: DefaultBinder
      enabled:
      - name: ConfirmBinder
      - name: DefaultBinder
`

// inFlight counts the pods the gate holds in flight, per node.
func inFlight(g *nodeGate) map[string]int {
	g.inFlightMu.Lock()
	defer g.inFlightMu.Unlock()
	out := map[string]int{}
	for node, pods := range g.inFlight {
		out[node] = len(pods)
	}
	return out
}

// Kubernetes' PodGroup cycle reserves each member to try the group and
// reverts them all when the group does not fit: ConfirmBinder counts a
// member in flight on its node from Reserve (a parallel binding's
// confirmation counts it) and must forget it at the revert, or it would
// refuse later bindings for room no pod holds. Run through the real cycle
// (scheduler.New with the GenericWorkload gate).
func TestARevertedPodGroupCycleLeavesNothingInFlight(t *testing.T) {
	const config = gangProfile
	var pl *ConfirmBinder
	reg := podgroupcycle.Capture(Name, New, &pl)
	// Room for two of the gang's three 1-CPU members.
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	c := podgroupcycle.New(t, config, reg, n1)
	before := inFlight(pl.nodes)
	members := c.Gang(t, "a", "g", 3, 3, podgroupcycle.Member("1"))
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False", got)
	}
	if after := inFlight(pl.nodes); !maps.Equal(before, after) {
		t.Errorf("in flight after the reverted cycle: %v, before: %v", after, before)
	}
	// The cycle did reserve two members before it gave up.
	if !c.Unschedulable(t, members, "2 scheduled") {
		t.Error("no member's status says the cycle placed 2 members before it reverted them")
	}
}

// A gang member whose binding ConfirmBinder refuses (another scheduler
// filled its node after the PodGroup cycle chose it) is handled as
// Kubernetes 1.37 handles any failed member binding: the member alone goes
// back to the queue, its group's next cycle counts the members already
// bound towards minCount and places it elsewhere, so the gang ends bound
// whole. Run through the real cycle and binding cycles (scheduler.New with
// the GenericWorkload gate).
func TestARefusedMemberIsPlacedAgainAndTheGangEndsWhole(t *testing.T) {
	const config = gangProfile + `  pluginConfig:
  - name: ConfirmBinder
    args:
      confirm: Always
`
	node := func(name string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	}
	c := podgroupcycle.NewWithBackoff(t, 1, config, frameworkruntime.Registry{Name: New}, node("n1"), node("n2"))
	// The first confirmation finds its node taken whole by a pod another
	// scheduler bound there a moment ago.
	var once sync.Once
	intruded := make(chan string, 1)
	c.Client.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		sel := action.(clienttesting.ListAction).GetListRestrictions().Fields
		node, ok := sel.RequiresExactMatch("spec.nodeName")
		if !ok {
			return false, nil, nil
		}
		once.Do(func() {
			intruder := st.MakePod().Namespace("other").Name("intruder").UID("other/intruder").Node(node).Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
			if err := c.Client.Tracker().Add(intruder); err != nil {
				t.Error(err)
			}
			intruded <- node
		})
		return false, nil, nil
	})
	members := c.Gang(t, "a", "g", 2, 2, podgroupcycle.Member("1"))
	var taken string
	select {
	case taken = <-intruded:
	case <-time.After(30 * time.Second):
		t.Fatal("no binding was confirmed")
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[taken]
	for _, p := range c.Bound(t, members) {
		if p.Spec.NodeName != other {
			t.Errorf("%s bound to %s, want %s: %s is full since the intruder came", p.Name, p.Spec.NodeName, other, taken)
		}
	}
}

// With confirm: WhenTight, a binding is confirmed when the node is tight
// after the pod, counting what the scheduler has placed there. A gang's
// members are reserved for binding after the PodGroup cycle has reverted
// them all, when the cycle's snapshot holds none of the members placed
// before: the member that fills the node must still be confirmed.
func TestTheGangMemberThatFillsANodeIsConfirmed(t *testing.T) {
	const config = gangProfile
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	c := podgroupcycle.New(t, config, frameworkruntime.Registry{Name: New}, n1)
	var mu sync.Mutex
	var confirmed []string
	c.Client.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if node, ok := action.(clienttesting.ListAction).GetListRestrictions().Fields.RequiresExactMatch("spec.nodeName"); ok {
			mu.Lock()
			confirmed = append(confirmed, node)
			mu.Unlock()
		}
		return false, nil, nil
	})
	// Four 1-CPU members on a 4-CPU node: the last leaves no headroom (the
	// default tight share is 10%); the first three leave 25% or more.
	c.Bound(t, c.Gang(t, "a", "g", 4, 4, podgroupcycle.Member("1")))
	mu.Lock()
	defer mu.Unlock()
	// Exactly the last member's: the others leave 25% or more, counting
	// each member once (the try's snapshot already holds it on n1).
	if len(confirmed) != 1 {
		t.Errorf("bindings confirmed on %v, want one (the member that leaves n1 with no headroom)", confirmed)
	}
}
