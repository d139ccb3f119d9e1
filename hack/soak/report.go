package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// report is what a soak writes: report.json for tools (benchreport draws
// the memory chart from it), report.md for people.
type report struct {
	Seed            int64            `json:"seed"`
	Minutes         float64          `json:"minutes"`
	Nodes           int              `json:"nodes"`
	Operations      []kindCount      `json:"operations"`
	OperationErrors int              `json:"operationErrors"`
	Faults          []kindCount      `json:"faults"`
	PodsCreated     int              `json:"podsCreated"`
	PodsBound       int              `json:"podsBound"`
	PodsDeleted     int              `json:"podsDeleted"`
	Refusals        int              `json:"refusals"`
	PodsRunning     int              `json:"podsRunning"`
	PodsSucceeded   int              `json:"podsSucceeded"`
	PodsCrashed     int              `json:"podsCrashed"`
	GracefulDeletes int              `json:"gracefulDeletions"`
	LatencySeconds  map[string]int64 `json:"schedulingLatencySeconds"`
	Replicas        []replicaReport  `json:"replicas"`
	Violations      []violation      `json:"violations"`
	Command         string           `json:"command"`
	// Invariants: how much each was evaluated.
	Invariants []invariantReport `json:"invariants"`
	// Evictions seen (upstream's Preempted events), and of them victims a
	// PodDisruptionBudget protected.
	Evictions int `json:"evictions"`
	// ForeignBindings: pods the foreign binder bound beside a waiting gang
	// member; ForeignOverruns: nodes its pods overcommitted (foreign.go).
	ForeignBindings int `json:"foreignBindings"`
	ForeignOverruns int `json:"foreignOverruns"`
	// ForeignRaces: members bound within the race window of the foreign
	// pod on their node (not judged); the raced members bound later on the
	// raced node (judged by 1) and elsewhere (refused there, or tried
	// again). SlowestRead: the slowest of ConfirmBinder's reads the foreign
	// binder timed (the race window is raceSlack plus twice the slowest
	// read near the binding).
	ForeignRaces    int     `json:"foreignRaces"`
	SlowestReadSecs float64 `json:"slowestReadSeconds"`
	// Audit: what the API server's audit log held (audit.go).
	Audit            string `json:"audit"`
	ForeignSameNode  int    `json:"foreignRacedBoundSameNode"`
	ForeignElsewhere int    `json:"foreignRacedBoundElsewhere"`
	PDBEvictions     int    `json:"pdbEvictions"`
	// Reclaims: evictions judged as ElasticQuota's reclaim for another
	// namespace; ReclaimsByHistory: those legal only by the victim
	// namespace's larger use earlier in the window before the event.
	Reclaims int `json:"reclaims"`
	// UnjudgedEvictions: the evictions 8 did not judge, by why.
	UnjudgedEvictions map[string]int `json:"unjudgedEvictions,omitempty"`
	ReclaimsByHistory int            `json:"reclaimsByHistory"`
	Mutant            string         `json:"mutant,omitempty"`
	DrainMinutes      float64        `json:"drainMinutes"`
	// FirstViolation: seconds from the start to the first violation, by
	// invariant (the mutants' table reads it).
	FirstViolation map[string]float64 `json:"firstViolationSeconds,omitempty"`
}

type replicaReport struct {
	Name    string       `json:"name"`
	Starts  int          `json:"starts"`
	Exits   []exitRecord `json:"exits"`
	Samples []sample     `json:"samples"`
	// Slopes over the last half of the soak, of the longest-lived process
	// there (per minute), and how long that process ran in it.
	RSSSlopeMiBPerMin        float64 `json:"rssSlopeMiBPerMin"`
	GoroutineSlopePerMin     float64 `json:"goroutineSlopePerMin"`
	SlopeWindowMinutes       float64 `json:"slopeWindowMinutes"`
	MeanRSSMiB, MeanRoutines float64
}

// soakCommand is the make command that replays the run: the rate and the
// faults' pace named when they are not make soak's defaults.
func soakCommand(o options) string {
	cmd := fmt.Sprintf("make soak SOAK_MINUTES=%g SOAK_NODES=%d SOAK_SEED=%d", o.duration.Minutes(), o.nodes, o.seed)
	if o.opsPerSecond != defaultOpsPerSecond {
		cmd += fmt.Sprintf(" SOAK_OPS=%g", o.opsPerSecond)
	}
	if o.faultEvery != defaultFaultEvery {
		cmd += " SOAK_FAULT_EVERY=" + o.faultEvery.String()
	}
	if o.schedulerGates != "" {
		cmd += " SOAK_SCHEDULER_GATES=" + o.schedulerGates
	}
	return cmd
}

func buildReport(o options, g *generator, f *faults, w *watcher, cl *cluster, opErrors int) *report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &report{
		Seed: o.seed, Minutes: o.duration.Minutes(), Nodes: o.nodes,
		Operations: opCounts(g.ops), OperationErrors: opErrors, Faults: opCounts(f.count),
		PodsCreated: w.podsCreated, PodsBound: w.podsBound, PodsDeleted: w.podsDeleted, Refusals: w.refusalCount,
		PodsRunning: w.podsRunning, PodsSucceeded: w.podsSucceeded, PodsCrashed: w.podsFailed, GracefulDeletes: w.gracefulDeletions,
		LatencySeconds: percentiles(w.latencies),
		Command:        soakCommand(o),
	}
	half := o.duration.Seconds() / 2
	for _, rep := range cl.replicas {
		rep.mu.Lock()
		rr := replicaReport{Name: rep.name, Starts: rep.starts, Exits: append([]exitRecord{}, rep.exits...), Samples: append([]sample{}, rep.samples...)}
		rep.mu.Unlock()
		rr.RSSSlopeMiBPerMin, rr.GoroutineSlopePerMin, rr.SlopeWindowMinutes, rr.MeanRSSMiB, rr.MeanRoutines = slopes(rr.Samples, half)
		r.Replicas = append(r.Replicas, rr)
		// 10. Leaks: a slope over a long enough process start fails the
		// run when a threshold is set.
		if rr.SlopeWindowMinutes*60 >= o.leakWindow.Seconds() {
			w.event("10-leak", rep.name, true)
			if o.maxRSSSlope > 0 && rr.RSSSlopeMiBPerMin > o.maxRSSSlope {
				w.violate("leak-rss/"+rep.name, "10-leak", fmt.Sprintf("replica %s: RSS grew %.2f MiB/min over %.1f min (threshold %.2f)", rep.name, rr.RSSSlopeMiBPerMin, rr.SlopeWindowMinutes, o.maxRSSSlope), "replica "+rep.name)
			}
			if o.maxGoroutineSlope > 0 && rr.GoroutineSlopePerMin > o.maxGoroutineSlope {
				w.violate("leak-goroutines/"+rep.name, "10-leak", fmt.Sprintf("replica %s: goroutines grew %.1f/min over %.1f min (threshold %.1f)", rep.name, rr.GoroutineSlopePerMin, rr.SlopeWindowMinutes, o.maxGoroutineSlope), "replica "+rep.name)
			}
		} else if o.maxRSSSlope > 0 || o.maxGoroutineSlope > 0 {
			w.event("10-leak", rep.name, false)
		}
	}
	r.Violations = append([]violation{}, w.violations...)
	r.Invariants = w.invariantReports()
	r.Evictions, r.PDBEvictions, r.Mutant, r.DrainMinutes = w.evictions, w.pdbEvictions, o.mutant, o.drain.Minutes()
	r.Reclaims, r.ReclaimsByHistory = w.reclaims, w.reclaimsByHistory
	r.UnjudgedEvictions = maps.Clone(w.unjudgedEvictions)
	r.ForeignBindings, r.ForeignOverruns = w.foreignPins, w.foreignOverruns
	r.ForeignRaces, r.ForeignSameNode, r.ForeignElsewhere = w.foreignRaces, w.foreignSameNode, w.foreignElsewhere
	r.SlowestReadSecs = w.maxLatency.Seconds()
	r.Audit = w.audit.auditSummary()
	for _, v := range r.Violations {
		if r.FirstViolation == nil {
			r.FirstViolation = map[string]float64{}
		}
		if t, ok := r.FirstViolation[v.Invariant]; !ok || v.At < t {
			r.FirstViolation[v.Invariant] = v.At
		}
	}
	return r
}

// percentiles of the scheduling latencies (creation to PodScheduled,
// whole seconds as the API records them).
func percentiles(d []time.Duration) map[string]int64 {
	if len(d) == 0 {
		return nil
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) int64 { return int64(s[min(len(s)-1, int(p*float64(len(s))))].Seconds()) }
	return map[string]int64{"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": int64(s[len(s)-1].Seconds())}
}

// slopes fits a line (least squares) to RSS and goroutines of the process
// start that ran longest after from (seconds).
func slopes(samples []sample, from float64) (rss, routines, minutes, meanRSS, meanRoutines float64) {
	byStart := map[int][]sample{}
	for _, s := range samples {
		if s.At >= from {
			byStart[s.Start] = append(byStart[s.Start], s)
		}
	}
	var best []sample
	for _, ss := range byStart {
		if len(ss) > len(best) {
			best = ss
		}
	}
	if len(best) < 3 {
		return 0, 0, 0, 0, 0
	}
	fit := func(y func(sample) float64) (slope, mean float64) {
		var sx, sy, sxx, sxy float64
		n := float64(len(best))
		for _, s := range best {
			x := s.At / 60
			sx, sy, sxx, sxy = sx+x, sy+y(s), sxx+x*x, sxy+x*y(s)
		}
		den := n*sxx - sx*sx
		if den == 0 {
			return 0, sy / n
		}
		return (n*sxy - sx*sy) / den, sy / n
	}
	rss, meanRSS = fit(func(s sample) float64 { return s.RSS / (1 << 20) })
	routines, meanRoutines = fit(func(s sample) float64 { return s.Goroutines })
	minutes = (best[len(best)-1].At - best[0].At) / 60
	return
}

func (r *report) write(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), raw, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.markdown()), 0o644)
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak: %g minutes, %d nodes, seed %d\n\n", r.Minutes, r.Nodes, r.Seed)
	fmt.Fprintf(&b, "Command: `%s`. Violations: **%d**.\n\n", r.Command, len(r.Violations))
	if r.Mutant != "" {
		fmt.Fprintf(&b, "Planted fault: **%s**.\n\n", r.Mutant)
	}
	fmt.Fprintf(&b, "Pods created %d, bound %d, deleted %d; admission refusals %d; operation errors %d.\n", r.PodsCreated, r.PodsBound, r.PodsDeleted, r.Refusals, r.OperationErrors)
	fmt.Fprintf(&b, "KWOK's kubelets: %d pods Running, %d Succeeded (Jobs), %d crashed, %d graceful deletions finished.\n\n", r.PodsRunning, r.PodsSucceeded, r.PodsCrashed, r.GracefulDeletes)
	if r.LatencySeconds != nil {
		fmt.Fprintf(&b, "Scheduling latency (creation to PodScheduled, whole seconds): p50 %ds, p90 %ds, p99 %ds, max %ds.\n\n",
			r.LatencySeconds["p50"], r.LatencySeconds["p90"], r.LatencySeconds["p99"], r.LatencySeconds["max"])
	}
	b.WriteString("| operation | count |\n| --- | --- |\n")
	for _, k := range r.Operations {
		fmt.Fprintf(&b, "| %s | %d |\n", k.Kind, k.Count)
	}
	b.WriteString("\n| fault | count |\n| --- | --- |\n")
	for _, k := range r.Faults {
		fmt.Fprintf(&b, "| %s | %d |\n", k.Kind, k.Count)
	}
	fmt.Fprintf(&b, "\nEvictions (upstream's Preempted events): %d, of them %d of a PodDisruptionBudget's protected pods; reclaims judged (a victim of another namespace with a quota) %d, of them legal only by the namespace's larger use earlier in the %s before the event %d.\n", r.Evictions, r.PDBEvictions, r.Reclaims, evictionWindow, r.ReclaimsByHistory)
	if len(r.UnjudgedEvictions) > 0 {
		whys := slices.Sorted(maps.Keys(r.UnjudgedEvictions))
		parts := make([]string, len(whys))
		for i, why := range whys {
			parts[i] = fmt.Sprintf("%s %d", why, r.UnjudgedEvictions[why])
		}
		fmt.Fprintf(&b, "Evictions not judged, by why: %s.\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "\nForeign bindings beside a pod waiting with its node nominated (a gang member at Permit, a binding slow in PreBind or its confirmation; ConfirmBinder must refuse the pod there): %d; of those pods, bound later on the raced node %d (the overcommit invariant judges them), elsewhere %d; overcommits the foreign pod itself caused (arrived last; a kubelet refuses it) %d, and races (a pod bound within %s, plus twice the slowest node GET and pod LIST timed within %s, plus twice a slowed path's delay, of the foreign pod: counted, not judged) %d. The slowest such read took %.2fs.\n",
		r.ForeignBindings, r.ForeignSameNode, r.ForeignElsewhere, r.ForeignOverruns, raceSlack, latencyAround, r.ForeignRaces, r.SlowestReadSecs)
	fmt.Fprintf(&b, "\nOvercommits beside a foreign pod are judged from the API server's audit log (the replicas' LISTs of a node's pods and their bindings) where it has the binding: %s.\n", r.Audit)
	b.WriteString("\n## Invariants: how much each was evaluated\n\nObject-seconds in scope (an object in the state the invariant judges) and evaluated (not within the object's own grace, and for bounds that need a scheduler, while a replica led); events for the invariants judged at an event. The drain (" + fmt.Sprintf("%.1f", r.DrainMinutes) + " min, faults healed, no new work) is included.\n\n| invariant | on (share of the run) | objects judged | in scope (object-s) | evaluated (object-s) | events (judged) | share evaluated |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, inv := range r.Invariants {
		ev := ""
		if inv.Events > 0 {
			ev = fmt.Sprintf("%d (%d)", inv.Events, inv.EventsJudged)
		}
		fmt.Fprintf(&b, "| %s | %.1f %% | %d | %.0f | %.0f | %s | %.1f %% |\n", inv.Invariant, 100*inv.RunShare, inv.Judged, inv.InScopeSeconds, inv.EvaluatedSeconds, ev, 100*inv.Share)
	}
	b.WriteString("\n| replica | starts | exits (cause) | mean RSS (MiB) | RSS slope (MiB/min) | mean goroutines | goroutine slope (/min) | over (min) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, rr := range r.Replicas {
		causes := map[string]int{}
		for _, e := range rr.Exits {
			causes[e.Cause]++
		}
		var cs []string
		for c, n := range causes {
			cs = append(cs, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(cs)
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %+.2f | %.0f | %+.1f | %.1f |\n", rr.Name, rr.Starts, strings.Join(cs, ", "), rr.MeanRSSMiB, rr.RSSSlopeMiBPerMin, rr.MeanRoutines, rr.GoroutineSlopePerMin, rr.SlopeWindowMinutes)
	}
	b.WriteString("\nSlopes: least squares over the last half of the soak, of the process start that ran longest in it.\n")
	b.WriteString("\nRSS over time: ![the replicas' RSS](rss.svg) (`make soak` draws it beside this file with hack/tools/benchreport; `make test-soak` does not).\n")
	if len(r.Violations) > 0 {
		b.WriteString("\n## Violations\n\n| at (s) | invariant | what | objects |\n| --- | --- | --- | --- |\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "| %.0f | %s | %s | %s |\n", v.At, v.Invariant, v.Message, strings.Join(v.Objects, "<br>"))
		}
	}
	return b.String()
}

// printMutantsTable prints, per planted fault, whether its soak caught it
// (a violation), by which invariants and how soon; it returns 1 if any
// was missed or did not run.
func printMutantsTable(dir string, mutants []string) int {
	rc := 0
	fmt.Println("| planted fault | nodes | caught | first violation (s), by invariant | violations |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, m := range mutants {
		raw, err := os.ReadFile(filepath.Join(dir, m, "report.json"))
		if err != nil {
			fmt.Printf("| %s | | no report (%v) | | |\n", m, err)
			rc = 1
			continue
		}
		var r report
		if err := json.Unmarshal(raw, &r); err != nil {
			fmt.Printf("| %s | | unreadable report (%v) | | |\n", m, err)
			rc = 1
			continue
		}
		var firsts []string
		for inv, at := range r.FirstViolation {
			firsts = append(firsts, fmt.Sprintf("%s at %.0f", inv, at))
		}
		sort.Strings(firsts)
		caught := "**missed**"
		// A control (no fault planted): none (or none-<size>, for
		// mutants run at another size by hand).
		control := m == "none" || strings.HasPrefix(m, "none-")
		switch {
		case control && len(r.Violations) == 0:
			caught = "clean (the control: no fault planted)"
		case control:
			caught = "**the control failed**: a violation with no fault planted"
			rc = 1
		case len(r.Violations) > 0:
			caught = "yes"
		default:
			rc = 1
		}
		fmt.Printf("| %s | %d | %s | %s | %d |\n", m, r.Nodes, caught, strings.Join(firsts, "; "), len(r.Violations))
	}
	return rc
}
