package celpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

func newPlugin(t testing.TB, rules ...config.CELPolicyRule) *CELPolicy {
	t.Helper()
	for i := range rules {
		if rules[i].FailurePolicy == "" {
			rules[i].FailurePolicy = config.CELFailurePolicyFail
		}
		if rules[i].Score != "" && rules[i].Weight == 0 {
			rules[i].Weight = 1
		}
	}
	_, ctx := ktesting.NewTestContext(t)
	p, err := New(ctx, &config.CELPolicyArgs{Rules: rules}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p.(*CELPolicy)
}

func nodeInfo(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

var (
	gpuNode = st.MakeNode().Name("gpu").Label("nvidia.com/gpu.present", "true").Label("lifecycle", "on-demand").
		Label("kernel-version", "6.8.0").Capacity(map[v1.ResourceName]string{"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"}).
		Taints([]v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}).Obj()
	spotNode = st.MakeNode().Name("spot").Label("lifecycle", "spot").Label("kernel-version", "5.15.0").
			Annotation("berth.io/zone-cost", "0.4").Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "10"}).Obj()
	oldNode = func() *v1.Node {
		n := spotNode.DeepCopy()
		n.CreationTimestamp = metav1.NewTime(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))
		return n
	}()
	batchPod = st.MakePod().Namespace("ml").Name("batch").Label("tier", "batch").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj()
	gpuPod   = st.MakePod().Namespace("ml").Name("train").Req(map[v1.ResourceName]string{"cpu": "2", "nvidia.com/gpu": "1"}).Toleration("dedicated").Obj()
	plainPod = st.MakePod().Namespace("web").Name("plain").Container("app").Obj()
)

// filterResult runs PreFilter and Filter for one pod and node.
func filterResult(t *testing.T, pl *CELPolicy, pod *v1.Pod, ni *framework.NodeInfo) *fwk.Status {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
		return s
	}
	return pl.Filter(ctx, state, pod, ni)
}

func TestFilterExpressions(t *testing.T) {
	busy := nodeInfo(spotNode, st.MakePod().Name("p1").Req(map[v1.ResourceName]string{"cpu": "3", "memory": "6Gi"}).Obj())
	tests := []struct {
		name   string
		filter string
		pod    *v1.Pod
		ni     *framework.NodeInfo
		want   fwk.Code
	}{
		{"label present", "'nvidia.com/gpu.present' in node.metadata.labels", gpuPod, nodeInfo(gpuNode), fwk.Success},
		{"label absent", "'nvidia.com/gpu.present' in node.metadata.labels", gpuPod, nodeInfo(spotNode), fwk.UnschedulableAndUnresolvable},
		{"label value", "node.metadata.labels['lifecycle'] == 'spot'", batchPod, nodeInfo(spotNode), fwk.Success},
		{"optional label default", "node.metadata.labels.?zone.orValue('none') == 'none'", batchPod, nodeInfo(spotNode), fwk.Success},
		{"optional on metadata", "node.metadata.?labels.?lifecycle.orValue('') != 'spot'", batchPod, nodeInfo(spotNode), fwk.UnschedulableAndUnresolvable},
		{"annotation as double", "double(node.metadata.annotations['berth.io/zone-cost']) < 0.5", batchPod, nodeInfo(spotNode), fwk.Success},
		{"taints: no NoSchedule", "!node.spec.?taints.orValue([]).exists(t, t.effect == 'NoSchedule')", batchPod, nodeInfo(gpuNode), fwk.UnschedulableAndUnresolvable},
		{"dedicated taint tolerated by pod", "pod.spec.?tolerations.orValue([]).exists(t, t.key == 'dedicated') || !node.spec.?taints.orValue([]).exists(t, t.key == 'dedicated')", gpuPod, nodeInfo(gpuNode), fwk.Success},
		{"dedicated taint not tolerated", "pod.spec.?tolerations.orValue([]).exists(t, t.key == 'dedicated') || !node.spec.?taints.orValue([]).exists(t, t.key == 'dedicated')", batchPod, nodeInfo(gpuNode), fwk.UnschedulableAndUnresolvable},
		{"kernel semver-ish compare", "node.metadata.labels['kernel-version'].split('.')[0] >= '6'", batchPod, nodeInfo(gpuNode), fwk.Success},
		{"kernel too old", "int(node.metadata.labels['kernel-version'].split('.')[0]) >= 6", batchPod, nodeInfo(spotNode), fwk.UnschedulableAndUnresolvable},
		{"regex on name", "node.metadata.name.matches('^sp[a-z]+$')", batchPod, nodeInfo(spotNode), fwk.Success},
		{"quantity allocatable", "quantity(node.status.allocatable['memory']).isGreaterThan(quantity('16Gi'))", batchPod, nodeInfo(spotNode), fwk.UnschedulableAndUnresolvable},
		{"quantity compare", "quantity(node.status.allocatable['cpu']).compareTo(quantity('8')) >= 0", batchPod, nodeInfo(gpuNode), fwk.Success},
		{"pod requests GPU and node has", "pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({})) == ('nvidia.com/gpu' in node.status.allocatable)", gpuPod, nodeInfo(gpuNode), fwk.Success},
		{"pod label vs node label", "pod.metadata.?labels.?tier.orValue('') != 'batch' || node.metadata.labels['lifecycle'] == 'spot'", batchPod, nodeInfo(gpuNode), fwk.UnschedulableAndUnresolvable},
		{"namespace", "pod.metadata.namespace == 'ml'", gpuPod, nodeInfo(gpuNode), fwk.Success},
		{"nodeInfo free cpu", "nodeInfo.free['cpu'].isGreaterThan(quantity('500m'))", batchPod, busy, fwk.Success},
		{"nodeInfo free memory too low", "nodeInfo.free['memory'].compareTo(quantity('4Gi')) >= 0", batchPod, busy, fwk.Unschedulable},
		{"nodeInfo requested", "nodeInfo.requested['cpu'].asApproximateFloat() == 3.0", batchPod, busy, fwk.Success},
		{"nodeInfo podCount", "nodeInfo.podCount < 1", batchPod, busy, fwk.Unschedulable},
		{"nodeInfo allocatable pods", "nodeInfo.allocatable['pods'].asInteger() == 10", batchPod, busy, fwk.Success},
		{"timestamp field", "node.metadata.creationTimestamp < timestamp('2030-01-01T00:00:00Z')", batchPod, nodeInfo(oldNode), fwk.Success},
		{"timestamp arithmetic", "timestamp('2026-01-01T00:00:00Z') - node.metadata.creationTimestamp > duration('24h')", batchPod, nodeInfo(oldNode), fwk.Success},
		{"list macro with size", "size(node.metadata.labels) >= 3", batchPod, nodeInfo(gpuNode), fwk.Success},
		{"missing key fails (policy Fail)", "node.metadata.labels['zone'] == 'a'", batchPod, nodeInfo(spotNode), fwk.UnschedulableAndUnresolvable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, config.CELPolicyRule{Name: "r", Filter: tc.filter})
			got := filterResult(t, pl, tc.pod, tc.ni)
			if got.Code() != tc.want {
				t.Errorf("Filter code = %v (%v), want %v", got.Code(), got.Reasons(), tc.want)
			}
		})
	}
}

func TestFilterReasonsAndPolicies(t *testing.T) {
	tests := []struct {
		name       string
		rule       config.CELPolicyRule
		wantCode   fwk.Code
		wantReason string
	}{
		{"message used", config.CELPolicyRule{Name: "gpu", Filter: "false", Message: "GPU nodes only"}, fwk.UnschedulableAndUnresolvable, "GPU nodes only"},
		{"default message", config.CELPolicyRule{Name: "gpu", Filter: "false"}, fwk.UnschedulableAndUnresolvable, `node(s) rejected by CELPolicy rule "gpu"`},
		{"error under Fail", config.CELPolicyRule{Name: "bad", Filter: "node.metadata.labels['nope'] == 'x'"}, fwk.UnschedulableAndUnresolvable, `CELPolicy rule "bad" could not be evaluated`},
		{"error under Ignore", config.CELPolicyRule{Name: "bad", Filter: "node.metadata.labels['nope'] == 'x'", FailurePolicy: config.CELFailurePolicyIgnore}, fwk.Success, ""},
		{"pod-reading error under Fail", config.CELPolicyRule{Name: "bad", Filter: "pod.metadata.labels['nope'] == 'x'"}, fwk.UnschedulableAndUnresolvable, `CELPolicy rule "bad" could not be evaluated`},
		{"match error under Fail rejects all", config.CELPolicyRule{Name: "bad", Match: "pod.metadata.labels['nope'] == 'x'", Filter: "true"}, fwk.UnschedulableAndUnresolvable, `CELPolicy rule "bad" could not be evaluated`},
		{"match error under Ignore skips", config.CELPolicyRule{Name: "bad", Match: "pod.metadata.labels['nope'] == 'x'", Filter: "false", FailurePolicy: config.CELFailurePolicyIgnore}, fwk.Skip, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, tc.rule)
			got := filterResult(t, pl, batchPod, nodeInfo(spotNode))
			if got.Code() != tc.wantCode {
				t.Fatalf("code = %v, want %v (%v)", got.Code(), tc.wantCode, got.Reasons())
			}
			if tc.wantReason != "" {
				if diff := cmp.Diff([]string{tc.wantReason}, got.Reasons()); diff != "" {
					t.Errorf("reasons (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func TestPreFilterSkip(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newPlugin(t,
		config.CELPolicyRule{Name: "gpu", Match: "pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))", Filter: "'nvidia.com/gpu.present' in node.metadata.labels"},
		config.CELPolicyRule{Name: "spot", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Score: "100"},
	)
	for _, tc := range []struct {
		pod        *v1.Pod
		preFilter  fwk.Code
		preScore   fwk.Code
		wantScored int
	}{
		{plainPod, fwk.Skip, fwk.Skip, 0},
		{gpuPod, fwk.Success, fwk.Skip, 0},
		{batchPod, fwk.Skip, fwk.Success, 1}, // matched only by a scoring rule: nothing to filter
	} {
		state := framework.NewCycleState()
		_, s := pl.PreFilter(ctx, state, tc.pod, nil)
		if s.Code() != tc.preFilter {
			t.Errorf("%s: PreFilter = %v, want %v", tc.pod.Name, s.Code(), tc.preFilter)
		}
		if s := pl.PreScore(ctx, state, tc.pod, nil); s.Code() != tc.preScore {
			t.Errorf("%s: PreScore = %v, want %v", tc.pod.Name, s.Code(), tc.preScore)
		}
	}
}

func score(t *testing.T, pl *CELPolicy, pod *v1.Pod, ni *framework.NodeInfo) int64 {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, pod, nil)
	if s := pl.PreScore(ctx, state, pod, nil); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	v, s := pl.Score(ctx, state, pod, ni)
	if !s.IsSuccess() {
		t.Fatalf("Score: %v", s)
	}
	return v
}

func TestScore(t *testing.T) {
	tests := []struct {
		name  string
		rules []config.CELPolicyRule
		ni    *framework.NodeInfo
		want  int64
	}{
		{"int", []config.CELPolicyRule{{Name: "a", Score: "node.metadata.labels['lifecycle'] == 'spot' ? 100 : 0"}}, nodeInfo(spotNode), 100},
		{"double rounds", []config.CELPolicyRule{{Name: "a", Score: "42.6"}}, nodeInfo(spotNode), 43},
		{"clamped high", []config.CELPolicyRule{{Name: "a", Score: "1000"}}, nodeInfo(spotNode), 100},
		{"clamped low", []config.CELPolicyRule{{Name: "a", Score: "-5"}}, nodeInfo(spotNode), 0},
		{"weighted average", []config.CELPolicyRule{{Name: "a", Score: "100", Weight: 3}, {Name: "b", Score: "0", Weight: 1}}, nodeInfo(spotNode), 75},
		{"free memory share", []config.CELPolicyRule{{Name: "mem", Score: "100.0 * nodeInfo.free['memory'].asApproximateFloat() / nodeInfo.allocatable['memory'].asApproximateFloat()"}},
			nodeInfo(spotNode, st.MakePod().Name("p").Req(map[v1.ResourceName]string{"memory": "2Gi"}).Obj()), 75},
		{"pod-reading score", []config.CELPolicyRule{{Name: "a", Score: "pod.metadata.labels['tier'] == 'batch' ? 60 : 10"}}, nodeInfo(spotNode), 60},
		{"error under Fail scores 0", []config.CELPolicyRule{{Name: "a", Score: "int(node.metadata.labels['nope'])", Weight: 1}, {Name: "b", Score: "100", Weight: 1}}, nodeInfo(spotNode), 50},
		{"error under Ignore leaves the rule out", []config.CELPolicyRule{{Name: "a", Score: "int(node.metadata.labels['nope'])", FailurePolicy: config.CELFailurePolicyIgnore}, {Name: "b", Score: "100"}}, nodeInfo(spotNode), 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t, tc.rules...)
			if got := score(t, pl, batchPod, tc.ni); got != tc.want {
				t.Errorf("Score = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNodeCacheFollowsGeneration(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "few-pods", Filter: "nodeInfo.podCount < 1"})
	ni := nodeInfo(spotNode.DeepCopy())
	if s := filterResult(t, pl, batchPod, ni); !s.IsSuccess() {
		t.Fatalf("empty node rejected: %v", s)
	}
	ni.AddPod(st.MakePod().Name("p").Obj()) // moves the generation
	if s := filterResult(t, pl, batchPod, ni); s.Code() != fwk.Unschedulable {
		t.Fatalf("after a pod was added: %v, want Unschedulable", s)
	}
	if n := pl.cache.len(); n != 1 {
		t.Errorf("cache holds %d nodes, want 1", n)
	}
}

// Without nodeInfo rules a node's state depends on its Node object only: a
// pod landing on the node (a new generation) costs no rebuild, a new Node
// object (an update) does.
func TestNodeCacheFollowsNodeObject(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "spot-only", Filter: "node.metadata.labels['lifecycle'] == 'spot'"})
	node := spotNode.DeepCopy()
	ni := nodeInfo(node)
	if s := filterResult(t, pl, batchPod, ni); !s.IsSuccess() {
		t.Fatalf("spot node rejected: %v", s)
	}
	built := pl.cache.states.Load(node.Name)
	ni.AddPod(st.MakePod().Name("p").Obj()) // moves the generation, same Node object
	if s := filterResult(t, pl, batchPod, ni); !s.IsSuccess() {
		t.Fatalf("after a pod was added: %v", s)
	}
	if pl.cache.states.Load(node.Name) != built {
		t.Errorf("state rebuilt although the Node object did not change")
	}
	updated := node.DeepCopy()
	updated.Labels["lifecycle"] = "on-demand"
	ni.SetNode(updated)
	if s := filterResult(t, pl, batchPod, ni); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("after the node was relabelled: %v, want UnschedulableAndUnresolvable", s)
	}
}

func TestNewRejectsBadRules(t *testing.T) {
	ok := config.CELPolicyRule{Name: "ok", Filter: "true"}
	tests := []struct {
		name  string
		rule  config.CELPolicyRule
		extra []config.CELPolicyRule // rules before rule
		want  []string
	}{
		{name: "syntax error", rule: config.CELPolicyRule{Name: "r", Filter: "node.metadata.labels["}, want: []string{"rules[0] (\"r\").filter", "compiling", "line 1, column 22"}},
		{name: "filter not bool", rule: config.CELPolicyRule{Name: "r", Filter: "1 + 1"}, want: []string{"rules[0] (\"r\").filter", "must evaluate to bool, got int"}},
		{name: "score not number", rule: config.CELPolicyRule{Name: "r", Score: "'high'"}, want: []string{"rules[0] (\"r\").score", "must evaluate to int or double, got string"}},
		{name: "match not bool", rule: config.CELPolicyRule{Name: "r", Match: "pod.metadata.name", Filter: "true"}, want: []string{"rules[0] (\"r\").match", "must evaluate to bool"}},
		{name: "unknown variable", rule: config.CELPolicyRule{Name: "r", Filter: "object.metadata.name == 'x'"}, want: []string{"rules[0] (\"r\").filter", "undeclared reference to 'object'"}},
		{name: "unknown field", rule: config.CELPolicyRule{Name: "r", Filter: "node.spec.colour == 'red'"}, want: []string{"rules[0] (\"r\").filter", "undefined field 'colour'"}},
		{name: "unknown pod field", rule: config.CELPolicyRule{Name: "r", Match: "pod.spec.nodeSelectorz == {}", Filter: "true"}, want: []string{"rules[0] (\"r\").match", "undefined field 'nodeSelectorz'"}},
		{name: "match reads node", rule: config.CELPolicyRule{Name: "r", Match: "node.metadata.name == 'a'", Filter: "true"}, want: []string{"rules[0] (\"r\").match", `may only read pod, reads "node"`}},
		{name: "match reads nodeInfo", rule: config.CELPolicyRule{Name: "r", Match: "nodeInfo.podCount > 1", Filter: "true"}, want: []string{"rules[0] (\"r\").match", `reads "nodeInfo"`}},
		{name: "unknown function", rule: config.CELPolicyRule{Name: "r", Filter: "node.metadata.name.shout()"}, want: []string{"rules[0] (\"r\").filter", "undeclared reference to 'shout'"}},
		{name: "wrong arg type", rule: config.CELPolicyRule{Name: "r", Filter: "quantity(1) > 0"}, want: []string{"rules[0] (\"r\").filter", "found no matching overload"}},
		{name: "cost over the limit", rule: config.CELPolicyRule{Name: "r", Filter: "pod.spec.containers.all(a, pod.spec.containers.all(b, a.name != b.name || a == b))"},
			want: []string{`rules[0] ("r").filter`, "estimated cost", "exceeds the limit"}},
		{name: "duplicate name", extra: []config.CELPolicyRule{ok}, rule: config.CELPolicyRule{Name: "ok", Filter: "false"},
			want: []string{`rules[1] ("ok").name: Duplicate value: "ok"`}},
		{name: "weight out of range", rule: config.CELPolicyRule{Name: "r", Score: "1", Weight: 101}, want: []string{"rules[0] (\"r\").weight: Invalid value: 101"}},
		{name: "weight without score", rule: config.CELPolicyRule{Name: "r", Filter: "true", Weight: 5}, want: []string{"rules[0] (\"r\").weight: Forbidden"}},
		{name: "no filter and no score", rule: config.CELPolicyRule{Name: "r", Match: "true"}, want: []string{"rules[0] (\"r\"): Required value: a rule needs a filter, a score, or both"}},
		{name: "name not a DNS label", rule: config.CELPolicyRule{Name: "GPU_rule", Filter: "true"}, want: []string{`rules[0] ("GPU_rule").name: Invalid value: "GPU_rule"`}},
		{name: "error in the second rule is located", extra: []config.CELPolicyRule{ok}, rule: config.CELPolicyRule{Name: "r", Score: "node.metadata.name"},
			want: []string{`rules[1] ("r").score`, "must evaluate to int or double, got string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rules := append(append([]config.CELPolicyRule{}, tc.extra...), tc.rule)
			for i := range rules {
				rules[i].FailurePolicy = config.CELFailurePolicyFail
				if rules[i].Score != "" && rules[i].Weight == 0 {
					rules[i].Weight = 1
				}
			}
			_, ctx := ktesting.NewTestContext(t)
			_, err := New(ctx, &config.CELPolicyArgs{Rules: rules}, nil)
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSignPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newPlugin(t,
		config.CELPolicyRule{Name: "gpu", Match: "pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))", Filter: "'nvidia.com/gpu.present' in node.metadata.labels"},
		config.CELPolicyRule{Name: "spot", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Score: "nodeInfo.podCount < 5 ? 100 : 0"},
		config.CELPolicyRule{Name: "ns", Match: "pod.metadata.namespace == 'web'", Filter: "pod.metadata.name != node.metadata.name"},
	)
	for _, tc := range []struct {
		pod      *v1.Pod
		wantCode fwk.Code
		want     []string
	}{
		{batchPod, fwk.Success, []string{"spot"}},
		{gpuPod, fwk.Success, []string{"gpu"}},
		{st.MakePod().Namespace("other").Name("x").Container("app").Obj(), fwk.Success, []string{}},
		{plainPod, fwk.Unschedulable, nil}, // rule ns reads the pod in its filter
	} {
		frags, s := pl.SignPod(ctx, tc.pod)
		if s.Code() != tc.wantCode {
			t.Fatalf("%s: SignPod code = %v, want %v", tc.pod.Name, s.Code(), tc.wantCode)
		}
		if tc.wantCode != fwk.Success {
			continue
		}
		if diff := cmp.Diff([]fwk.SignFragment{{Key: signFragmentKey, Value: tc.want}}, frags); diff != "" {
			t.Errorf("%s: fragments (-want,+got):\n%s", tc.pod.Name, diff)
		}
	}
}

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := newPlugin(t,
		config.CELPolicyRule{Name: "gpu-only-for-gpu", Match: "!pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))", Filter: "!('nvidia.com/gpu.present' in node.metadata.labels)"},
	)
	relabelled := gpuNode.DeepCopy()
	delete(relabelled.Labels, "nvidia.com/gpu.present")
	tests := []struct {
		name     string
		pod      *v1.Pod
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		{"node now passes", batchPod, gpuNode, relabelled, fwk.Queue},
		{"node still rejected", batchPod, spotNode, gpuNode, fwk.QueueSkip},
		{"pod not matched by any rule", gpuPod, nil, gpuNode, fwk.Queue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterNodeChange(logger, tc.pod, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
	// No rule reads nodeInfo: pod deletions cannot help and are not registered.
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Event.Resource == fwk.AssignedPod {
			t.Errorf("registered %v although no rule reads nodeInfo", e.Event)
		}
	}
	withInfo := newPlugin(t, config.CELPolicyRule{Name: "room", Filter: "nodeInfo.podCount < 3"})
	if got, _ := withInfo.isSchedulableAfterPodDeleted(logger, batchPod, plainPod, nil); got != fwk.Queue {
		t.Errorf("pod deleted with a nodeInfo rule: %v, want Queue", got)
	}
	if got, _ := pl.isSchedulableAfterPodDeleted(logger, batchPod, plainPod, nil); got != fwk.QueueSkip {
		t.Errorf("pod deleted without a nodeInfo rule: %v, want QueueSkip", got)
	}
}

func TestSignPodAndPreFilterMatchOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newPlugin(t, config.CELPolicyRule{Name: "once-per-pod", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Filter: "true"})
	pod := batchPod.DeepCopy()
	pod.UID, pod.ResourceVersion = "u1", "7"
	before := value(t, pl.counters[0].match.isTrue)
	if _, s := pl.SignPod(ctx, pod); !s.IsSuccess() {
		t.Fatal(s)
	}
	if _, s := pl.PreFilter(ctx, framework.NewCycleState(), pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	if n := value(t, pl.counters[0].match.isTrue) - before; n != 1 {
		t.Errorf("match evaluated %v times for one pod version, want 1", n)
	}
	// A new version of the pod is matched again.
	pod.ResourceVersion = "8"
	pl.PreFilter(ctx, framework.NewCycleState(), pod, nil)
	if n := value(t, pl.counters[0].match.isTrue) - before; n != 2 {
		t.Errorf("match evaluated %v times after an update, want 2", n)
	}
}

// More rules than a node state holds inline: the last one still decides.
func TestManyRules(t *testing.T) {
	var rules []config.CELPolicyRule
	for i := range inlineRules + 2 {
		rules = append(rules, config.CELPolicyRule{Name: "r" + string(rune('a'+i)), Filter: "node.metadata.name != 'n" + string(rune('a'+i)) + "'",
			Score: "node.metadata.name == 'n" + string(rune('a'+i)) + "' ? 100 : 0", Weight: 1})
	}
	pl := newPlugin(t, rules...)
	last := "n" + string(rune('a'+inlineRules+1))
	if s := filterResult(t, pl, batchPod, nodeInfo(st.MakeNode().Name(last).Obj())); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("node %s: %v, want rejected by the last rule", last, s)
	}
	if s := filterResult(t, pl, batchPod, nodeInfo(st.MakeNode().Name("other").Obj())); !s.IsSuccess() {
		t.Errorf("node other: %v", s)
	}
}
