package main

import (
	"math"
	"strings"
	"testing"
)

// One round whose overhead profile costs 1 ms more per attempt than
// Default's: 10 Berth calls at Filter and 10 at Score per attempt, the
// framework at 20 and 30 ns per call (0.5 µs for the Berth calls), the
// bodies 40 µs, so the rest is 1 - 0.0005 - 0.04 ms.
func TestOverheadSplit(t *testing.T) {
	const attempts = 1000
	d := &sample{cpu: map[string]float64{cpuCycle: 2e-3 * attempts}, calls: map[string]float64{},
		evals: map[string]float64{"NodeResourcesFit/PreFilter": attempts}}
	o := &sample{
		cpu: map[string]float64{cpuCycle: 3e-3 * attempts},
		evals: map[string]float64{
			"NodeResourcesFit/PreFilter": attempts,
			"CELPolicy/Filter":           10 * attempts, "CELPolicy/Score": 10 * attempts,
			"NodeResourcesFit/Filter": 10 * attempts, "NodeResourcesFit/Score": 10 * attempts,
		},
		calls: map[string]float64{
			"CELPolicy/Filter": 15e-6 * attempts, "CELPolicy/Score": 25e-6 * attempts,
			"NodeResourcesFit/Filter": 50e-6 * attempts, "NodeResourcesFit/Score": 50e-6 * attempts,
			// The loops: 20 calls a point at 20 (Filter) and 30 (Score) ns
			// beyond the bodies.
			keyBodiesFilter: 65e-6 * attempts, keyFrameworkFilter: (65e-6 + 20*20e-9) * attempts,
			keyBodiesScore: 75e-6 * attempts, keyFrameworkScore: (75e-6 + 20*30e-9) * attempts,
		},
	}
	r := round{"Default": {"w": d}, overheadProfile: {"w": o}}
	diff, floor, bodies, rest, base, ok := overheadSplit(r, "w")
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !ok || !near(diff, 1) || !near(floor, 10*20e-6+10*30e-6) || !near(bodies, 0.04) || !near(rest, 1-0.0005-0.04) || !near(base, 2) {
		t.Fatalf("split %v %v %v %v %v %v", diff, floor, bodies, rest, base, ok)
	}
	var b strings.Builder
	writeOverheadSplit(&b, []round{r})
	if !strings.Contains(b.String(), "| cycle CPU less the framework's charge for the Berth calls, ratio to Default | 1.50× (1.50–1.50) |") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestCycleClass(t *testing.T) {
	for _, c := range []struct {
		stack []string
		want  string
	}{
		{[]string{"runtime.mallocgc", "github.com/berth-scheduler/berth/internal/noderecord.(*positions).find",
			"github.com/berth-scheduler/berth/pkg/plugins/celpolicy.(*CELPolicy).Filter", runFilterPlugins}, classBerthBodies},
		{[]string{"runtime.mallocgc", "github.com/berth-scheduler/berth/pkg/plugins/celpolicy.(*CELPolicy).PreFilter",
			"k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunPreFilterPlugins"}, classBerthOther},
		{[]string{"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Score", runScorePlugins}, classUpstreamBodies},
		{[]string{"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread.(*PodTopologySpread).PreScore"}, classUpstreamOther},
		{[]string{"runtime.gcAssistAlloc", "runtime.mallocgc", runScorePlugins}, classRest},
		// Berth code that calls upstream helpers is Berth's.
		{[]string{"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.Fits",
			"github.com/berth-scheduler/berth/pkg/plugins/confirmbinder.(*ConfirmBinder).Reserve"}, classBerthOther},
		{[]string{"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Filter",
			"github.com/berth-scheduler/berth/pkg/plugins/celpolicy.(*CELPolicy).Filter", runFilterPlugins}, classBerthBodies},
	} {
		if got := cycleClass(profSample(c.stack...)); got != c.want {
			t.Errorf("%v: %s, want %s", c.stack, got, c.want)
		}
	}
}

// With -base, the split and the ratios are taken against that test case
// (make bench-workload: the default profile on the overhead profile's
// workload), not Default, which may then be absent.
func TestOtherBase(t *testing.T) {
	defer func(b string) { baseProfile = b }(baseProfile)
	baseProfile = "DefaultOverheadWorkload"
	const attempts = 1000
	d := &sample{cpu: map[string]float64{cpuCycle: 2e-3 * attempts}, calls: map[string]float64{},
		evals: map[string]float64{"NodeResourcesFit/PreFilter": attempts}}
	o := &sample{cpu: map[string]float64{cpuCycle: 3e-3 * attempts},
		evals: map[string]float64{"NodeResourcesFit/PreFilter": attempts, "NodeResourcesFit/Filter": attempts, "NodeResourcesFit/Score": attempts},
		calls: map[string]float64{keyBodiesFilter: 0, keyFrameworkFilter: 0, keyBodiesScore: 0, keyFrameworkScore: 0}}
	r := round{"Default": {"w": &sample{cpu: map[string]float64{cpuCycle: 1e-3 * attempts}}}, baseProfile: {"w": d}, overheadProfile: {"w": o}}
	if got := baselineOf([]round{r}, "w"); got != baseProfile {
		t.Errorf("baseline %q, want %q", got, baseProfile)
	}
	diff, _, _, _, base, ok := overheadSplit(r, "w")
	if !ok || math.Abs(diff-1) > 1e-9 || math.Abs(base-2) > 1e-9 {
		t.Errorf("split against %s: diff %v base %v ok %v, want 1, 2, true", baseProfile, diff, base, ok)
	}
	var b strings.Builder
	writeOverheadSplit(&b, []round{r})
	if !strings.Contains(b.String(), "| | DefaultOverheadWorkload | AllPluginsOverhead | difference |") {
		t.Errorf("table:\n%s", b.String())
	}
	// A workload the -base test case did not run is still taken against
	// the default profile, not left without a baseline.
	r["Default"]["w2"] = &sample{}
	if got := baselineOf([]round{r}, "w2"); got != "Default" {
		t.Errorf("baseline of a workload without %s: %q, want Default", baseProfile, got)
	}
	// A target's row names the baseline its ratio was taken against.
	cpu := func(v float64) *sample { return &sample{pods: 1000, cpu: map[string]float64{cpuCycle: v}} }
	t2 := round{
		"Default":       {"5000Nodes_a": cpu(2), "5000Nodes_b": cpu(2)},
		baseProfile:     {"5000Nodes_a": cpu(2)},
		overheadProfile: {"5000Nodes_a": cpu(3), "5000Nodes_b": cpu(4)},
	}
	b.Reset()
	writeTargets(&b, []round{t2})
	for _, want := range []string{
		"cycle CPU per 1,000 pods ≤ 1.15× DefaultOverheadWorkload | 5000Nodes_a | 1.50×",
		"cycle CPU per 1,000 pods ≤ 1.15× default | 5000Nodes_b | 2.00×",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets lack %q:\n%s", want, b.String())
		}
	}
	// The document's opening names the baseline.
	if got := baselineText(); !strings.Contains(got, "DefaultOverheadWorkload") || !strings.Contains(got, "else the default profile") {
		t.Errorf("opening: %s", got)
	}
}
