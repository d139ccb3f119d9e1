package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/berth-scheduler/berth/internal/offline"
	"github.com/berth-scheduler/berth/pkg/registry"
)

func newValidateCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var verbose bool
	var featureGates string
	cmd := &cobra.Command{
		Use:   "validate CONFIG...",
		Short: "Check a KubeSchedulerConfiguration offline, as Berth's scheduler checks it at start-up",
		Long: "Checks each KubeSchedulerConfiguration file as Berth's scheduler does when it starts with --config:\n" +
			"strict decoding (a misspelt field is an error), upstream's validation, then every profile built with\n" +
			"upstream's scheduler.New and Berth's plugins (their args' validation, CEL rules compiled and their cost\n" +
			"checked, the checks across profiles such as one queue sort) — on in-memory clients, without a cluster.\n" +
			"An invalid file is reported with the message the scheduler would stop with, and the exit code is 1.\n\n" +
			"It uses the default feature gates unless --feature-gates names others, as the scheduler's flag does; the\n" +
			"kubeconfig file and serving flags, which describe the machine the scheduler runs on, are not checked.\n" +
			"When several plugins' args are wrong, the scheduler (and so validate) reports the first plugin it builds.\n\n" +
			"For a valid file it lists each profile's Berth plugins and what they need from the cluster that an\n" +
			"offline check cannot see (the CRDs, the metrics API).",
		Example: "  kubectl berth validate manifests/examples/all-plugins.yaml\n" +
			"  kubectl berth validate config/*.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !verbose {
				quietKlog()
			}
			if err := offline.SetFeatureGates(featureGates); err != nil {
				return fmt.Errorf("--feature-gates: %w", err)
			}
			var invalid []string
			for _, path := range args {
				if err := validateFile(cmd.Context(), streams.Out, path); err != nil {
					if len(args) == 1 {
						return fmt.Errorf("%s: %w", path, err)
					}
					fmt.Fprintf(streams.ErrOut, "error: %s: %v\n", path, err)
					invalid = append(invalid, path)
				}
			}
			if len(invalid) > 0 {
				return fmt.Errorf("%d of %d configurations are invalid: %s", len(invalid), len(args), strings.Join(invalid, ", "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&verbose, "verbose", false, "print the scheduler's own logs while it builds the profiles")
	cmd.Flags().StringVar(&featureGates, "feature-gates", "", "the scheduler's --feature-gates (A=true,B=false): gates decide default plugins and validation")
	return cmd
}

// validateFile builds path's scheduler offline and prints what it runs.
func validateFile(ctx context.Context, out io.Writer, path string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the plugins' informers and goroutines
	logger := klog.FromContext(ctx)
	cfg, err := offline.LoadConfig(logger, path)
	if err != nil {
		return err
	}
	sched, err := offline.Build(ctx, cfg, offline.NewClients())
	if err != nil {
		return err
	}
	berth := registry.Plugins()
	fmt.Fprintf(out, "%s: valid\n", path)
	for _, p := range sched.Profiles {
		var names []string
		for _, n := range p.Plugins {
			if _, ok := berth[n]; ok {
				names = append(names, n)
			}
		}
		list := "none"
		if len(names) > 0 {
			list = strings.Join(names, ", ")
		}
		fmt.Fprintf(out, "  profile %s: Berth plugins: %s\n", p.SchedulerName, list)
	}
	for _, r := range offline.Requirements(cfg, sched.Profiles) {
		fmt.Fprintf(out, "  needs, for %s (%s): %s; %s\n", r.Plugin, strings.Join(r.Profiles, ", "), r.What, r.Hint)
	}
	return nil
}

// quietKlog keeps the scheduler's start-up logs (informers, plugins) out of
// the command's output: its result is what it prints, and the errors.
func quietKlog() {
	klog.SetLogger(logr.Discard())
}
