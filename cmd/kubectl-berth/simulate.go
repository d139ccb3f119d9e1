package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/berth-scheduler/berth/internal/offline"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

// simulateReport is what -o json prints.
type simulateReport struct {
	Snapshot   string         `json:"snapshot"`
	Mode       offline.Mode   `json:"mode"`
	Drained    []string       `json:"drained,omitempty"`
	Configs    []string       `json:"configs"`
	Totals     simulateTotals `json:"totals"`
	Pods       []simulatedPod `json:"pods"`
	Unmodelled []string       `json:"unmodelled,omitempty"`
	Warnings   []string       `json:"warnings,omitempty"`
}

type simulateTotals struct {
	Pods           int   `json:"pods"`
	Placed         []int `json:"placed"`
	Pending        []int `json:"pending"`
	Moved          int   `json:"moved"`
	NewlyPending   int   `json:"newlyPending"`
	NewlyPlaced    int   `json:"newlyPlaced"`
	NewlyPreempted int   `json:"newlyPreempted"`
}

type simulatedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Outcomes are one per config, in the order given.
	Outcomes []simulatedOutcome `json:"outcomes"`
	// Change compares the last config's outcome with the first's: "",
	// "moved", "newly-pending", "newly-placed", "newly-preempted" (empty
	// when a config has no profile for the pod).
	Change string `json:"change,omitempty"`
}

type simulatedOutcome struct {
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Preempted: the simulated scheduler deleted it (a preemption victim).
	Preempted bool `json:"preempted,omitempty"`
	// NotSimulated: the config has no profile for the pod's schedulerName.
	NotSimulated bool `json:"notSimulated,omitempty"`
}

func newSimulateCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var snapPath, output, failOn, featureGates string
	var configs, drain []string
	var mode string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "simulate --snapshot FILE --config CURRENT.yaml [--config PROPOSED.yaml] [--mode pending|replace|drain --nodes NODE,...]",
		Short: "Replay a snapshot through Berth's scheduler under a configuration (or two, and see what differs), offline",
		Long: "Runs Berth's scheduler — upstream's framework and Berth's plugins, built from the configuration as the\n" +
			"scheduler's start-up builds it (see validate) — on the objects of a snapshot (kubectl berth snapshot), with\n" +
			"no cluster: bindings go to an in-memory API, nothing is written anywhere but the output.\n\n" +
			"--mode pending places the snapshot's pending pods of the configuration's profiles; --mode replace unbinds\n" +
			"every such pod and places them all again, one at a time in creation order (what the cluster would look\n" +
			"like under this configuration); --mode drain --nodes A,B drains those nodes as kubectl drain does\n" +
			"(cordoned, their pods evicted but DaemonSets' and mirror pods) and places the evicted pods again, one at a\n" +
			"time in creation order, as their controllers' replacements would be, with a warning wherever a real drain\n" +
			"would differ. With two configurations both run on the same snapshot and the pods whose\n" +
			"outcome differs are listed: moved to another node, newly pending, newly placed.\n\n" +
			"What differs by construction from the live scheduler: time (backoffs, Coscheduling's timeouts: the\n" +
			"simulation ends when the scheduler has nothing left to try, without waiting for the queue's periodic\n" +
			"flush), LoadAware's usage (as sampled in the snapshot, not as pods placed since add to it), and the order\n" +
			"in which pods pending together reach the queue. Equal scores between nodes are not told apart from a\n" +
			"change yet: a pod that moved between two equally good nodes is reported as moved.",
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
			case output != "table" && output != "json":
				return fmt.Errorf("-o %q: table or json", output)
			case failOn != "" && failOn != "newly-pending" && failOn != "pending":
				return fmt.Errorf("--fail-on %q: newly-pending or pending", failOn)
			case failOn == "newly-pending" && len(configs) != 2:
				return errors.New("--fail-on newly-pending compares two configurations: give --config twice")
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
			plan := offline.Plan{Mode: offline.Mode(mode), Drain: drain}
			if err := plan.Check(snap); err != nil {
				return fmt.Errorf("--mode %s --nodes %s: %w", mode, strings.Join(drain, ","), err)
			}
			r := &simulateReport{Snapshot: snapPath, Mode: plan.Mode, Drained: drain, Configs: configs}
			if w := versionSkew(snap); w != "" {
				r.Warnings = append(r.Warnings, w)
			}
			for _, o := range snap.Omitted {
				r.Warnings = append(r.Warnings, fmt.Sprintf("the snapshot has no %s (%s)", o.Resource, o.Reason))
			}
			var sims []*offline.Simulation
			for i, cfg := range cfgs {
				sim, err := offline.Simulate(cmd.Context(), cfg, snap, plan)
				if err != nil {
					return fmt.Errorf("%s: %w", configs[i], err)
				}
				sims = append(sims, sim)
			}
			r.fill(sims)
			if output == "json" {
				enc := json.NewEncoder(streams.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else if err := r.printTable(streams.Out); err != nil {
				return err
			}
			last := len(sims) - 1
			switch {
			case failOn == "newly-pending" && r.Totals.NewlyPending+r.Totals.NewlyPreempted > 0:
				return exitCode{3, fmt.Errorf("--fail-on newly-pending: %d pods placed under %s are pending or preempted under %s", r.Totals.NewlyPending+r.Totals.NewlyPreempted, configs[0], configs[last])}
			case failOn == "pending" && r.Totals.Pending[last] > 0:
				return exitCode{3, fmt.Errorf("--fail-on pending: %d pods stay pending under %s", r.Totals.Pending[last], configs[last])}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&snapPath, "snapshot", "", "the snapshot file (kubectl berth snapshot)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a KubeSchedulerConfiguration; give it twice to compare the current with a proposed one")
	cmd.Flags().StringVar(&mode, "mode", string(offline.ModePending), "pending: place the pending pods; replace: place every pod again, in creation order; drain: cordon --nodes and place their evicted pods again")
	cmd.Flags().StringSliceVar(&drain, "nodes", nil, "the nodes --mode drain drains (comma-separated, or the flag repeated)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit 3 when newly-pending (pods placed under the first config pending under the second) or pending (any pod pending under the last config)")
	cmd.Flags().StringVar(&featureGates, "feature-gates", "", "the scheduler's --feature-gates (A=true,B=false)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print the scheduler's own logs")
	return cmd
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

// fill compares the simulations pod by pod.
func (r *simulateReport) fill(sims []*offline.Simulation) {
	type key struct{ ns, name string }
	index := map[key]int{}
	r.Totals.Placed = make([]int, len(sims))
	r.Totals.Pending = make([]int, len(sims))
	for i, sim := range sims {
		r.Unmodelled = appendNew(r.Unmodelled, sim.Unmodelled...)
		for _, w := range sim.Warnings {
			if len(sims) > 1 {
				w = r.Configs[i] + ": " + w // a warning may hold for one config only
			}
			r.Warnings = appendNew(r.Warnings, w)
		}
		for _, o := range sim.Outcomes {
			k := key{o.Namespace, o.Name}
			j, ok := index[k]
			if !ok {
				j = len(r.Pods)
				index[k] = j
				r.Pods = append(r.Pods, simulatedPod{Namespace: o.Namespace, Name: o.Name, Outcomes: make([]simulatedOutcome, len(sims))})
			}
			r.Pods[j].Outcomes[i] = simulatedOutcome{Node: o.Node, Reason: o.Reason, Preempted: o.Preempted}
			switch {
			case o.Node != "":
				r.Totals.Placed[i]++
			case !o.Preempted:
				r.Totals.Pending[i]++
			}
		}
	}
	// A pod missing from a run had no profile in that config.
	for _, p := range r.Pods {
		for i := range p.Outcomes {
			if !seenIn(sims[i], p.Namespace, p.Name) {
				p.Outcomes[i].NotSimulated = true
			}
		}
	}
	r.Totals.Pods = len(r.Pods)
	if len(sims) < 2 {
		return
	}
	for i := range r.Pods {
		a, b := r.Pods[i].Outcomes[0], r.Pods[i].Outcomes[len(sims)-1]
		switch {
		case a.NotSimulated || b.NotSimulated:
		case a.Node != "" && b.Preempted:
			r.Pods[i].Change = "newly-preempted"
			r.Totals.NewlyPreempted++
		case a.Node != "" && b.Node == "":
			r.Pods[i].Change = "newly-pending"
			r.Totals.NewlyPending++
		case a.Node == "" && b.Node != "":
			r.Pods[i].Change = "newly-placed"
			r.Totals.NewlyPlaced++
		case a.Node != b.Node:
			r.Pods[i].Change = "moved"
			r.Totals.Moved++
		}
	}
}

// seenIn says whether sim has an outcome for the pod.
func seenIn(sim *offline.Simulation, ns, name string) bool {
	for _, o := range sim.Outcomes {
		if o.Namespace == ns && o.Name == name {
			return true
		}
	}
	return false
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

// printTable prints a summary, then one line per pod (with two configs,
// per pod whose outcome changed).
func (r *simulateReport) printTable(w io.Writer) error {
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	for _, u := range r.Unmodelled {
		fmt.Fprintf(w, "not modelled: %s\n", u)
	}
	if len(r.Drained) > 0 {
		fmt.Fprintf(w, "%d pods simulated (%s mode: %s cordoned, their pods evicted and placed again)\n", r.Totals.Pods, r.Mode, strings.Join(r.Drained, ", "))
	} else {
		fmt.Fprintf(w, "%d pods simulated (%s mode)\n", r.Totals.Pods, r.Mode)
	}
	for i, c := range r.Configs {
		fmt.Fprintf(w, "  %s: %d placed, %d pending\n", c, r.Totals.Placed[i], r.Totals.Pending[i])
	}
	if len(r.Configs) == 2 {
		fmt.Fprintf(w, "  changed: %d moved, %d newly pending, %d newly placed, %d newly preempted\n", r.Totals.Moved, r.Totals.NewlyPending, r.Totals.NewlyPlaced, r.Totals.NewlyPreempted)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	node := func(o simulatedOutcome) string {
		switch {
		case o.NotSimulated:
			return "<no profile>"
		case o.Preempted:
			return "<preempted>"
		case o.Node == "":
			return "<pending>"
		}
		return o.Node
	}
	if len(r.Configs) == 1 {
		fmt.Fprintln(tw, "NAMESPACE\tPOD\tNODE\tREASON")
		for _, p := range r.Pods {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Namespace, p.Name, node(p.Outcomes[0]), p.Outcomes[0].Reason)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCHANGE\tCURRENT\tPROPOSED\tREASON")
	for _, p := range r.Pods {
		if p.Change == "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.Change, node(p.Outcomes[0]), node(p.Outcomes[1]), p.Outcomes[1].Reason)
	}
	return tw.Flush()
}
