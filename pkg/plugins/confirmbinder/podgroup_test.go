package confirmbinder

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

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
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
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
	var pl *ConfirmBinder
	reg := frameworkruntime.Registry{Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, obj, h)
		if err == nil {
			pl = p.(*ConfirmBinder)
		}
		return p, err
	}}
	// Room for two of the gang's three 1-CPU members.
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	c := podgroupcycle.New(t, config, reg, n1)
	before := inFlight(pl.nodes)
	members := c.Gang(t, "a", "g", 3, 3, func(i int) *v1.Pod {
		return st.MakePod().Name(fmt.Sprintf("m-%d", i)).SchedulerName("gangs").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	})
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False", got)
	}
	if after := inFlight(pl.nodes); !maps.Equal(before, after) {
		t.Errorf("in flight after the reverted cycle: %v, before: %v", after, before)
	}
	// The cycle did reserve two members before it gave up.
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("a").Get(ctx, members[0].Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && strings.Contains(cond.Message, "2 scheduled") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Error("no member's status says the cycle placed 2 members before it reverted them")
	}
}
