package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/version"

	"github.com/berth-scheduler/berth/internal/buildinfo"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-berth",
		Short:         "Berth's kubectl plugin",
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs the plugin as `kubectl berth`: usage and help say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl berth"},
	}
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newExplainCommand(flags, streams), newVersionCommand(streams))
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	return root
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

func newExplainCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	output := "table"
	cmd := &cobra.Command{
		Use:   "explain POD",
		Short: "Why a pod landed on its node, or why it fits nowhere, per plugin",
		Long: "Prints the explanation Berth's Explain plugin wrote on the pod (annotation " + explain.AnnotationResult + "):\n" +
			"for a placed pod the best-scored nodes with every plugin's weighted score, for a pending one the plugins\n" +
			"that rejected nodes and the nodes nearest to fitting. A pod asks with the annotation " + explain.AnnotationRequest + `: "true".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf(`--output must be "table" or "json", not %q`, output)
			}
			ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return err
			}
			cfg, err := flags.ToRESTConfig()
			if err != nil {
				return err
			}
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			pod, err := c.CoreV1().Pods(ns).Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			raw, ok := pod.Annotations[explain.AnnotationResult]
			if !ok {
				howToAsk(streams.ErrOut, ns, pod.Name, pod.Spec.NodeName, pod.Annotations[explain.AnnotationRequest] == "true")
				return errors.New("no explanation")
			}
			if output == "json" {
				var out bytes.Buffer
				if err := json.Indent(&out, []byte(raw), "", "  "); err != nil {
					return fmt.Errorf("reading %s: %w", explain.AnnotationResult, err)
				}
				_, err := fmt.Fprintln(streams.Out, out.String())
				return err
			}
			r := &explain.Result{}
			if err := json.Unmarshal([]byte(raw), r); err != nil {
				return fmt.Errorf("reading %s: %w", explain.AnnotationResult, err)
			}
			return printTable(streams.Out, ns+"/"+pod.Name, r)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", output, "output format: table or json")
	return cmd
}

// howToAsk says why there is no explanation and how to get one.
func howToAsk(w io.Writer, ns, name, node string, asked bool) {
	switch {
	case asked:
		fmt.Fprintf(w, "pod %s/%s asks for an explanation but has none yet: is its profile's Explain plugin enabled (see manifests/examples/explain.yaml), and has the scheduler tried the pod since it asked?\n", ns, name)
	case node != "":
		fmt.Fprintf(w, "pod %s/%s was placed on %s without asking for an explanation; a placement is explained when it is made:\n"+
			"create the pod (or its template) with the annotation %s: \"true\".\n", ns, name, node, explain.AnnotationRequest)
	default:
		fmt.Fprintf(w, "pod %s/%s has no explanation; ask for one (its next scheduling attempt is explained):\n"+
			"  kubectl annotate pod -n %s %s %s=true\n", ns, name, ns, name, explain.AnnotationRequest)
	}
}

// printTable prints a result: nodes × plugins for a placed pod, the
// rejections and the nearest nodes for a pending one.
func printTable(out io.Writer, pod string, r *explain.Result) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	switch {
	case r.Placed != nil:
		p := r.Placed
		fmt.Fprintf(w, "Pod %s placed on %s by profile %s at %s (%d of %d nodes feasible).\n", pod, p.Node, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"), p.Feasible, r.Nodes)
		if !p.Scored {
			fmt.Fprintf(w, "Not scored: %s.\n", p.NotScored)
			break
		}
		fmt.Fprintf(w, "Rank %d of %d scored nodes.", p.Rank, p.ScoredNodes)
		if p.Note != "" {
			fmt.Fprintf(w, " Note: %s.", p.Note)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
		plugins := pluginColumns(p.Top)
		fmt.Fprintf(w, "\tNODE\tTOTAL\t%s\n", strings.Join(plugins, "\t"))
		for _, n := range p.Top {
			mark := ""
			if n.Node == p.Node {
				mark = "*"
			}
			cells := make([]string, len(plugins))
			for i, pl := range plugins {
				cells[i] = fmt.Sprint(n.Plugins[pl])
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", mark, n.Node, n.Total, strings.Join(cells, "\t"))
		}
	default:
		fmt.Fprintf(w, "Pod %s fits none of %d nodes (profile %s, at %s).\n", pod, r.Nodes, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"))
		if len(r.Nearest) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "NEAREST NODE\tPLUGIN\tSHORT")
			for _, n := range r.Nearest {
				short := make([]string, 0, len(n.Short))
				for res, q := range n.Short {
					short = append(short, q+" "+res)
				}
				sort.Strings(short)
				fmt.Fprintf(w, "%s\t%s\t%s\n", n.Node, n.Plugin, strings.Join(short, ", "))
			}
		}
	}
	if len(r.Rejections) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "REJECTED BY\tNODES\tREASON")
		for _, rj := range r.Rejections {
			for i, rc := range rj.Reasons {
				name, nodes := rj.Plugin, fmt.Sprint(rj.Nodes)
				if i > 0 {
					name, nodes = "", ""
				}
				fmt.Fprintf(w, "%s\t%s\t%s (%d)\n", name, nodes, rc.Reason, rc.Nodes)
			}
		}
	}
	if r.Truncated {
		fmt.Fprintln(w, "\n(details dropped to keep the explanation under 16 KiB)")
	}
	return w.Flush()
}

// pluginColumns are the plugins of the listed nodes, by their spread (the
// plugins that told the nodes apart first).
func pluginColumns(nodes []explain.NodeScore) []string {
	lo, hi := map[string]int64{}, map[string]int64{}
	for _, n := range nodes {
		for pl, v := range n.Plugins {
			if l, ok := lo[pl]; !ok || v < l {
				lo[pl] = v
			}
			if h, ok := hi[pl]; !ok || v > h {
				hi[pl] = v
			}
		}
	}
	out := make([]string, 0, len(lo))
	for pl := range lo {
		out = append(out, pl)
	}
	sort.Slice(out, func(i, j int) bool {
		if si, sj := hi[out[i]]-lo[out[i]], hi[out[j]]-lo[out[j]]; si != sj {
			return si > sj
		}
		return out[i] < out[j]
	})
	return out
}
