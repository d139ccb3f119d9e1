package main

import (
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// The demo cluster: nodes of different sizes and labels.
var demoNodes = []framework.NodeSpec{
	{Name: "small-1", CPU: "2", Memory: "4Gi", Labels: map[string]string{"lifecycle": "on-demand"}},
	{Name: "on-demand-1", CPU: "8", Memory: "16Gi", Labels: map[string]string{"lifecycle": "on-demand"}},
	{Name: "spot-1", CPU: "4", Memory: "8Gi", Labels: map[string]string{"lifecycle": "spot"}},
	{Name: "gpu-1", CPU: "16", Memory: "64Gi", Labels: map[string]string{"lifecycle": "on-demand", "nvidia.com/gpu.present": "true"},
		Extended: map[string]string{"nvidia.com/gpu": "2"}},
}

// demoPod is one workload of a scenario and where it should end.
type demoPod struct {
	scenario   string
	spec       framework.PodSpec
	expectNode string // "" means it should stay Pending
	why        string
}

const ns = "default"

// demoPods are created in order. Each plugin's scenario adds its pods here.
var demoPods = []demoPod{
	// Upstream behaviour, untouched: the default profile.
	{scenario: "upstream", spec: framework.PodSpec{Namespace: ns, Name: "web", SchedulerName: "default-scheduler", CPU: "6", Memory: "1Gi"},
		expectNode: "gpu-1", why: "default profile: LeastAllocated picks the roomiest node that fits 6 CPU"},
	{scenario: "upstream", spec: framework.PodSpec{Namespace: ns, Name: "too-big", SchedulerName: "default-scheduler", CPU: "32", Memory: "1Gi"},
		why: "no node has 32 CPU"},

	// CELPolicy: rules from the scheduler config.
	{scenario: "celpolicy", spec: framework.PodSpec{Namespace: ns, Name: "trainer", SchedulerName: "berth-scheduler", CPU: "2", Memory: "4Gi",
		Extended: map[string]string{"nvidia.com/gpu": "1"}},
		expectNode: "gpu-1", why: "requests a GPU: only gpu-1 has one"},
	{scenario: "celpolicy", spec: framework.PodSpec{Namespace: ns, Name: "batch-job", SchedulerName: "berth-scheduler", CPU: "1", Memory: "1Gi",
		Labels: map[string]string{"tier": "batch"}},
		expectNode: "spot-1", why: "rule batch-prefers-spot; by spreading alone on-demand-1 would win"},
	{scenario: "celpolicy", spec: framework.PodSpec{Namespace: ns, Name: "api", SchedulerName: "berth-scheduler", CPU: "7", Memory: "1Gi"},
		expectNode: "on-demand-1", why: "rule gpu-nodes-for-gpu-pods keeps it off gpu-1, the roomiest node"},
	{scenario: "celpolicy", spec: framework.PodSpec{Namespace: ns, Name: "cruncher", SchedulerName: "berth-scheduler", CPU: "5", Memory: "1Gi"},
		why: "only gpu-1 has 5 CPU free, and rule gpu-nodes-for-gpu-pods rejects it"},
}
