package celpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // the plugins' args in the config scheme, as in main
	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// Kubernetes' PodGroup cycle assumes each member into the snapshot's
// NodeInfo and keeps its generation (Snapshot.AssumePod), so a node state
// cached by generation does not see the members placed before: a rule on
// nodeInfo must be evaluated afresh in that cycle. Here the rule allows one
// more pod on the only node, and a gang of two asks for two: the second
// member must be rejected and the gang left unplaced. Before the fix it
// read the state cached for the first member (one pod on the node) and the
// gang was bound whole, against the rule.
func TestARuleOnNodeInfoSeesThePodGroupCyclesMembers(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: CELPolicy
  pluginConfig:
  - name: CELPolicy
    args:
      rules:
      - name: at-most-two-pods
        filter: "nodeInfo.podCount < 2"
        message: "node has two pods"
`
	reg := frameworkruntime.Registry{Name: New}
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	bound := st.MakePod().Namespace("other").Name("bound").UID("other/bound").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	c := podgroupcycle.New(t, config, reg, n1, bound)
	members := c.Gang(t, "a", "g", 2, 2, podgroupcycle.Member("1"))
	if got := c.Attempted(t, "a", "g"); got != "False" {
		t.Fatalf("the group's PodGroupInitiallyScheduled is %s, want False: the rule allows one member only", got)
	}
	if !c.Unschedulable(t, members, "node has two pods") {
		t.Error("no member's status names the rule that rejected the second member")
	}
}
