package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/berth-scheduler/berth/internal/offline"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

// SimulationReport's apiVersion and kind, as -o json|yaml prints them.
const (
	simulateAPIVersion = "simulate.berth.dev/v1alpha1"
	simulateKind       = "SimulationReport"
)

// simulateReport is what -o json|yaml prints (with apiVersion, kind and
// metadata.name, as kubectl's printers want an object).
type simulateReport struct {
	Snapshot string       `json:"snapshot"`
	Mode     offline.Mode `json:"mode"`
	Drained  []string     `json:"drained,omitempty"`
	// AddedNodes and RemovedNodes are --add-nodes' copies and
	// --remove-nodes' nodes.
	AddedNodes   []string       `json:"addedNodes,omitempty"`
	RemovedNodes []string       `json:"removedNodes,omitempty"`
	Configs      []string       `json:"configs"`
	Totals       simulateTotals `json:"totals"`
	Pods         []simulatedPod `json:"pods"`
	Unmodelled   []string       `json:"unmodelled,omitempty"`
	Warnings     []string       `json:"warnings,omitempty"`
	// TimedOut: --timeout passed before the scheduler was done (under
	// some config); the pods not placed by then say so.
	TimedOut bool `json:"timedOut,omitempty"`
}

type simulateTotals struct {
	Pods    int   `json:"pods"`
	Placed  []int `json:"placed"`
	Pending []int `json:"pending"`
	// NoProfile counts, per config, the pods another config placed that
	// it has no profile for: nothing would place them (--fail-on pending
	// counts them).
	NoProfile []int `json:"noProfile"`
	Moved     int   `json:"moved"`
	// Ties are pods placed on another node that scored as high as the
	// first config's node (or the other way round): not moved.
	Ties           int `json:"ties"`
	NewlyPending   int `json:"newlyPending"`
	NewlyPlaced    int `json:"newlyPlaced"`
	NewlyPreempted int `json:"newlyPreempted"`
	// GangsNoLongerFitting are PodGroups with their minMember bound under
	// the first config and not under the last.
	GangsNoLongerFitting int `json:"gangsNoLongerFitting"`
	// PendingReasons count, per filter status, the pending pods it kept off
	// at least one node (and the nodes), per config.
	PendingReasons []reasonTotal `json:"pendingReasons,omitempty"`
	// OtherSchedulers count, per config, the pods of each schedulerName
	// it has no profile for: left where they are, pending or bound.
	OtherSchedulers []map[string]int `json:"otherSchedulers"`
	// Nodes, Quotas and Gangs are per config, in the order given.
	Nodes  []nodeTotal  `json:"nodes,omitempty"`
	Quotas []quotaTotal `json:"quotas,omitempty"`
	Gangs  []gangTotal  `json:"gangs,omitempty"`
}

type reasonTotal struct {
	Reason string `json:"reason"`
	Pods   []int  `json:"pods"`
	Nodes  []int  `json:"nodes"`
}

type nodeTotal struct {
	Node string `json:"node"`
	// CPU and Memory are the requested share of allocatable, in percent.
	CPU    []float64 `json:"cpuPercent"`
	Memory []float64 `json:"memoryPercent"`
	Pods   []int     `json:"pods"`
}

type quotaTotal struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Used      []v1.ResourceList `json:"used"`
	Borrowed  []v1.ResourceList `json:"borrowed"`
}

type gangTotal struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	MinMember int32  `json:"minMember"`
	Bound     []int  `json:"bound"`
}

type simulatedPod struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	SchedulerName string `json:"schedulerName"`
	// Outcomes are one per config, in the order given.
	Outcomes []simulatedOutcome `json:"outcomes"`
	// Change compares the last config's outcome with the first's: "",
	// "moved", "tie" (on another node that scored as high), "newly-pending",
	// "newly-placed", "newly-preempted" (a pod placed under the first
	// config and of no profile of the last is newly pending: nothing
	// would schedule it).
	Change string `json:"change,omitempty"`
	// Why says, for a change, what decided it under the last config.
	Why string `json:"why,omitempty"`
}

type simulatedOutcome struct {
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Preempted: the simulated scheduler deleted it (a preemption victim).
	Preempted bool `json:"preempted,omitempty"`
	// NotSimulated: the config has no profile for the pod's schedulerName.
	NotSimulated bool `json:"notSimulated,omitempty"`
	// Untouched: the pod was bound in the snapshot and this config's run
	// left it there (another config's preempted it).
	Untouched bool `json:"untouched,omitempty"`
	// Score is how Node scored in the pod's last scheduling cycle (per
	// plugin, weighted); Ties counts the other nodes that scored as high,
	// TiedWith names the first 20.
	Score    *offline.Score `json:"score,omitempty"`
	Ties     int            `json:"ties,omitempty"`
	TiedWith []string       `json:"tiedWith,omitempty"`
	// Compared is how the first config's node fared under this one, where
	// the pod is elsewhere or pending.
	Compared *offline.Verdict `json:"compared,omitempty"`
	// Rejections count, for a pending pod, the nodes each filter status
	// rejected in its last cycle.
	Rejections map[string]int `json:"rejections,omitempty"`
}

func newSimulateCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var snapPath, failOn, featureGates string
	pf := newPrintFlags()
	var configs, drain, addNodes, removeNodes []string
	var mode string
	var verbose, keepTerminating, allowPartial, callExtenders bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "simulate --snapshot FILE --config CURRENT.yaml [--config PROPOSED.yaml] [--mode pending|replace|drain --nodes NODE,...]",
		Short: "Replay a snapshot through Berth's scheduler under a configuration (or two, and see what differs), offline",
		Long: "Runs Berth's scheduler — upstream's framework and Berth's plugins, built from the configuration as the\n" +
			"scheduler's start-up builds it (see validate) — on the objects of a snapshot (kubectl berth snapshot), with\n" +
			"no cluster: bindings go to an in-memory API, nothing is written anywhere but the output (extenders are\n" +
			"called only with --call-extenders, their bind never). The plugins read the snapshot's time as their clock.\n" +
			"Claims that wait for their first consumer are provisioned on the node chosen, DRA claims made from their\n" +
			"templates, as the cluster's controllers would; pods being deleted are left out (--keep-terminating);\n" +
			"pods of schedulers with no profile stay where they are, counted in the summary.\n\n" +
			"--mode pending places the snapshot's pending pods of the configuration's profiles; --mode replace unbinds\n" +
			"every such pod and places them all again, one at a time, DaemonSets' pods first, then by priority, then in\n" +
			"creation order (what the cluster would look like under this configuration); --mode drain --nodes A,B\n" +
			"drains those nodes as kubectl drain does (cordoned, their pods evicted but DaemonSets' and mirror pods)\n" +
			"and places the evicted pods again, one at a time by priority, then in creation order, as their\n" +
			"controllers' replacements would be, with a warning wherever a real drain\n" +
			"would differ. With two configurations both run on the same snapshot and the pods whose\n" +
			"outcome differs are listed: moved to another node (with the plugins that scored the new node higher, or\n" +
			"the filter that rejected the old one), newly pending, newly placed, newly preempted; a pod on another node\n" +
			"that scored as high as its first one is a tie, not a move. The summary adds per-node requests, ElasticQuota\n" +
			"borrowing, PodGroups that no longer fit, and what keeps pods pending.\n\n" +
			"What differs by construction from the live scheduler: time (backoffs, Coscheduling's timeouts: the\n" +
			"simulation ends when the scheduler has nothing left to try, without waiting for the queue's periodic\n" +
			"flush), LoadAware's usage (as sampled in the snapshot, not as pods placed since add to it), and the order\n" +
			"in which pods pending together reach the queue, and which of equally scored nodes the scheduler picks\n" +
			"(the order its filter workers finish in: -o json lists each pod's ties).\n\n" +
			"Exit codes: 1 bad input (an incomplete snapshot without --allow-partial-snapshot included), 3 a failed\n" +
			"--fail-on gate (a config with no profile for any pod of the snapshot fails it), 4 the simulation could not\n" +
			"finish (--timeout passed: the report shows what was placed by then; or an internal failure).",
		Example: "  kubectl berth snapshot cluster.json.gz\n" +
			"  kubectl berth simulate --snapshot cluster.json.gz --config current.yaml --config proposed.yaml\n" +
			"  kubectl berth simulate --snapshot cluster.json.gz --config proposed.yaml --mode replace -o json --fail-on pending\n" +
			"  kubectl berth simulate --snapshot cluster.json.gz --config current.yaml --mode drain --nodes node-7,node-8 --fail-on pending",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case snapPath == "":
				return errors.New("--snapshot: give the file kubectl berth snapshot wrote")
			case len(configs) == 0 || len(configs) > 2:
				return errors.New("--config: give one configuration, or two to compare")
			case failOn != "" && failOn != "newly-pending" && failOn != "pending":
				return fmt.Errorf("--fail-on %q: newly-pending or pending", failOn)
			case failOn == "newly-pending" && len(configs) != 2:
				return errors.New("--fail-on newly-pending compares two configurations: give --config twice")
			case timeout <= 0:
				return fmt.Errorf("--timeout %s: give a positive duration", timeout)
			}
			deadline := time.Now().Add(timeout)
			var printer printers.ResourcePrinter
			if !pf.table() {
				p, err := pf.printer()
				if err != nil {
					return err
				}
				printer = p
			}
			if !verbose {
				quietKlog()
			}
			if err := offline.SetFeatureGates(featureGates); err != nil {
				return fmt.Errorf("--feature-gates: %w", err)
			}
			f, err := os.Open(snapPath)
			if err != nil {
				return err
			}
			snap, err := snapshot.Open(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", snapPath, err)
			}
			cfgs := make([]*config.KubeSchedulerConfiguration, len(configs))
			for i, path := range configs {
				if cfgs[i], err = offline.LoadConfig(klog.Background(), path); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			plan := offline.Plan{Mode: offline.Mode(mode), Drain: drain, KeepTerminating: keepTerminating, CallExtenders: callExtenders, RemoveNodes: removeNodes}
			for _, a := range addNodes {
				c, err := offline.ParseNodeCopies(a)
				if err != nil {
					return fmt.Errorf("--add-nodes %w", err)
				}
				plan.AddNodes = append(plan.AddNodes, c)
			}
			if err := plan.Check(snap); err != nil {
				return err
			}
			r := &simulateReport{Snapshot: snapPath, Mode: plan.Mode, Drained: drain, RemovedNodes: removeNodes, Configs: configs}
			if w := versionSkew(snap); w != "" {
				r.Warnings = append(r.Warnings, w)
			}
			if inc := snap.Incomplete(); len(inc) > 0 && !allowPartial {
				parts := make([]string, len(inc))
				for i, o := range inc {
					parts[i] = o.Resource + ": " + o.Reason
				}
				return fmt.Errorf("%s is incomplete (%s): simulated without them, the cluster would not be the one snapshotted; take the snapshot with credentials that can read them (manifests/snapshot-reader.yaml) or pass --allow-partial-snapshot", snapPath, strings.Join(parts, "; "))
			}
			for _, o := range snap.Omitted {
				r.Warnings = append(r.Warnings, fmt.Sprintf("the snapshot has no %s (%s)", o.Resource, o.Reason))
			}
			var sims []*offline.Simulation
			for i, cfg := range cfgs {
				// One deadline for the whole run.
				plan.Timeout = max(time.Until(deadline), time.Nanosecond)
				plan.Progress = newProgressLine(streams.ErrOut, configs[i])
				sim, err := offline.Simulate(cmd.Context(), cfg, snap, plan)
				plan.Progress(offline.Progress{Placed: -1})
				switch {
				case errors.Is(err, offline.ErrConfig):
					return fmt.Errorf("%s: %w", configs[i], err)
				case err != nil:
					return exitCode{4, fmt.Errorf("%s: the simulation failed: %w", configs[i], err)}
				}
				sims = append(sims, sim)
				if sim.TimedOut && i < len(cfgs)-1 {
					// Nothing to compare with: the next config would
					// start past the deadline.
					r.Warnings = append(r.Warnings, fmt.Sprintf("%s not simulated: --timeout %s passed during %s's run", strings.Join(configs[i+1:], ", "), timeout, configs[i]))
					r.Configs = configs[:i+1]
					break
				}
				// The next config's run says how the node this one chose
				// fared there: a tie, outscored (by which plugins), rejected.
				plan.Compare = map[string]string{}
				for _, o := range sim.Outcomes {
					if o.Node != "" {
						plan.Compare[o.Namespace+"/"+o.Name] = o.Node
					}
				}
			}
			r.fill(sims)
			// Warnings on standard error, whatever the output.
			for _, w := range r.Warnings {
				fmt.Fprintf(streams.ErrOut, "warning: %s\n", w)
			}
			for _, u := range r.Unmodelled {
				fmt.Fprintf(streams.ErrOut, "warning: not modelled: %s\n", u)
			}
			if printer != nil {
				obj, err := r.object()
				if err != nil {
					return err
				}
				if err := printer.PrintObj(obj, streams.Out); err != nil {
					return err
				}
			} else if err := r.printTable(streams.Out); err != nil {
				return err
			}
			last := len(sims) - 1
			if r.TimedOut {
				return exitCode{4, fmt.Errorf("--timeout %s passed before the scheduler was done: the report shows what it had placed by then", timeout)}
			}
			// A gate that checks nothing fails: a config with no profile
			// for any pod of a snapshot that has pods.
			for i, sim := range sims {
				if failOn != "" && sim.Ours == 0 && len(sim.OtherSchedulers) > 0 {
					return exitCode{3, fmt.Errorf("--fail-on %s: %s has no profile for any pod of the snapshot (its pods name %s)", failOn, configs[i], schedulerCounts(sim.OtherSchedulers))}
				}
			}
			switch {
			case failOn == "newly-pending" && r.Totals.NewlyPending+r.Totals.NewlyPreempted > 0:
				return exitCode{3, fmt.Errorf("--fail-on newly-pending: %d pods placed under %s are pending or preempted under %s", r.Totals.NewlyPending+r.Totals.NewlyPreempted, configs[0], configs[last])}
			case failOn == "pending" && r.Totals.Pending[last]+r.Totals.NoProfile[last] > 0:
				return exitCode{3, fmt.Errorf("--fail-on pending: %d pods stay pending under %s", r.Totals.Pending[last]+r.Totals.NoProfile[last], configs[last])}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&snapPath, "snapshot", "", "the snapshot file (kubectl berth snapshot)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a KubeSchedulerConfiguration; give it twice to compare the current with a proposed one")
	cmd.Flags().StringVar(&mode, "mode", string(offline.ModePending), "pending: place the pending pods; replace: place every pod again (DaemonSets' first, then by priority, then by age); drain: cordon --nodes and place their evicted pods again")
	cmd.Flags().StringSliceVar(&drain, "nodes", nil, "the nodes --mode drain drains (comma-separated, or the flag repeated)")
	pf.addFlags(cmd)
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit 3 when newly-pending (pods placed under the first config pending under the second) or pending (any pod pending under the last config)")
	cmd.Flags().StringVar(&featureGates, "feature-gates", "", "the scheduler's --feature-gates (A=true,B=false)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print the scheduler's own logs")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "end the run after this long (both configs together) and report what was placed by then, with exit code 4")
	cmd.Flags().BoolVar(&keepTerminating, "keep-terminating", false, "keep pods being deleted where they are, holding their room (by default they are left out: they leave within their grace period)")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial-snapshot", false, "simulate a snapshot that could not read some resources (forbidden, or discovery failed) instead of refusing it")
	cmd.Flags().StringArrayVar(&addNodes, "add-nodes", nil, "add copies of a snapshot node, in any mode: TEMPLATE=N[:KEY=VALUE,...] (N copies named TEMPLATE-sim-1..., with its shape and DaemonSet pods, these labels set); repeatable")
	cmd.Flags().StringSliceVar(&removeNodes, "remove-nodes", nil, "remove snapshot nodes, in any mode: their pods are placed again as their controllers' replacements would be (DaemonSets' and mirror pods go with them)")
	cmd.Flags().BoolVar(&callExtenders, "call-extenders", false, "run a configuration with extenders, calling their filter, prioritize and preempt verbs for real (never their bind); refused without it")
	_ = cmd.MarkFlagRequired("snapshot")
	return cmd
}

// schedulerCounts lists pods by schedulerName: "default-scheduler (40),
// volcano (2)".
func schedulerCounts(m map[string]int) string {
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d)", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// newProgressLine returns a progress callback that, on a terminal and once
// a run has taken 3 s, keeps one line on w up to date: pods placed of the
// total and the rate. Progress{Placed: -1} ends the line.
func newProgressLine(w io.Writer, config string) func(offline.Progress) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(offline.Progress) {}
	}
	start, shown := time.Now(), false
	var mu sync.Mutex
	return func(p offline.Progress) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Placed < 0:
			if shown {
				fmt.Fprintln(w)
			}
		case time.Since(start) >= 3*time.Second:
			rate := float64(p.Placed) / time.Since(start).Seconds()
			fmt.Fprintf(w, "\r%s: %d of %d pods placed (%.0f/s) ", config, p.Placed, p.Total, rate)
			shown = true
		}
	}
}

// object is r as an object kubectl's printers print: apiVersion, kind and
// metadata.name ("simulation") before the report's own fields.
func (r *simulateReport) object() (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	content := map[string]any{}
	if err := json.Unmarshal(raw, &content); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(simulateAPIVersion)
	u.SetKind(simulateKind)
	u.SetName("simulation")
	return u, nil
}

// versionSkew warns when the snapshot's cluster is of another minor than
// the Kubernetes this plugin's scheduler is built on.
func versionSkew(snap *snapshot.File) string {
	if snap.Server == nil {
		return ""
	}
	ours := buildKubernetesMinor()
	theirs := snap.Server.Major + "." + strings.TrimSuffix(snap.Server.Minor, "+")
	if ours != "" && theirs != "." && theirs != ours {
		return fmt.Sprintf("the snapshot is of a Kubernetes %s cluster; this simulator is the %s scheduler: objects and defaults of %s that %s does not know are not modelled", snap.Server.GitVersion, ours, theirs, ours)
	}
	return ""
}

// buildKubernetesMinor is the Kubernetes minor this binary is built on
// ("1.37"), from the Makefile's ldflags; "" without them.
func buildKubernetesMinor() string {
	v := version.Get()
	if v.Major == "" || v.Minor == "" {
		return ""
	}
	return v.Major + "." + strings.TrimSuffix(v.Minor, "+")
}

// rowFor returns the row of rows keyed key, appending mk() first when there
// is none (index maps keys to positions in rows).
func rowFor[T any](rows *[]T, index map[string]int, key string, mk func() T) *T {
	j, ok := index[key]
	if !ok {
		j = len(*rows)
		index[key] = j
		*rows = append(*rows, mk())
	}
	return &(*rows)[j]
}

// fill compares the simulations pod by pod.
func (r *simulateReport) fill(sims []*offline.Simulation) {
	index := map[string]int{}
	r.Totals.Placed = make([]int, len(sims))
	r.Totals.Pending = make([]int, len(sims))
	r.Totals.NoProfile = make([]int, len(sims))
	for i, sim := range sims {
		r.AddedNodes = appendNew(r.AddedNodes, sim.AddedNodes...)
		r.TimedOut = r.TimedOut || sim.TimedOut
		r.Totals.OtherSchedulers = append(r.Totals.OtherSchedulers, sim.OtherSchedulers)
		r.Unmodelled = appendNew(r.Unmodelled, sim.Unmodelled...)
		for _, w := range sim.Warnings {
			if len(sims) > 1 {
				w = r.Configs[i] + ": " + w // a warning may hold for one config only
			}
			r.Warnings = appendNew(r.Warnings, w)
		}
		for _, o := range sim.Outcomes {
			p := rowFor(&r.Pods, index, o.Namespace+"/"+o.Name, func() simulatedPod {
				// A config whose run has no outcome for the pod has no
				// profile for it.
				outcomes := make([]simulatedOutcome, len(sims))
				for k := range outcomes {
					outcomes[k].NotSimulated = true
				}
				return simulatedPod{Namespace: o.Namespace, Name: o.Name, SchedulerName: o.SchedulerName, Outcomes: outcomes}
			})
			p.Outcomes[i] = simulatedOutcome{Node: o.Node, Reason: o.Reason, Preempted: o.Preempted,
				Score: o.Score, Ties: o.Ties, TiedWith: o.TiedWith, Compared: o.Other, Rejections: o.Rejections}
			switch {
			case o.Node != "":
				r.Totals.Placed[i]++
			case !o.Preempted:
				r.Totals.Pending[i]++
			}
		}
	}
	r.Totals.Pods = len(r.Pods)
	// A config's run without an outcome for a pod another run has: the
	// config has no profile for it (nothing would place it), or the pod
	// was bound and this run left it where it was (the other preempted
	// it).
	for i := range r.Pods {
		p := &r.Pods[i]
		for k := range p.Outcomes {
			o := &p.Outcomes[k]
			switch {
			case !o.NotSimulated:
			case slices.Contains(sims[k].Profiles, p.SchedulerName):
				o.NotSimulated, o.Untouched = false, true
				r.Totals.Placed[k]++
			default:
				r.Totals.NoProfile[k]++
			}
		}
	}
	r.fillTotals(sims)
	if len(sims) < 2 {
		return
	}
	for i := range r.Pods {
		p := &r.Pods[i]
		a, b := p.Outcomes[0], p.Outcomes[len(sims)-1]
		placedFirst := a.Node != "" || a.Untouched
		switch {
		case placedFirst && b.NotSimulated:
			p.Change, p.Why = "newly-pending", fmt.Sprintf("%s has no profile %q: no scheduler would place it", r.Configs[len(sims)-1], p.SchedulerName)
			r.Totals.NewlyPending++
		case a.NotSimulated || b.NotSimulated || a.Untouched && b.Untouched:
		case placedFirst && b.Preempted:
			p.Change = "newly-preempted"
			r.Totals.NewlyPreempted++
		case a.Node != "" && b.Node == "":
			p.Change, p.Why = "newly-pending", compared(b)
			r.Totals.NewlyPending++
		case a.Node == "" && b.Node != "":
			p.Change = "newly-placed"
			r.Totals.NewlyPlaced++
		case a.Node != b.Node && tied(a, b):
			p.Change = "tie"
			switch {
			case b.Compared.Tied(b.Score):
				p.Why = fmt.Sprintf("%s and %s scored the same (%d)", b.Node, a.Node, b.Score.Total)
			default:
				p.Why = fmt.Sprintf("%s and %s scored the same under %s (%d); %s did not score %s", a.Node, b.Node, r.Configs[0], a.Score.Total, r.Configs[len(sims)-1], a.Node)
			}
			r.Totals.Ties++
		case a.Node != b.Node:
			p.Change, p.Why = "moved", compared(b)
			r.Totals.Moved++
		}
	}
}

// tied says whether a pod the first config put on a.Node and the last on
// b.Node could have landed on either under one config: the last config's
// verdict on a.Node when it has one (it scored as high, or it did not: a
// move), else the first config's ties.
func tied(a, b simulatedOutcome) bool {
	if v := b.Compared; v != nil && (v.Score != nil || v.Rejected != "") {
		return v.Tied(b.Score)
	}
	return slices.Contains(a.TiedWith, b.Node)
}

// compared says why the last config did not put the pod where the first
// did: that node's filter status, or how it scored against the chosen one.
func compared(o simulatedOutcome) string {
	v := o.Compared
	switch {
	case v == nil:
		return o.Reason
	case v.Rejected != "":
		return fmt.Sprintf("%s rejected: %s", v.Node, v.Rejected)
	case v.Score != nil && o.Score != nil:
		return fmt.Sprintf("%s scored %d, %s %d%s", o.Node, o.Score.Total, v.Node, v.Score.Total, scoreDelta(o.Score, v.Score))
	case o.Node == "":
		// Pending: the scheduler's own message says why (the node may have
		// passed the filters and then failed at Reserve or Permit).
		return o.Reason
	case v.NotEvaluated:
		return fmt.Sprintf("%s was not evaluated in the cycle that chose %s (the scheduler stops filtering after percentageOfNodesToScore feasible nodes, or took the pod's nominated node)", v.Node, o.Node)
	}
	return fmt.Sprintf("%s passed the filters but was not scored in the cycle that chose %s (the scheduler stops after percentageOfNodesToScore feasible nodes)", v.Node, o.Node)
}

// scoreDelta names the plugins that scored won above lost, largest
// difference first: " (CELPolicy +100, NodeResourcesFit -8)".
func scoreDelta(won, lost *offline.Score) string {
	type d struct {
		plugin string
		by     int64
	}
	var ds []d
	seen := map[string]bool{}
	for _, p := range won.Plugins {
		seen[p.Plugin] = true
		if x := p.Score - pluginScore(lost, p.Plugin); x != 0 {
			ds = append(ds, d{p.Plugin, x})
		}
	}
	for _, p := range lost.Plugins {
		if !seen[p.Plugin] && p.Score != 0 {
			ds = append(ds, d{p.Plugin, -p.Score})
		}
	}
	if len(ds) == 0 {
		return ""
	}
	sort.SliceStable(ds, func(i, j int) bool { return abs(ds[i].by) > abs(ds[j].by) })
	parts := make([]string, len(ds))
	for i, x := range ds {
		parts[i] = fmt.Sprintf("%s %+d", x.plugin, x.by)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func pluginScore(s *offline.Score, plugin string) int64 {
	for _, p := range s.Plugins {
		if p.Plugin == plugin {
			return p.Score
		}
	}
	return 0
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// fillTotals gathers the simulations' per-node, per-quota, per-gang and
// per-reason totals side by side.
func (r *simulateReport) fillTotals(sims []*offline.Simulation) {
	n := len(sims)
	nodes, quotas, gangs, reasons := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for i, sim := range sims {
		for _, u := range sim.Nodes {
			t := rowFor(&r.Totals.Nodes, nodes, u.Node, func() nodeTotal {
				return nodeTotal{Node: u.Node, CPU: make([]float64, n), Memory: make([]float64, n), Pods: make([]int, n)}
			})
			t.CPU[i], t.Memory[i], t.Pods[i] = percent(u.CPURequested, u.CPUAllocatable), percent(u.MemoryRequested, u.MemoryAllocatable), u.Pods
		}
		for _, q := range sim.Quotas {
			t := rowFor(&r.Totals.Quotas, quotas, q.Namespace+"/"+q.Name, func() quotaTotal {
				return quotaTotal{Namespace: q.Namespace, Name: q.Name, Used: make([]v1.ResourceList, n), Borrowed: make([]v1.ResourceList, n)}
			})
			t.Used[i], t.Borrowed[i] = q.Used, q.Borrowed
		}
		for _, g := range sim.Gangs {
			t := rowFor(&r.Totals.Gangs, gangs, g.Namespace+"/"+g.Name, func() gangTotal {
				return gangTotal{Namespace: g.Namespace, Name: g.Name, MinMember: g.MinMember, Bound: make([]int, n)}
			})
			t.Bound[i] = g.Bound
		}
		for _, o := range sim.Outcomes {
			for reason, nodeCount := range o.Rejections {
				t := rowFor(&r.Totals.PendingReasons, reasons, reason, func() reasonTotal {
					return reasonTotal{Reason: reason, Pods: make([]int, n), Nodes: make([]int, n)}
				})
				t.Pods[i]++
				t.Nodes[i] += nodeCount
			}
		}
	}
	sort.SliceStable(r.Totals.PendingReasons, func(i, j int) bool {
		a, b := r.Totals.PendingReasons[i], r.Totals.PendingReasons[j]
		return a.Pods[n-1] > b.Pods[n-1] || a.Pods[n-1] == b.Pods[n-1] && a.Reason < b.Reason
	})
	for _, g := range r.Totals.Gangs {
		if n > 1 && g.Bound[0] >= int(g.MinMember) && g.Bound[n-1] < int(g.MinMember) {
			r.Totals.GangsNoLongerFitting++
		}
	}
}

func percent(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return math.Round(1000*float64(part)/float64(whole)) / 10
}

func appendNew(to []string, items ...string) []string {
	for _, s := range items {
		found := false
		for _, t := range to {
			found = found || t == s
		}
		if !found {
			to = append(to, s)
		}
	}
	return to
}

// tableRows caps each section of the table (-o json has every row).
const tableRows = 10

// printTable prints a one-screen summary (counts, gangs, quotas, the nodes
// whose use changed most, what keeps pods pending), then one line per pod
// (with two configs, per pod whose outcome changed).
func (r *simulateReport) printTable(w io.Writer) error {
	if len(r.Drained) > 0 {
		fmt.Fprintf(w, "%d pods simulated (%s mode: %s cordoned, their pods evicted and placed again)\n", r.Totals.Pods, r.Mode, strings.Join(r.Drained, ", "))
	} else {
		fmt.Fprintf(w, "%d pods simulated (%s mode)\n", r.Totals.Pods, r.Mode)
	}
	if len(r.AddedNodes)+len(r.RemovedNodes) > 0 {
		fmt.Fprintf(w, "  nodes added: %s; removed: %s\n", listOrNone(r.AddedNodes), listOrNone(r.RemovedNodes))
	}
	for i, c := range r.Configs {
		noProfile := ""
		if n := r.Totals.NoProfile[i]; n > 0 {
			noProfile = fmt.Sprintf(", %d of no profile of it (nothing would place them)", n)
		}
		fmt.Fprintf(w, "  %s: %d placed, %d pending%s\n", c, r.Totals.Placed[i], r.Totals.Pending[i], noProfile)
	}
	for i, c := range r.Configs {
		if others := r.Totals.OtherSchedulers[i]; len(others) > 0 && (i == 0 || !maps.Equal(others, r.Totals.OtherSchedulers[0])) {
			n := 0
			for _, k := range others {
				n += k
			}
			fmt.Fprintf(w, "  left where they are, pending or bound: %d pods of schedulers %s has no profile for: %s\n", n, c, schedulerCounts(others))
		}
	}
	if r.TimedOut {
		fmt.Fprintln(w, "  stopped at --timeout: the pods not placed by then say so")
	}
	last := len(r.Configs) - 1
	if len(r.Configs) == 2 {
		fmt.Fprintf(w, "  changed: %d moved, %d newly pending, %d newly placed, %d newly preempted; %d ties (another node that scored as high: not a change)\n",
			r.Totals.Moved, r.Totals.NewlyPending, r.Totals.NewlyPlaced, r.Totals.NewlyPreempted, r.Totals.Ties)
	}
	r.printGangs(w)
	r.printQuotas(w)
	r.printNodes(w)
	if len(r.Totals.PendingReasons) > 0 {
		fmt.Fprintf(w, "  kept pending (pods, under %s):\n", strings.Join(r.Configs, " → "))
		for i, t := range r.Totals.PendingReasons {
			if i == tableRows {
				fmt.Fprintf(w, "    … %d more reasons (-o json)\n", len(r.Totals.PendingReasons)-i)
				break
			}
			fmt.Fprintf(w, "    %s: %s\n", joinInts(t.Pods), t.Reason)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	node := func(o simulatedOutcome) string {
		switch {
		case o.NotSimulated:
			return "<no profile>"
		case o.Untouched:
			return "<as before>"
		case o.Preempted:
			return "<preempted>"
		case o.Node == "":
			return "<pending>"
		}
		return o.Node
	}
	if len(r.Configs) == 1 {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tNODE\tTIES\tREASON")
		for _, p := range r.Pods {
			o := p.Outcomes[0]
			ties := ""
			if o.Ties > 0 {
				ties = fmt.Sprint(o.Ties)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, node(o), ties, o.Reason)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCHANGE\tCURRENT\tPROPOSED\tWHY")
	for _, p := range r.Pods {
		if p.Change == "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.Change, node(p.Outcomes[0]), node(p.Outcomes[last]), p.Why)
	}
	return tw.Flush()
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " → ")
}

// printGangs lists the gangs that no longer fit (two configs) or do not fit
// (one).
func (r *simulateReport) printGangs(w io.Writer) {
	last := len(r.Configs) - 1
	var lines []string
	for _, g := range r.Totals.Gangs {
		fitsFirst, fitsLast := g.Bound[0] >= int(g.MinMember), g.Bound[last] >= int(g.MinMember)
		if fitsLast || last > 0 && !fitsFirst {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s/%s (%s of %d bound)", g.Namespace, g.Name, joinInts(g.Bound), g.MinMember))
	}
	if len(lines) == 0 && len(r.Totals.Gangs) == 0 {
		return
	}
	what := "gangs not fitting"
	if last > 0 {
		what = "gangs no longer fitting"
	}
	fmt.Fprintf(w, "  %s: %d of %d%s\n", what, len(lines), len(r.Totals.Gangs), listed(lines))
}

// printQuotas prints each quota's borrowing (above its min), per config.
func (r *simulateReport) printQuotas(w io.Writer) {
	if len(r.Totals.Quotas) == 0 {
		return
	}
	fmt.Fprintf(w, "  quota borrowing (above min, under %s):\n", strings.Join(r.Configs, " → "))
	for i, q := range r.Totals.Quotas {
		if i == tableRows {
			fmt.Fprintf(w, "    … %d more quotas (-o json)\n", len(r.Totals.Quotas)-i)
			break
		}
		parts := make([]string, len(q.Borrowed))
		for j, b := range q.Borrowed {
			parts[j] = resourceList(b)
		}
		fmt.Fprintf(w, "    %s/%s: %s\n", q.Namespace, q.Name, strings.Join(parts, " → "))
	}
}

func resourceList(l v1.ResourceList) string {
	if len(l) == 0 {
		return "none"
	}
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := l[v1.ResourceName(n)]
		parts[i] = n + " " + q.String()
	}
	return strings.Join(parts, ", ")
}

// printNodes prints the nodes whose requested CPU or memory changed most
// between the configs (one config: the fullest).
func (r *simulateReport) printNodes(w io.Writer) {
	if len(r.Totals.Nodes) == 0 {
		return
	}
	last := len(r.Configs) - 1
	nodes := slices.Clone(r.Totals.Nodes)
	weight := func(t nodeTotal) float64 {
		if last == 0 {
			return max(t.CPU[0], t.Memory[0])
		}
		return max(math.Abs(t.CPU[last]-t.CPU[0]), math.Abs(t.Memory[last]-t.Memory[0]))
	}
	sort.SliceStable(nodes, func(i, j int) bool { return weight(nodes[i]) > weight(nodes[j]) })
	if last > 0 {
		changed := 0
		for _, t := range nodes {
			if weight(t) > 0 {
				changed++
			}
		}
		nodes = nodes[:changed]
		fmt.Fprintf(w, "  nodes whose requests changed: %d of %d\n", changed, len(r.Totals.Nodes))
	} else {
		fmt.Fprintf(w, "  fullest nodes (requests of allocatable):\n")
	}
	for i, t := range nodes {
		if i == tableRows {
			fmt.Fprintf(w, "    … %d more (-o json)\n", len(nodes)-i)
			break
		}
		fmt.Fprintf(w, "    %s: cpu %s%%, memory %s%%, pods %s\n", t.Node, joinFloats(t.CPU), joinFloats(t.Memory), joinInts(t.Pods))
	}
}

func joinFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strings.Join(parts, " → ")
}

// listed appends up to tableRows items: ": a, b, …".
func listed(items []string) string {
	if len(items) == 0 {
		return ""
	}
	more := ""
	if len(items) > tableRows {
		more = fmt.Sprintf(", … %d more (-o json)", len(items)-tableRows)
		items = items[:tableRows]
	}
	return ": " + strings.Join(items, ", ") + more
}
