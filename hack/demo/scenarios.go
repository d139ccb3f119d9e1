package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The demo cluster: nodes of different sizes and labels.
var demoNodes = []sandbox.NodeSpec{
	{Name: "small-1", CPU: "2", Memory: "4Gi", Labels: map[string]string{"lifecycle": "on-demand"}},
	{Name: "on-demand-1", CPU: "8", Memory: "16Gi", Labels: map[string]string{"lifecycle": "on-demand"}},
	{Name: "spot-1", CPU: "4", Memory: "8Gi", Labels: map[string]string{"lifecycle": "spot"}},
	{Name: "gpu-1", CPU: "16", Memory: "64Gi", Labels: map[string]string{"lifecycle": "on-demand", "nvidia.com/gpu.present": "true"},
		Extended: map[string]string{"nvidia.com/gpu": "2"}},
	// LoadAware's nodes, tainted so that only its scenario's pods land there.
	{Name: "busy-1", CPU: "8", Memory: "16Gi", Taints: []v1.Taint{loadAwareTaint}, Labels: loadAwareNodes, Annotations: usage("7500m", "4Gi")},
	{Name: "quiet-1", CPU: "4", Memory: "8Gi", Taints: []v1.Taint{loadAwareTaint}, Labels: loadAwareNodes, Annotations: usage("500m", "1Gi")},
	// ConfirmBinder's nodes: cb-1 is the roomier, the scheduler's first choice.
	{Name: "cb-1", CPU: "4", Memory: "8Gi", Taints: []v1.Taint{cbTaint}, Labels: cbNodes},
	{Name: "cb-2", CPU: "2", Memory: "8Gi", Taints: []v1.Taint{cbTaint}, Labels: cbNodes},
	// ElasticQuota's node: 4 CPU shared by two teams.
	{Name: "shared-1", CPU: "4", Memory: "16Gi", Taints: []v1.Taint{quotaTaint}, Labels: quotaNodes},
	// Coscheduling's nodes: room for six one-CPU pods (gang-3 joins later).
	{Name: "gang-1", CPU: "3", Memory: "8Gi", Taints: []v1.Taint{gangTaint}, Labels: gangNodes},
	{Name: "gang-2", CPU: "3", Memory: "8Gi", Taints: []v1.Taint{gangTaint}, Labels: gangNodes},
}

var (
	loadAwareTaint      = v1.Taint{Key: "berth.io/demo", Value: "loadaware", Effect: v1.TaintEffectNoSchedule}
	loadAwareNodes      = map[string]string{"berth.io/demo": "loadaware"}
	loadAwareToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
)

var (
	quotaTaint      = v1.Taint{Key: "berth.io/demo", Value: "quota", Effect: v1.TaintEffectNoSchedule}
	quotaNodes      = map[string]string{"berth.io/demo": "quota"}
	quotaToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
)

// The ElasticQuota scenario's teams: each guaranteed 2 CPU, allowed 4.
var demoQuotas = []struct{ namespace, min, max string }{
	{"team-a", "2", "4"},
	{"team-b", "2", "4"},
}

// demoPriorityClasses: team-a marks two of its pods critical.
var demoPriorityClasses = map[string]int32{"team-critical": 1000}

func quotaPod(namespace, name, cpu, priorityClass string) sandbox.PodSpec {
	return sandbox.PodSpec{Namespace: namespace, Name: name, SchedulerName: "berth-elasticquota", CPU: cpu, Memory: "1Gi",
		Tolerations: quotaToleration, NodeSelector: quotaNodes, PriorityClassName: priorityClass, Annotations: explainRequest}
}

// usage is the NodeAnnotations source's annotation, measured now.
func usage(cpu, memory string) map[string]string {
	return map[string]string{"berth.io/node-usage": fmt.Sprintf(`{"cpu":%q,"memory":%q,"timestamp":%q}`, cpu, memory, time.Now().UTC().Format(time.RFC3339))}
}

// demoPod is one workload of a scenario and where it should end.
type demoPod struct {
	scenario string
	// phase: pods of phase N are created once every pod of the phases
	// before has settled.
	phase      int
	spec       sandbox.PodSpec
	expectNode string // "" means it should stay Pending (or be preempted); "x-*" any node named x-...
	// pendingUntil: in the phases before it, the pod must stay Pending
	// (with a FailedScheduling event); from it on, end on expectNode.
	pendingUntil int
	// expectPreempted: the pod is placed, then preempted in a later phase.
	expectPreempted bool
	// external: created by the demo's stand-in for another component, not
	// by the demo's pod loop.
	external bool
	// showEvent: the latest message of events with this reason is shown.
	showEvent string
	why       string
}

const ns = "default"

// explainRequest asks Explain for an explanation (the demo prints
// `kubectl berth explain` for these pods).
var explainRequest = map[string]string{"explain.berth.dev/request": "true"}

// demoPods are created in order. Each plugin's scenario adds its pods here.
var demoPods = append(append(scenarioPods, metricsPods...), gangPods()...)

// phaseActions run at the start of a phase, before its pods are created.
var phaseActions = map[int]func(context.Context, kubernetes.Interface) error{
	1: joinGangNode,
}

var scenarioPods = []demoPod{
	// Upstream behaviour, untouched: the default profile.
	{scenario: "upstream", spec: sandbox.PodSpec{Namespace: ns, Name: "web", SchedulerName: "default-scheduler", CPU: "6", Memory: "1Gi"},
		expectNode: "gpu-1", why: "default profile: LeastAllocated picks the roomiest node that fits 6 CPU"},
	{scenario: "upstream", spec: sandbox.PodSpec{Namespace: ns, Name: "too-big", SchedulerName: "default-scheduler", CPU: "32", Memory: "1Gi"},
		why: "no node has 32 CPU"},

	// CELPolicy: rules from the scheduler config.
	{scenario: "celpolicy", spec: sandbox.PodSpec{Namespace: ns, Name: "trainer", SchedulerName: "berth-scheduler", CPU: "2", Memory: "4Gi",
		Extended: map[string]string{"nvidia.com/gpu": "1"}},
		expectNode: "gpu-1", why: "requests a GPU: only gpu-1 has one"},
	{scenario: "celpolicy", spec: sandbox.PodSpec{Namespace: ns, Name: "batch-job", SchedulerName: "berth-scheduler", CPU: "1", Memory: "1Gi",
		Labels: map[string]string{"tier": "batch"}, Annotations: explainRequest},
		expectNode: "spot-1", showEvent: "Explained", why: "rule batch-prefers-spot; by spreading alone on-demand-1 would win (Explain)"},
	{scenario: "celpolicy", spec: sandbox.PodSpec{Namespace: ns, Name: "api", SchedulerName: "berth-scheduler", CPU: "7", Memory: "1Gi"},
		expectNode: "on-demand-1", why: "rule gpu-nodes-for-gpu-pods keeps it off gpu-1, the roomiest node"},
	// Phase 1: after api took on-demand-1 (pods of one phase are placed in
	// no promised order).
	{scenario: "celpolicy", phase: 1, spec: sandbox.PodSpec{Namespace: ns, Name: "cruncher", SchedulerName: "berth-scheduler", CPU: "5", Memory: "1Gi", Annotations: explainRequest},
		why: "only gpu-1 has 5 CPU free, and rule gpu-nodes-for-gpu-pods rejects it"},

	// LoadAware: usage from node annotations, plus pods placed since the sample.
	{scenario: "loadaware", spec: sandbox.PodSpec{Namespace: ns, Name: "etl", SchedulerName: "berth-loadaware", CPU: "1", Memory: "1Gi",
		Tolerations: loadAwareToleration, NodeSelector: loadAwareNodes, Annotations: explainRequest},
		expectNode: "quiet-1", showEvent: "Explained", why: "busy-1 requests nothing but burns 94% CPU (annotation); by requests it would win"},
	{scenario: "loadaware", spec: sandbox.PodSpec{Namespace: ns, Name: "etl-big", SchedulerName: "berth-loadaware", CPU: "2500m", Memory: "1Gi",
		Tolerations: loadAwareToleration, NodeSelector: loadAwareNodes, Annotations: explainRequest},
		why: "fits both nodes by requests, but would push either over the 80% CPU usage threshold (quiet-1 counts etl, placed after its sample)"},

	// ConfirmBinder: another scheduler binds a pod to the chosen node while
	// the scheduler waits for the pod's volume; the confirmation catches it.
	{scenario: "confirmbinder", spec: sandbox.PodSpec{Namespace: ns, Name: "cb-web", SchedulerName: "berth-confirmbinder", CPU: "2", Memory: "1Gi",
		Tolerations: cbToleration, NodeSelector: cbNodes, Claim: cbClaim},
		expectNode: "cb-2", showEvent: "BindConflict",
		why: "chose cb-1; cb-intruder was bound there meanwhile, so ConfirmBinder refused the binding and the next cycle chose cb-2"},
	{scenario: "confirmbinder", spec: sandbox.PodSpec{Namespace: ns, Name: cbIntruder, SchedulerName: "other-scheduler"}, external: true,
		expectNode: "cb-1", why: "bound through the API by the demo, as another scheduler would, while cb-web waited for its volume"},

	// ElasticQuota: team-a borrows team-b's idle share up to its max, and
	// gives it back by preemption when team-b needs its min.
	{scenario: "elasticquota", spec: quotaPod("team-a", "a-critical-1", "1", "team-critical"), expectNode: "shared-1", showEvent: "Explained", why: "within team-a's min (2 CPU)"},
	{scenario: "elasticquota", spec: quotaPod("team-a", "a-critical-2", "1", "team-critical"), expectNode: "shared-1", showEvent: "Explained", why: "within team-a's min (2 CPU)"},
	{scenario: "elasticquota", spec: quotaPod("team-a", "a-batch-1", "1", ""), expectPreempted: true,
		why: "borrowed team-b's idle min; taken back when team-b came (lowest priority first)"},
	{scenario: "elasticquota", spec: quotaPod("team-a", "a-batch-2", "1", ""), expectPreempted: true,
		why: "borrowed team-b's idle min; taken back when team-b came (lowest priority first)"},
	// Phase 1: after a-batch-1 and a-batch-2 took team-a to its max.
	{scenario: "elasticquota", phase: 1, spec: quotaPod("team-a", "a-batch-3", "1", ""),
		why: "refused in PreFilter, before any node is looked at: team-a at its max (4 CPU), then, once team-b took its min back, nothing left to borrow"},
	{scenario: "elasticquota", phase: 1, spec: quotaPod("team-b", "b-service", "2", ""), expectNode: "shared-1", showEvent: "Explained",
		why: "within team-b's min although the node is full: team-a's borrowed pods were preempted"},
}
