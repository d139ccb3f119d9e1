package celpolicy

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

// Every expression gives the same result on the projected objects as on the
// whole ones, and the projection holds only what the expressions select.
func TestProjectionKeepsWhatRulesRead(t *testing.T) {
	pod := st.MakePod().Namespace("ml").Name("train").Label("tier", "batch").Annotation("a", "b").
		Container("c").Req(map[v1.ResourceName]string{"cpu": "1", "nvidia.com/gpu": "1"}).
		NodeSelector(map[string]string{"pool": "gpu"}).Priority(7).Obj()
	pod.Status.Phase = v1.PodPending
	node := st.MakeNode().Name("n1").Label("lifecycle", "spot").Label("topology.kubernetes.io/zone", "z1").
		Capacity(map[v1.ResourceName]string{"cpu": "8", "pods": "110"}).Obj()
	node.Spec.Unschedulable = true
	for _, tc := range []struct {
		name, match, filter string
		podFields           map[string]map[string]bool
		podWhole, nodeWhole bool
		nodeFields          map[string]map[string]bool
	}{
		{name: "labels", match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", filter: "'lifecycle' in node.metadata.labels",
			podFields: map[string]map[string]bool{"metadata": {"labels": true}}, nodeFields: map[string]map[string]bool{"metadata": {"labels": true}}},
		{name: "containers", match: "pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))", filter: "!node.spec.unschedulable",
			podFields: map[string]map[string]bool{"spec": {"containers": true}}, nodeFields: map[string]map[string]bool{"spec": {"unschedulable": true}}},
		{name: "presence and status", match: "has(pod.spec.nodeSelector) && pod.status.phase == 'Pending' && pod.metadata.name == 'train'",
			filter:     "node.status.capacity['cpu'] == '8'",
			podFields:  map[string]map[string]bool{"spec": {"nodeSelector": true}, "status": {"phase": true}, "metadata": {"name": true}},
			nodeFields: map[string]map[string]bool{"status": {"capacity": true}}},
		{name: "whole top-level field", match: "[pod.metadata].size() == 1 && pod.spec.priority == 7", filter: "node.metadata.name == 'n1'",
			podFields: map[string]map[string]bool{"metadata": nil, "spec": {"priority": true}}, nodeFields: map[string]map[string]bool{"metadata": {"name": true}}},
		{name: "pod and node read together", match: "pod.kind == '' || true", filter: "node.metadata.labels['topology.kubernetes.io/zone'] != pod.metadata.?labels.?zone.orValue('')",
			podFields: map[string]map[string]bool{"kind": nil, "metadata": {"labels": true}}, nodeFields: map[string]map[string]bool{"metadata": {"labels": true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, config.CELPolicyRule{Name: "r", Match: tc.match, Filter: tc.filter})
			if pl.podProj.whole != tc.podWhole || pl.nodeProj.whole != tc.nodeWhole {
				t.Fatalf("whole: pod %v node %v, want %v %v", pl.podProj.whole, pl.nodeProj.whole, tc.podWhole, tc.nodeWhole)
			}
			if diff := cmp.Diff(tc.podFields, pl.podProj.fields); diff != "" {
				t.Errorf("pod fields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.nodeFields, pl.nodeProj.fields); diff != "" {
				t.Errorf("node fields (-want +got):\n%s", diff)
			}
			projected := evalRule(t, pl, pod, node, pl.podProj, pl.nodeProj)
			whole := evalRule(t, pl, pod, node, &projection{whole: true}, &projection{whole: true})
			if projected != whole {
				t.Errorf("projected objects give %q, whole objects %q", projected, whole)
			}
		})
	}
}

// evalRule evaluates the plugin's only rule's match and filter.
func evalRule(t *testing.T, pl *CELPolicy, pod *v1.Pod, node *v1.Node, podProj, nodeProj *projection) string {
	t.Helper()
	pv, err := pl.env.podVal(pod, podProj)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := pl.env.nodeVal(node, nodeProj)
	if err != nil {
		t.Fatal(err)
	}
	act := &activation{pod: pv, node: nv}
	r := pl.rules[0]
	out := ""
	for _, x := range []*expr{r.match, r.filter} {
		v, _, err := x.prg.Eval(act)
		if err != nil {
			out += "error " + err.Error() + ";"
			continue
		}
		out += fmt.Sprint(v.Value()) + ";"
	}
	return out
}

// A variable used other than by selecting its fields is converted whole.
func TestProjectionWholeObject(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "r", Match: "pod == pod", Filter: "true"})
	if !pl.podProj.whole {
		t.Errorf("pod compared whole, but projection %v", pl.podProj.fields)
	}
	if len(pl.nodeProj.fields) != 0 || pl.nodeProj.whole {
		t.Errorf("no rule reads node, projection %+v", pl.nodeProj)
	}
}
