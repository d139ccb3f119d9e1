package loadaware

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // the plugins' args in the config scheme, as in main
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// trackedPods lists the tracker's pods and each node's published view.
func trackedPods(t *tracker, nodes ...string) (pods []types.UID, published map[string]int) {
	t.mu.Lock()
	pods = slices.Sorted(maps.Keys(t.pods))
	t.mu.Unlock()
	published = map[string]int{}
	for _, n := range nodes {
		if np := t.onNode.Load(n); np != nil {
			published[n] = len(np.pods)
		}
	}
	return pods, published
}

// Kubernetes' PodGroup cycle reserves each member to try the group and
// reverts them all when the group does not fit: LoadAware counts a member's
// estimate from its Reserve (so the next member sees it) and must forget it
// at the revert. Run through the real cycle (scheduler.New with the
// GenericWorkload gate).
func TestARevertedPodGroupCycleLeavesNoEstimates(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: LoadAware
  pluginConfig:
  - name: LoadAware
    args:
      source: NodeAnnotations
`
	var pl *LoadAware
	reg := podgroupcycle.Capture(Name, New, &pl)
	// Room for three of the gang's four 1-CPU members; one pod bound
	// already (its estimate is tracked, and must stay).
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	bound := st.MakePod().Namespace("other").Name("bound").UID("other/bound").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	c := podgroupcycle.New(t, config, reg, n1, bound)
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pods, _ := trackedPods(pl.tracker)
		return len(pods) == 1, nil
	}); err != nil {
		t.Fatal("the bound pod's estimate was never tracked")
	}
	beforePods, beforeNodes := trackedPods(pl.tracker, "n1")
	members := c.Gang(t, "a", "g", 4, 4, podgroupcycle.Member("1"))
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False", got)
	}
	afterPods, afterNodes := trackedPods(pl.tracker, "n1")
	if !slices.Equal(beforePods, afterPods) || !maps.Equal(beforeNodes, afterNodes) {
		t.Errorf("tracked after the reverted cycle: %v %v, before: %v %v", afterPods, afterNodes, beforePods, beforeNodes)
	}
	// The cycle did reserve three members before it gave up.
	if !c.Unschedulable(t, members, "3 scheduled") {
		t.Error("no member's status says the cycle placed 3 members before it reverted them")
	}
}
