package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

func buildReport(o options, g *generator, f *faults, w *watcher, cl *cluster, opErrors int) *report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &report{
		Seed: o.seed, Minutes: o.duration.Minutes(), Nodes: o.nodes,
		Operations: opCounts(g.ops), OperationErrors: opErrors, Faults: opCounts(f.count),
		PodsCreated: w.podsCreated, PodsBound: w.podsBound, PodsDeleted: w.podsDeleted, Refusals: w.refusalCount,
		PodsRunning: w.podsRunning, PodsSucceeded: w.podsSucceeded, PodsCrashed: w.podsFailed, GracefulDeletes: w.gracefulDeletions,
		LatencySeconds: percentiles(w.latencies),
		Violations:     append([]violation{}, w.violations...),
		Command:        fmt.Sprintf("make soak SOAK_MINUTES=%g SOAK_NODES=%d SOAK_SEED=%d", o.duration.Minutes(), o.nodes, o.seed),
	}
	half := o.duration.Seconds() / 2
	for _, rep := range cl.replicas {
		rep.mu.Lock()
		rr := replicaReport{Name: rep.name, Starts: rep.starts, Exits: append([]exitRecord{}, rep.exits...), Samples: append([]sample{}, rep.samples...)}
		rep.mu.Unlock()
		rr.RSSSlopeMiBPerMin, rr.GoroutineSlopePerMin, rr.SlopeWindowMinutes, rr.MeanRSSMiB, rr.MeanRoutines = slopes(rr.Samples, half)
		r.Replicas = append(r.Replicas, rr)
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
