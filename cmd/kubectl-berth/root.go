package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/version"

	"github.com/berth-scheduler/berth/internal/buildinfo"
)

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-berth",
		Short: "Berth's kubectl plugin",
		Long: "Berth's kubectl plugin: why Berth placed a pod where it did, or why it fits nowhere (explain);\n" +
			"what the scheduler reads from a cluster, in one file (snapshot); where pods would land under a\n" +
			"configuration, or two compared, offline (simulate); and whether Berth's scheduler would start\n" +
			"with a configuration (validate).\n\n" +
			"Shell completion, pod names included: kubectl (1.26 and later) completes `kubectl berth` through an\n" +
			"executable named kubectl_complete-berth on the PATH, which should run `kubectl-berth __complete \"$@\"`\n" +
			"(see docs/kubectl-berth.md); `kubectl-berth completion bash|zsh|fish|powershell` prints a script for\n" +
			"kubectl-berth run on its own.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs the plugin as `kubectl berth`: usage and help say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl berth"},
	}
	// kubectl's kubeconfig flags only where there is a cluster to reach:
	// simulate and validate work offline.
	explain, snapshot := newExplainCommand(flags, streams), newSnapshotCommand(flags, streams)
	for _, cmd := range []*cobra.Command{explain, snapshot} {
		flags.AddFlags(cmd.Flags())
		registerGlobalFlagCompletions(cmd, flags)
	}
	root.AddCommand(explain, snapshot, newSimulateCommand(streams), newValidateCommand(streams), newVersionCommand(streams))
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	return root
}

// registerGlobalFlagCompletions completes the kubeconfig flags' values as
// kubectl does: namespaces from the cluster, contexts, clusters and users
// from the kubeconfig. Not kubectl's own helpers (k8s.io/kubectl's
// util/completion): they run `kubectl get` and link its printers, describers
// and scheme, which made kubectl-berth 63 MB instead of 34.
func registerGlobalFlagCompletions(cmd *cobra.Command, flags *genericclioptions.ConfigFlags) {
	fromConfig := func(names func(*api.Config) []string) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cfg, err := flags.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return withPrefix(names(&cfg), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	for flag, fn := range map[string]cobra.CompletionFunc{
		"namespace": namesFromCluster(flags, func(ctx context.Context, c kubernetes.Interface, _ string) (runtime.Object, error) {
			return c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		}),
		"context": fromConfig(func(c *api.Config) []string { return slices.Collect(maps.Keys(c.Contexts)) }),
		"cluster": fromConfig(func(c *api.Config) []string { return slices.Collect(maps.Keys(c.Clusters)) }),
		"user":    fromConfig(func(c *api.Config) []string { return slices.Collect(maps.Keys(c.AuthInfos)) }),
	} {
		if err := cmd.RegisterFlagCompletionFunc(flag, fn); err != nil {
			panic(err) // a flag AddFlags did not add: a programming error
		}
	}
}

// namesFromCluster completes with the names of the objects list returns
// from the cluster (in the namespace of the command line's kubeconfig
// flags); nothing when the cluster cannot be asked, as kubectl's completion
// does.
func namesFromCluster(flags *genericclioptions.ConfigFlags, list func(context.Context, kubernetes.Interface, string) (runtime.Object, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		l, err := list(ctx, c, ns)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if err := meta.EachListItem(l, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				names = append(names, m.GetName())
			}
			return err
		}); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// withPrefix returns the names that start with prefix, sorted.
func withPrefix(names []string, prefix string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's Berth version and the Kubernetes release it is built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(streams.Out, "kubectl-berth %s (Kubernetes %s)\n", buildinfo.Version(), version.Get().GitVersion)
			return err
		},
	}
}
