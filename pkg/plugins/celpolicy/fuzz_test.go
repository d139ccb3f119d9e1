package celpolicy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

// FuzzRules compiles arbitrary expressions as a filter and a score and, when
// they compile, runs them against pods and nodes built from the fuzzer's
// strings. Nothing may panic; errors are fine. The filter gives the same
// result (or error) on the objects the projections copy as on the whole
// objects.
//
//	go test ./pkg/plugins/celpolicy -run '^$' -fuzz FuzzRules -fuzztime 3m
func FuzzRules(f *testing.F) {
	for _, seed := range []string{
		"'gpu' in node.metadata.labels",
		"node.metadata.?labels.?lifecycle.orValue('') == 'spot'",
		"pod.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.?requests.orValue({}))",
		"nodeInfo.free['cpu'].isGreaterThan(quantity('1'))",
		"quantity(node.status.allocatable['memory']).asApproximateFloat() > 1.0",
		"node.metadata.labels['zone'].matches('^eu-')",
		"semver(node.metadata.labels['k'], true).isGreaterThan(semver('6.0.0'))",
		"size(pod.spec.containers) * 10",
		"nodeInfo.podCount / 0",
		"double(node.metadata.annotations['x']) * 100.0",
		"pod.spec.containers.exists(c, c.ports.size() > 0 && c.ports[0].containerPort == 80)",
		"pod.spec.containers[0].?env[?0].?value.orValue('') == node.metadata.labels['zone']",
		"pod.spec.containers.map(c, c.name).exists(n, n == 'c') && node.status.conditions.all(c, c.status == 'True')",
		"pod.spec.containers.exists(c, [1].exists(c, c == 1) && has(c.resources.limits))",
	} {
		f.Add(seed, "zone", "eu-west-1", "6.1")
	}
	env, err := getEnv()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expression, key, value, version string) {
		if len(expression) > 512 {
			return
		}
		var rules []config.CELPolicyRule
		for _, r := range []config.CELPolicyRule{
			{Name: "f", Filter: expression},
			{Name: "s", Score: expression, Weight: 1},
		} {
			r.FailurePolicy = config.CELFailurePolicyFail
			if _, errs := compileRules(env, nil, &config.CELPolicyArgs{Rules: []config.CELPolicyRule{r}}); len(errs) == 0 {
				rules = append(rules, r)
			}
		}
		if len(rules) == 0 {
			return
		}
		_, ctx := ktesting.NewTestContext(t)
		p, err := New(ctx, &config.CELPolicyArgs{Rules: rules}, nil)
		if err != nil {
			t.Fatalf("rules compiled one by one but not together: %v", err)
		}
		pl := p.(*CELPolicy)
		node := st.MakeNode().Name("n").Label(key, value).Label("k", version).Annotation("x", value).
			Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "10"}).Obj()
		pod := st.MakePod().Name("p").Namespace("ns").Label(key, value).Container("c").
			Req(map[v1.ResourceName]string{"cpu": "1"}).ContainerPort([]v1.ContainerPort{{ContainerPort: 80, Name: key}}).Obj()
		pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: key, Value: value}}
		node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: value}}
		if got, want := evalRules(t, pl, pod, node, pl.podProj, pl.nodeProj, false), evalRules(t, pl, pod, node, wholeProjection(), wholeProjection(), false); got != want {
			t.Fatalf("%q: projected objects give %q, whole objects %q", expression, got, want)
		}
		ni := nodeInfo(node, st.MakePod().Name("other").Container("c").Obj())
		_ = filterResult(t, pl, pod, ni)
		if rules[len(rules)-1].Score != "" {
			_ = score(t, pl, pod, ni)
		}
	})
}
