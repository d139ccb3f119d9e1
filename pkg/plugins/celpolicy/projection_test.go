package celpolicy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

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
		// podPaths, nodePaths: the projection's read paths ("*": whole).
		podPaths, nodePaths []string
	}{
		{name: "labels", match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", filter: "'lifecycle' in node.metadata.labels",
			podPaths: []string{"metadata.labels.tier"}, nodePaths: []string{"metadata.labels"}},
		{name: "containers", match: "pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))", filter: "!node.spec.unschedulable",
			podPaths: []string{"spec.containers[].resources.requests"}, nodePaths: []string{"spec.unschedulable"}},
		{name: "presence and status", match: "has(pod.spec.nodeSelector) && pod.status.phase == 'Pending' && pod.metadata.name == 'train'",
			filter:    "node.status.capacity['cpu'] == '8'",
			podPaths:  []string{"metadata.name", "spec.nodeSelector", "status.phase"},
			nodePaths: []string{"status.capacity[]"}},
		{name: "whole top-level field", match: "[pod.metadata].size() == 1 && pod.spec.priority == 7", filter: "node.metadata.name == 'n1'",
			podPaths: []string{"metadata", "spec.priority"}, nodePaths: []string{"metadata.name"}},
		{name: "pod and node read together", match: "pod.kind == '' || true", filter: "node.metadata.labels['topology.kubernetes.io/zone'] != pod.metadata.?labels.?zone.orValue('')",
			podPaths: []string{"kind", "metadata.labels.zone"}, nodePaths: []string{"metadata.labels[]"}},
		{name: "index and comprehensions", match: "pod.spec.containers[0].name == 'c' && pod.spec.containers.all(c, c.ports[?0].?containerPort.orValue(1) > 0) && pod.spec.containers.exists(c, c.image != '')",
			filter:    "node.status.conditions.exists(c, c.type == 'Ready') || node.status.addresses.size() == 0",
			podPaths:  []string{"spec.containers[].image", "spec.containers[].name", "spec.containers[].ports[].containerPort"},
			nodePaths: []string{"status.addresses", "status.conditions[].type"}},
		{name: "variable used whole", match: "pod.spec.containers.filter(c, c.name == 'c').size() == 1",
			filter:   "node.status.conditions.map(c, c.type).exists(t, t == 'Ready')",
			podPaths: []string{"spec.containers[]"}, nodePaths: []string{"status.conditions[].type"}},
		{name: "inner comprehension reuses the name", match: "pod.spec.containers.exists(c, [1, 2].exists(c, c > 1) || c.name == 'c')",
			filter:   "node.metadata.labels.exists(k, k.startsWith('topology'))",
			podPaths: []string{"spec.containers[].name"}, nodePaths: []string{"metadata.labels[]"}},
		{name: "two-variable comprehension", match: "pod.spec.containers.all(i, c, i >= 0 && c.name != '')",
			filter:   "true",
			podPaths: []string{"spec.containers"}, nodePaths: nil},
		{name: "variable named as the object", match: "pod.spec.containers.exists(pod, pod.name == 'c')", filter: "true",
			podPaths: []string{"*"}, nodePaths: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, config.CELPolicyRule{Name: "r", Match: tc.match, Filter: tc.filter})
			if diff := cmp.Diff(tc.podPaths, projectedPaths(pl.podProj)); diff != "" {
				t.Errorf("pod paths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.nodePaths, projectedPaths(pl.nodeProj)); diff != "" {
				t.Errorf("node paths (-want +got):\n%s", diff)
			}
			projected := evalRule(t, pl, pod, node, pl.podProj, pl.nodeProj)
			whole := evalRule(t, pl, pod, node, wholeProjection(), wholeProjection())
			if projected != whole {
				t.Errorf("projected objects give %q, whole objects %q", projected, whole)
			}
		})
	}
}

// projectedPaths is "*" for a whole projection, else its read paths.
func projectedPaths(p *projection) []string {
	if p.whole() {
		return []string{"*"}
	}
	return p.root.paths()
}

// evalRule evaluates every expression of the plugin's rules (match, filter,
// score) and gives each outcome: the value, or "error" and the error's
// text.
func evalRule(t *testing.T, pl *CELPolicy, pod *v1.Pod, node *v1.Node, podProj, nodeProj *projection) string {
	t.Helper()
	return evalRules(t, pl, pod, node, podProj, nodeProj, true)
}

// evalRules is evalRule; withErrors false leaves out the errors' text (an
// error found while iterating a map names the key it met first, and Go's
// map order is random: two conversions of one object can name different
// keys).
func evalRules(t *testing.T, pl *CELPolicy, pod *v1.Pod, node *v1.Node, podProj, nodeProj *projection, withErrors bool) string {
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
	out := ""
	for _, r := range pl.rules {
		for _, x := range []*expr{r.match, r.filter, r.score} {
			if x == nil {
				continue
			}
			v, _, err := x.prg.Eval(act)
			switch {
			case err != nil && withErrors:
				out += "error " + err.Error() + ";"
			case err != nil:
				out += "error;"
			default:
				out += fmt.Sprint(v.Value()) + ";"
			}
		}
	}
	return out
}

// A variable used other than by selecting its fields is converted whole.
func TestProjectionWholeObject(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "r", Match: "pod == pod", Filter: "true"})
	if !pl.podProj.whole() {
		t.Errorf("pod compared whole, but projection %v", pl.podProj.root.paths())
	}
	if pl.nodeProj.whole() || len(pl.nodeProj.root.paths()) != 0 {
		t.Errorf("no rule reads node, projection %v", pl.nodeProj.root.paths())
	}
}

// A partial copy keeps what the expressions can observe of what it leaves
// out below a path: whether a pointer is nil, whether a list is nil or
// empty and its length, fields of inline structs inside list elements,
// and times inside elements (converted to timestamps after the copy).
func TestProjectionKeepsPresenceAndSizes(t *testing.T) {
	lastTransition := metav1.NewTime(time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC))
	bare := st.MakePod().Namespace("ml").Name("bare").Container("c").Obj()
	set := st.MakePod().Namespace("ml").Name("set").Container("c").Container("d").Obj()
	set.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](5)}
	set.Spec.Containers[0].SecurityContext = &v1.SecurityContext{}
	set.Spec.Containers[0].Ports = []v1.ContainerPort{}
	set.Spec.Containers[1].Ports = []v1.ContainerPort{{ContainerPort: 80}}
	set.Spec.Containers[1].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	set.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
	set.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	set.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, LastTransitionTime: lastTransition}}
	empty := set.DeepCopy()
	empty.Name = "empty"
	empty.Spec.SecurityContext = &v1.PodSecurityContext{}
	empty.Spec.Containers = []v1.Container{}
	empty.Spec.EphemeralContainers = nil
	empty.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled}}
	node := st.MakeNode().Name("n1").Obj()
	for _, match := range []string{
		"pod.spec.containers.exists(c, has(c.securityContext))",
		"has(pod.spec.securityContext) && has(pod.spec.securityContext.runAsUser)",
		"pod.spec.?securityContext.?runAsUser.orValue(0) == 5",
		"pod.spec.securityContext.runAsUser == 5",
		"has(pod.spec.securityContext.runAsUser)",
		"pod.spec.containers.all(c, c.?ports.orValue([]).size() == 0)",
		"pod.spec.containers.exists(c, has(c.ports))",
		"pod.spec.containers.size() == 2",
		"pod.spec.containers.exists(c, size(c.resources.?limits.orValue({})) > 0)",
		"pod.status.conditions.exists(c, c.lastTransitionTime < timestamp('2026-12-06T00:00:00Z'))",
		"pod.status.conditions.exists(c, has(c.lastTransitionTime))",
		"pod.spec.?ephemeralContainers.orValue([]).exists(e, e.name == 'dbg' && has(e.image))",
		"pod.spec.?volumes.orValue([]).exists(v, has(v.emptyDir))",
		"pod.spec.containers[1].ports[0].containerPort == 80",
	} {
		pl := newPlugin(t, config.CELPolicyRule{Name: "r", Match: match, Filter: "true"})
		if pl.podProj.whole() {
			t.Errorf("%q: the pod is converted whole, want a projection", match)
		}
		for _, pod := range []*v1.Pod{bare, set, empty} {
			projected := evalRule(t, pl, pod, node, pl.podProj, pl.nodeProj)
			whole := evalRule(t, pl, pod, node, wholeProjection(), wholeProjection())
			if projected != whole {
				t.Errorf("%q on pod %s: projected objects give %q, whole objects %q", match, pod.Name, projected, whole)
			}
		}
	}
}

// jsonField finds a field where runtime.DefaultUnstructuredConverter puts
// it, or not at all: then the object is read whole. An embedded struct
// without a tag name is flattened (TypeMeta's `json:",inline"`); a named
// field without a tag name is serialized under its Go name, whatever its
// tag's options, and is not flattened (Go 1.26's converter; from Go 1.27
// ",embed" would inline it). Were Named flattened, "x" would resolve to
// Named.X and the projection would drop the field the converter really
// puts at "x"; were Plain found by its Go name, the made field (F0) would
// carry it under another name. Every projection the plan makes converts to
// what the whole object converts to, at the path it reads.
func TestJSONFieldFollowsTheConverter(t *testing.T) {
	type inner struct {
		X string `json:"x"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type Exported struct {
		G string `json:"g"`
	}
	type Zeroable struct {
		H string `json:"h"`
	}
	type outer struct {
		Named    inner `json:",inline"`
		Plain    inner
		embedded // unexported: its exported fields are copied
		Exported
		Zeroable `json:",omitzero"`
		Z        string `json:"x"`
		Hidden   string `json:"-"`
		lower    string
	}
	// A name an embedded struct and its parent both give.
	type clash struct {
		Exported
		G string `json:"g"`
	}
	for _, tc := range []struct {
		obj  any
		name string
		want []int
	}{
		{obj: outer{}, name: "x", want: []int{5}},
		{obj: outer{}, name: "g", want: []int{3, 0}},
		{obj: outer{}, name: "Named"},
		{obj: outer{}, name: "Plain"},
		{obj: outer{}, name: "e", want: []int{2, 0}},
		{obj: outer{}, name: "h"},
		{obj: outer{}, name: "Exported"},
		{obj: outer{}, name: "-"},
		{obj: outer{}, name: "Hidden"},
		{obj: outer{}, name: "lower"},
		{obj: clash{}, name: "g"},
	} {
		idx, _, ok := jsonField(reflect.TypeOf(tc.obj), tc.name)
		if !ok {
			idx = nil
		}
		if !reflect.DeepEqual(idx, tc.want) {
			t.Errorf("jsonField(%T, %q) = %v, want %v", tc.obj, tc.name, idx, tc.want)
		}
	}
	for _, obj := range []*outer{
		{Named: inner{X: "a"}, Plain: inner{X: "b"}, embedded: embedded{E: "c"}, Exported: Exported{G: "d"}, Z: "e", Hidden: "f", lower: "g"},
		{},
	} {
		whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"x", "g", "Named", "Plain", "e", "h", "Exported", "Hidden", "lower"} {
			p := newProjection()
			p.root.add([]string{name})
			p.compile(reflect.TypeFor[*outer]())
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.apply(obj))
			if err != nil {
				t.Fatal(err)
			}
			got, gotOK := u[name]
			want, wantOK := whole[name]
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Errorf("%q of %+v: projected %v (%v), whole %v (%v)", name, *obj, got, gotOK, want, wantOK)
			}
		}
	}
}
