package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// Per-call CPU (issue #28): the CPU profile's samples under a plugin's
// Filter or Score, divided by the calls the scheduler counted
// (scheduler_plugin_evaluation_total of the measured phase, which the
// benchmark exposes as berth_bench_plugin_evaluations). Unlike
// scheduler_plugin_execution_duration_seconds (wall time of about 1 % of the
// calls), this is every call's CPU.

// callBodies are the Filter and Score methods reported per call, by key.
var callBodies = map[string]string{
	"github.com/berth-scheduler/berth/pkg/plugins/celpolicy.(*CELPolicy).Filter":                  "CELPolicy/Filter",
	"github.com/berth-scheduler/berth/pkg/plugins/celpolicy.(*CELPolicy).Score":                   "CELPolicy/Score",
	"github.com/berth-scheduler/berth/pkg/plugins/loadaware.(*LoadAware).Filter":                  "LoadAware/Filter",
	"github.com/berth-scheduler/berth/pkg/plugins/loadaware.(*LoadAware).Score":                   "LoadAware/Score",
	"github.com/berth-scheduler/berth/pkg/plugins/admissionfeedback.(*AdmissionFeedback).Filter":  "AdmissionFeedback/Filter",
	"github.com/berth-scheduler/berth/pkg/plugins/admissionfeedback.(*AdmissionFeedback).Score":   "AdmissionFeedback/Score",
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Filter":               "NodeResourcesFit/Filter",
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Score":                "NodeResourcesFit/Score",
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration.(*TaintToleration).Filter": "TaintToleration/Filter",
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration.(*TaintToleration).Score":  "TaintToleration/Score",
}

// The framework's loops over the plugins, and every plugin's body (any
// plugin package's Filter or Score method): what the loops cost beyond the
// bodies is the framework's per call.
const (
	runFilterPlugins = "k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunFilterPlugins"
	runScorePlugins  = "k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunScorePlugins"

	keyFrameworkFilter = "framework/Filter"
	keyFrameworkScore  = "framework/Score"
	keyBodiesFilter    = "bodies/Filter"
	keyBodiesScore     = "bodies/Score"
)

var pluginPackages = []string{"k8s.io/kubernetes/pkg/scheduler/framework/plugins/", "github.com/berth-scheduler/berth/pkg/plugins/"}

// callKeys are the per-call keys a sample counts for (each once).
func callKeys(s *profile.Sample) []string {
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			name := line.Function.Name
			if k, ok := callBodies[name]; ok {
				add(k)
			}
			switch {
			// The loops and their closures (Score runs per node in
			// RunScorePlugins.func2 on the parallelizer's workers).
			case name == runFilterPlugins || strings.HasPrefix(name, runFilterPlugins+".func"):
				add(keyFrameworkFilter)
			case name == runScorePlugins || strings.HasPrefix(name, runScorePlugins+".func"):
				add(keyFrameworkScore)
			case hasPrefix(name, pluginPackages) && strings.HasSuffix(name, ").Filter"):
				add(keyBodiesFilter)
			case hasPrefix(name, pluginPackages) && strings.HasSuffix(name, ").Score"):
				add(keyBodiesScore)
			}
		}
	}
	return keys
}

// cyclesOf is the number of scheduling attempts of the measured phase:
// NodeResourcesFit's PreFilter runs once in every attempt of every
// profile. 0 when the round did not count calls.
func cyclesOf(s *sample) float64 { return s.evals["NodeResourcesFit/PreFilter"] }

// nsPerCall is the CPU of key per call, in nanoseconds.
func nsPerCall(key string) figure {
	return func(s *sample) (float64, bool) {
		n := s.evals[key]
		if n == 0 || s.calls == nil {
			return 0, false
		}
		return s.calls[key] * 1e9 / n, true
	}
}

// frameworkNsPerCall is the framework's CPU per plugin call at an
// extension point: its loop's CPU beyond the plugins' bodies, over every
// plugin's calls there.
func frameworkNsPerCall(point string) figure {
	return func(s *sample) (float64, bool) {
		var n float64
		for k, v := range s.evals {
			if strings.HasSuffix(k, "/"+point) {
				n += v
			}
		}
		if n == 0 || s.calls == nil {
			return 0, false
		}
		return (s.calls["framework/"+point] - s.calls["bodies/"+point]) * 1e9 / n, true
	}
}

// callsPerPod is key's calls per scheduling attempt.
func callsPerPod(key string) figure {
	return func(s *sample) (float64, bool) {
		c := cyclesOf(s)
		if c == 0 {
			return 0, false
		}
		return s.evals[key] / c, true
	}
}

func attemptsPerPod(s *sample) (float64, bool) { return s.attempts, s.attempts > 0 }

// iqrCell is a median with its interquartile range.
func iqrCell(xs []float64, format string) string {
	if len(xs) == 0 {
		return "—"
	}
	q1, m, q3 := quartiles(xs)
	return fmt.Sprintf(format+" ("+format+"–"+format+")", m, q1, q3)
}

// callProfiles are the profiles the per-call table reports, in order (with
// another -base, Default beside it when it ran).
func callProfiles() []string {
	if baseProfile != "Default" {
		return []string{baseProfile, "Default", "AllPluginsOverhead", "AllPlugins"}
	}
	return []string{baseProfile, "AllPluginsOverhead", "AllPlugins"}
}

// writeCalls is the per-call CPU table and the calls per pod of every
// plugin and extension point, per workload that counted calls.
func writeCalls(b *strings.Builder, rounds []round) {
	_, workloads := profilesAndWorkloads(rounds)
	for _, w := range workloads {
		if !ran(rounds, baseProfile, w) {
			continue
		}
		var counted bool
		for _, p := range callProfiles() {
			counted = counted || len(values(rounds, p, w, func(s *sample) (float64, bool) { return cyclesOf(s), cyclesOf(s) > 0 })) > 0
		}
		if !counted {
			continue
		}
		fmt.Fprintf(b, "## CPU per plugin call: %s\n\n", w)
		fmt.Fprintln(b, "Every call's CPU, not a sample of wall time: the CPU profile's samples of the measured phase under each plugin's `Filter` or `Score` method, divided by the calls the scheduler counted in that phase (`scheduler_plugin_evaluation_total`, exposed to the harness by `test/bench/evaluations_test.go`). The framework's row is its loop over the plugins (`RunFilterPlugins`, `RunScorePlugins`) beyond every plugin's body, over every plugin's calls at that extension point: what a plugin call costs before the plugin runs (the skip set, the evaluation counter, the status, the score bookkeeping). Nanoseconds per call, median over rounds (interquartile range); calls per attempt beside it. AllPluginsOverhead decides as Default does (every node passes every Berth plugin); AllPlugins decides (its GPU rule rejects 10 % of the nodes).")
		fmt.Fprintln(b)
		var rows strings.Builder
		keys := make([]string, 0, len(callBodies)+2)
		for _, k := range callBodies {
			keys = append(keys, k)
		}
		sortBerthFirst(keys)
		for _, p := range callProfiles() {
			if !ran(rounds, p, w) {
				continue
			}
			for _, k := range keys {
				ns := values(rounds, p, w, nsPerCall(k))
				if len(ns) == 0 {
					continue
				}
				fmt.Fprintf(&rows, "| %s | %s | %s | %s |\n", p, k, iqrCell(ns, "%.0f"), iqrCell(values(rounds, p, w, callsPerPod(k)), "%.0f"))
			}
			for _, point := range []string{"Filter", "Score"} {
				if ns := values(rounds, p, w, frameworkNsPerCall(point)); len(ns) > 0 {
					fmt.Fprintf(&rows, "| %s | the framework, per plugin call at %s | %s | |\n", p, point, iqrCell(ns, "%.0f"))
				}
			}
		}
		if rows.Len() == 0 {
			fmt.Fprintln(b, "No CPU profile in these rounds (run with `-perf-cpuprofile`).")
		} else {
			fmt.Fprintln(b, "| Profile | Plugin/extension point | CPU per call, ns | Calls per attempt |")
			fmt.Fprintln(b, "| --- | --- | --- | --- |")
			b.WriteString(rows.String())
		}
		fmt.Fprintln(b)
		fmt.Fprintln(b, "Calls per scheduling attempt of every plugin and extension point in the measured phase, and attempts per scheduled pod (`scheduler_pod_scheduling_attempts`), so that nothing skipped and no retry hides in a ratio (median over rounds):")
		fmt.Fprintln(b)
		var ran3 []string
		all := map[string]bool{}
		for _, p := range callProfiles() {
			if !ran(rounds, p, w) {
				continue
			}
			ran3 = append(ran3, p)
			for _, r := range rounds {
				if s := r[p][w]; s != nil {
					for k := range s.evals {
						all[k] = true
					}
				}
			}
		}
		names := make([]string, 0, len(all))
		for k := range all {
			names = append(names, k)
		}
		sortBerthFirst(names)
		fmt.Fprintf(b, "| | %s |\n", strings.Join(ran3, " | "))
		fmt.Fprintf(b, "| --- |%s\n", strings.Repeat(" --- |", len(ran3)))
		row := func(label string, f func(p string) string) {
			cells := make([]string, len(ran3))
			for i, p := range ran3 {
				cells[i] = f(p)
			}
			fmt.Fprintf(b, "| %s | %s |\n", label, strings.Join(cells, " | "))
		}
		row("attempts per scheduled pod", func(p string) string { return iqrCell(values(rounds, p, w, attemptsPerPod), "%.3f") })
		for _, k := range names {
			row(k, func(p string) string {
				if v := values(rounds, p, w, callsPerPod(k)); len(v) > 0 && median(v) > 0 {
					return num(median(v))
				}
				return "—"
			})
		}
		fmt.Fprintln(b)
	}
}

// sortBerthFirst sorts "Plugin/point" keys, Berth's plugins first.
func sortBerthFirst(keys []string) {
	sort.Slice(keys, func(i, j int) bool {
		bi, bj := isBerth(strings.Split(keys[i], "/")[0]), isBerth(strings.Split(keys[j], "/")[0])
		if bi != bj {
			return bi
		}
		return keys[i] < keys[j]
	})
}

// The overhead profile's extra cycle CPU per attempt over Default, split
// per round: what the framework charges for the Berth plugins' calls (its
// per-call cost, measured in the same round, times their calls), the Berth
// plugins' Filter and Score bodies, and the rest (per-pod extension points,
// allocation and the GC assists it triggers, upstream plugins slowed by
// the caches the extra calls share).
const overheadProfile = "AllPluginsOverhead"

// cycleMsPerAttempt is the scheduling cycles' CPU per attempt, ms.
func cycleMsPerAttempt(s *sample) (float64, bool) {
	c := cyclesOf(s)
	if c == 0 || s.cpu == nil {
		return 0, false
	}
	return s.cpu[cpuCycle] * 1e3 / c, true
}

// berthCalls is the Berth plugins' calls per attempt at point, and their
// bodies' CPU per attempt in ms.
func berthCalls(s *sample, point string) (calls, bodyMs float64) {
	c := cyclesOf(s)
	if c == 0 {
		return 0, 0
	}
	for k, n := range s.evals {
		plugin, p, _ := strings.Cut(k, "/")
		if p == point && isBerth(plugin) {
			calls += n / c
			bodyMs += s.calls[k] * 1e3 / c
		}
	}
	return calls, bodyMs
}

// overheadSplit is one round's split, ms per attempt: the difference, the
// framework's floor, the Berth bodies, the rest, and Default's cycle.
func overheadSplit(r round, w string) (diff, floor, bodies, rest, base float64, ok bool) {
	o, d := r[overheadProfile][w], r[baseProfile][w]
	if o == nil || d == nil || o.calls == nil {
		return 0, 0, 0, 0, 0, false
	}
	oc, ok1 := cycleMsPerAttempt(o)
	dc, ok2 := cycleMsPerAttempt(d)
	if !ok1 || !ok2 {
		return 0, 0, 0, 0, 0, false
	}
	for _, point := range []string{"Filter", "Score"} {
		perCall, ok := frameworkNsPerCall(point)(o)
		if !ok {
			return 0, 0, 0, 0, 0, false
		}
		calls, body := berthCalls(o, point)
		floor += calls * perCall / 1e6
		bodies += body
	}
	diff = oc - dc
	return diff, floor, bodies, diff - floor - bodies, dc, true
}

// Each sample of a scheduling cycle counts for one class (cycleClass), by
// the code it ran under, so that a profile's cycle CPU is split without
// overlap.
const (
	classBerthBodies    = "class/berth-bodies"
	classBerthOther     = "class/berth-other"
	classUpstreamBodies = "class/upstream-bodies"
	classUpstreamOther  = "class/upstream-other"
	classRest           = "class/rest"
)

var cycleClasses = []struct{ key, label string }{
	{classBerthBodies, "Berth plugins' Filter and Score"},
	{classBerthOther, "Berth plugins' other extension points (PreFilter, PreScore, Reserve)"},
	{classUpstreamBodies, "upstream plugins' Filter and Score"},
	{classUpstreamOther, "upstream plugins' other extension points"},
	{classRest, "the rest: the framework's loops and bookkeeping, allocation and GC assists outside the plugins, host selection"},
}

const (
	berthPrefix    = "github.com/berth-scheduler/berth/"
	upstreamPrefix = "k8s.io/kubernetes/pkg/scheduler/framework/plugins/"
)

// cycleClass is the class of a sample of a scheduling cycle: the first of
// the classes above that one of its frames belongs to.
func cycleClass(s *profile.Sample) string {
	var berthBody, berth, upBody, up bool
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			name := line.Function.Name
			body := strings.HasSuffix(name, ").Filter") || strings.HasSuffix(name, ").Score")
			switch {
			case strings.HasPrefix(name, berthPrefix+"pkg/plugins/") && body:
				berthBody = true
			case strings.HasPrefix(name, berthPrefix):
				berth = true
			case strings.HasPrefix(name, upstreamPrefix) && body:
				upBody = true
			case strings.HasPrefix(name, upstreamPrefix):
				up = true
			}
		}
	}
	switch {
	case berthBody:
		return classBerthBodies
	case berth:
		return classBerthOther
	case upBody:
		return classUpstreamBodies
	case up:
		return classUpstreamOther
	}
	return classRest
}

// classMs is a class's cycle CPU per attempt, ms.
func classMs(key string) figure {
	return func(s *sample) (float64, bool) {
		c := cyclesOf(s)
		if c == 0 || s.calls == nil {
			return 0, false
		}
		return s.calls[key] * 1e3 / c, true
	}
}

// diffs are f(p) - f(base) per round where both have it.
func diffs(rounds []round, p, base, w string, f figure) []float64 {
	return paired(rounds, p, base, w, f, func(v, bv float64) (float64, bool) { return v - bv, true })
}

// writeOverheadSplit is, for each workload whose rounds counted calls, the
// overhead profile's cycle CPU per attempt against Default's by class, and
// overheadSplit's view of the same difference.
func writeOverheadSplit(b *strings.Builder, rounds []round) {
	_, workloads := profilesAndWorkloads(rounds)
	for _, w := range workloads {
		var diff, floor, bodies, rest, net, berthOnly []float64
		for _, r := range rounds {
			d, f, bo, re, base, ok := overheadSplit(r, w)
			if !ok {
				continue
			}
			diff, floor, bodies, rest = append(diff, d), append(floor, f), append(bodies, bo), append(rest, re)
			net = append(net, (base+d-f)/base)
			o := r[overheadProfile][w]
			bm, _ := classMs(classBerthBodies)(o)
			om, _ := classMs(classBerthOther)(o)
			berthOnly = append(berthOnly, (base+bm+om)/base)
		}
		if len(diff) == 0 {
			continue
		}
		fmt.Fprintf(b, "## Where AllPluginsOverhead's extra cycle CPU goes: %s\n\n", w)
		fmt.Fprintln(b, "Every sample of a scheduling cycle in the CPU profiles, in one class each: under a Berth plugin's Filter or Score; under any other Berth code (the per-pod extension points); under an upstream plugin's Filter or Score; under an upstream plugin's other extension points; else the rest. CPU ms per attempt, median over rounds (interquartile range); the difference is the median of each round's difference.")
		fmt.Fprintln(b)
		fmt.Fprintf(b, "| | %s | %s | difference |\n", baseProfile, overheadProfile)
		fmt.Fprintln(b, "| --- | --- | --- | --- |")
		for _, c := range cycleClasses {
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", c.label, iqrCell(values(rounds, baseProfile, w, classMs(c.key)), "%.3f"),
				iqrCell(values(rounds, overheadProfile, w, classMs(c.key)), "%.3f"), iqrCell(diffs(rounds, overheadProfile, baseProfile, w, classMs(c.key)), "%+.3f"))
		}
		fmt.Fprintf(b, "| **the scheduling cycle** | %s | %s | %s |\n", iqrCell(values(rounds, baseProfile, w, cycleMsPerAttempt), "%.3f"),
			iqrCell(values(rounds, overheadProfile, w, cycleMsPerAttempt), "%.3f"), iqrCell(diff, "%+.3f"))
		fmt.Fprintln(b)
		fmt.Fprintln(b, "The same difference seen from the per-call table: what the framework charges for the Berth plugins' calls is its CPU per plugin call at Filter and at Score in that round (the framework's rows above) times the Berth plugins' calls per attempt — what any plugin added to the profile costs before its body runs; it lies in the rest above, with allocation and the GC assists the extra calls trigger. The last two rows are ratios to the baseline's cycle, per round: with only the Berth code's own CPU added (its Filter and Score and its other extension points), and with the overhead profile's cycle less the framework's charge for the Berth calls.")
		fmt.Fprintln(b)
		fmt.Fprintf(b, "| | ms per attempt, or ratio to %s |\n", baseProfile)
		fmt.Fprintln(b, "| --- | --- |")
		fmt.Fprintf(b, "| cycle CPU over %s | %s |\n", baseProfile, iqrCell(diff, "%.3f"))
		fmt.Fprintf(b, "| the framework, for the Berth plugins' calls | %s |\n", iqrCell(floor, "%.3f"))
		fmt.Fprintf(b, "| the Berth plugins' Filter and Score bodies | %s |\n", iqrCell(bodies, "%.3f"))
		fmt.Fprintf(b, "| the rest | %s |\n", iqrCell(rest, "%.3f"))
		fmt.Fprintf(b, "| %s's cycle plus the Berth code's own CPU, ratio to %s | %s |\n", baseProfile, baseProfile, ratioCell(berthOnly))
		fmt.Fprintf(b, "| cycle CPU less the framework's charge for the Berth calls, ratio to %s | %s |\n", baseProfile, ratioCell(net))
		fmt.Fprintln(b)
	}
}
