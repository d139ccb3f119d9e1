package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

// kindExplanation is the kind -o json|yaml|name|jsonpath print an
// explanation as: the result's own schema (explain.ResultVersion) with the
// pod's namespace and name as its metadata, so that kubectl's printers,
// which need an apiVersion and a kind, print it as they print objects.
const kindExplanation = "Explanation"

type explainOptions struct {
	streams       genericiooptions.IOStreams
	print         *printFlags
	pending       bool
	allNamespaces bool
}

func newExplainCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &explainOptions{streams: streams, print: newPrintFlags()}
	cmd := &cobra.Command{
		Use:   "explain (POD | --pending)",
		Short: "Why a pod landed on its node, or why it fits nowhere, per plugin",
		Long: "Prints the explanation Berth's Explain plugin wrote on the pod (annotation " + explain.AnnotationResult + "):\n" +
			"for a placed pod the best-scored nodes with every plugin's weighted score, for a pending one the plugins\n" +
			"that rejected nodes and the nodes nearest to fitting. A pod asks with the annotation " + explain.AnnotationRequest + `: "true".` + "\n\n" +
			"With --pending, lists the namespace's pending pods that have an explanation (-A: every namespace's), a line each.",
		Example: "  kubectl berth explain trainer-0 -n ml\n" +
			"  kubectl berth explain trainer-0 -n ml -o jsonpath='{.rejections[*].plugin}'\n" +
			"  kubectl berth explain --pending -A",
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 || o.pending {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return namesFromCluster(flags, podNames)(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.pending && len(args) > 0:
				return errors.New("--pending lists the pending pods: give no pod name with it")
			case !o.pending && len(args) != 1:
				return errors.New("give one pod's name, or --pending for the pending pods that have an explanation")
			case o.allNamespaces && !o.pending:
				return errors.New("--all-namespaces goes with --pending")
			}
			var printer printers.ResourcePrinter
			if !o.print.table() {
				p, err := o.print.printer()
				if err != nil {
					return err
				}
				printer = p
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
			if o.pending {
				if o.allNamespaces {
					ns = metav1.NamespaceAll
				}
				return o.runPending(cmd.Context(), c, ns, printer)
			}
			return o.runOne(cmd.Context(), c, ns, args[0], printer)
		},
	}
	o.print.addFlags(cmd)
	cmd.Flags().BoolVar(&o.pending, "pending", false, "List the pending pods that have an explanation instead of explaining one pod.")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "With --pending: list the pending pods of every namespace.")
	return cmd
}

// podNames lists ns's pods, for completion.
func podNames(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
	return c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
}

func (o *explainOptions) runOne(ctx context.Context, c kubernetes.Interface, ns, name string, printer printers.ResourcePrinter) error {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	raw, ok := pod.Annotations[explain.AnnotationResult]
	if !ok {
		howToAsk(o.streams.ErrOut, ns, pod.Name, pod.Spec.NodeName, pod.Annotations[explain.AnnotationRequest] == "true")
		return errors.New("no explanation")
	}
	if printer != nil {
		obj, err := explanationObject(pod, raw)
		if err != nil {
			return err
		}
		return printer.PrintObj(obj, o.streams.Out)
	}
	r := &explain.Result{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return fmt.Errorf("reading %s of pod %s/%s: %w", explain.AnnotationResult, ns, pod.Name, err)
	}
	return printTable(o.streams.Out, ns+"/"+pod.Name, r)
}

// runPending lists ns's pending pods (every namespace's for "") that have an
// explanation of their last attempt, a page of the API's list at a time.
func (o *explainOptions) runPending(ctx context.Context, c kubernetes.Interface, ns string, printer printers.ResourcePrinter) error {
	type row struct {
		pod *v1.Pod
		raw string
		r   *explain.Result
	}
	var rows []row
	// Pending pods the list leaves out, counted on stderr: asked and not yet
	// explained; explained as placed (released at Permit by a gang, or a
	// binding that failed since). One whose annotation does not parse is
	// named in a warning.
	unanswered, stalePlaced := 0, 0
	// Unscheduled and not yet failed or succeeded: the pods a scheduler still tries.
	sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", ""), fields.OneTermEqualSelector("status.phase", string(v1.PodPending)))
	list := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		opts.FieldSelector = sel.String()
		return c.CoreV1().Pods(ns).List(ctx, opts)
	})
	err := list.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		pod := obj.(*v1.Pod)
		raw, ok := pod.Annotations[explain.AnnotationResult]
		if !ok {
			if pod.Annotations[explain.AnnotationRequest] == "true" {
				unanswered++
			}
			return nil
		}
		r := &explain.Result{}
		if err := json.Unmarshal([]byte(raw), r); err != nil {
			// Anyone who may patch the pod may write it: one pod's does not
			// stop the list.
			fmt.Fprintf(o.streams.ErrOut, "warning: pod %s/%s: reading %s: %v\n", pod.Namespace, pod.Name, explain.AnnotationResult, err)
			return nil
		}
		if r.Outcome != explain.OutcomePending {
			stalePlaced++
			return nil
		}
		rows = append(rows, row{pod: pod.DeepCopy(), raw: raw, r: r})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	if unanswered > 0 {
		fmt.Fprintf(o.streams.ErrOut, "%s ask for an explanation and have none yet: is their profile's Explain plugin enabled, and has the scheduler tried them since they asked?\n", pendingPods(unanswered))
	}
	if stalePlaced > 0 {
		fmt.Fprintf(o.streams.ErrOut, "%s have, as their last explanation, a placement that did not stick (a gang released at Permit, or a binding that failed): kubectl berth explain POD shows it; the next attempt is explained again\n", pendingPods(stalePlaced))
	}
	if printer != nil {
		l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
		for _, rw := range rows {
			obj, err := explanationObject(rw.pod, rw.raw)
			if err != nil {
				return err
			}
			l.Items = append(l.Items, *obj)
		}
		return printer.PrintObj(l, o.streams.Out)
	}
	if len(rows) == 0 {
		where := "namespace " + ns
		if ns == metav1.NamespaceAll {
			where = "any namespace"
		}
		fmt.Fprintf(o.streams.ErrOut, "No explained pending pods in %s.\n", where)
		return nil
	}
	w := printers.GetNewTabWriter(o.streams.Out)
	head := "NAME\tPROFILE\tNODES\tREJECTED BY\tNEAREST\tEXPLAINED"
	if ns == metav1.NamespaceAll {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(w, head)
	for _, rw := range rows {
		rejected := rejectedBy(rw.r.Rejections)
		switch {
		case rw.r.PodGroup != "":
			// A group member's reason is its group's (explain POD prints it).
			rejected = "pod group " + rw.r.PodGroup
		case rw.r.Rejection != "":
			rejected = "placed, not bound"
		case rw.r.Decision != "":
			rejected = "see its condition"
		}
		cells := []string{rw.pod.Name, rw.r.Profile, strconv.Itoa(rw.r.Nodes), rejected, nearest(rw.r.Nearest),
			explainedAgo(rw.r.Time.Time)}
		if ns == metav1.NamespaceAll {
			cells = append([]string{rw.pod.Namespace}, cells...)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// pendingPods says "1 pending pod" or "n pending pods".
func pendingPods(n int) string {
	if n == 1 {
		return "1 pending pod"
	}
	return fmt.Sprintf("%d pending pods", n)
}

// explainedAgo is the explanation's age, as kubectl prints ages.
func explainedAgo(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t)) + " ago"
}

// rejectedBy sums up the rejections: each plugin with the nodes it
// rejected, most first.
func rejectedBy(rj []explain.Rejection) string {
	if len(rj) == 0 {
		return "<none>"
	}
	rj = slices.Clone(rj)
	slices.SortStableFunc(rj, func(a, b explain.Rejection) int { return cmp.Compare(b.Nodes, a.Nodes) })
	parts := make([]string, len(rj))
	for i, r := range rj {
		parts[i] = fmt.Sprintf("%s (%d)", r.Plugin, r.Nodes)
	}
	return strings.Join(parts, ", ")
}

// nearest names the node nearest to fitting and what it lacks.
func nearest(ns []explain.Nearest) string {
	if len(ns) == 0 {
		return "<none>"
	}
	n := ns[0]
	short := make([]string, 0, len(n.Short))
	for res, q := range n.Short {
		short = append(short, q+" "+res)
	}
	slices.Sort(short)
	return fmt.Sprintf("%s (short %s)", n.Node, strings.Join(short, ", "))
}

// explanationObject is the pod's explanation as kubectl's printers print
// objects: the result's fields, its schema as apiVersion, kind Explanation,
// the pod's namespace and name as metadata.
func explanationObject(pod *v1.Pod, raw string) (*unstructured.Unstructured, error) {
	content := map[string]any{}
	// apimachinery's json keeps integers int64, as unstructured objects hold them.
	if err := utiljson.Unmarshal([]byte(raw), &content); err != nil {
		return nil, fmt.Errorf("reading %s of pod %s/%s: %w", explain.AnnotationResult, pod.Namespace, pod.Name, err)
	}
	u := &unstructured.Unstructured{Object: content}
	// The schema the scheduler wrote it in, which may be newer than this
	// plugin's.
	schema, _ := content["version"].(string)
	if schema == "" {
		schema = explain.ResultVersion
	}
	u.SetAPIVersion(schema)
	u.SetKind(kindExplanation)
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	return u, nil
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
	case r.Placed != nil && r.Placed.Unexplained != "":
		fmt.Fprintf(w, "Pod %s placed on %s by profile %s at %s; %s.\n", pod, r.Placed.Node, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"), r.Placed.Unexplained)
	case r.Placed != nil:
		p := r.Placed
		fmt.Fprintf(w, "Pod %s placed on %s by profile %s at %s (%d of %d nodes feasible).\n", pod, p.Node, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"), p.Feasible, r.Nodes)
		if r.PodGroup != "" {
			fmt.Fprintf(w, "Placed with its pod group %s, the members placed before it counted.\n", r.PodGroup)
		}
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
	case r.PodGroup != "":
		fmt.Fprintf(w, "Pod %s is pending with its pod group %s (profile %s, at %s).\n", pod, r.PodGroup, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"))
		fmt.Fprintf(w, "Scheduler: %s\n", r.GroupFailure)
	case r.Rejection != "":
		fmt.Fprintf(w, "Pod %s is pending: a cycle placed it and it was not bound (profile %s, at %s).\n", pod, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"))
		fmt.Fprintf(w, "Scheduler: %s\n", r.Rejection)
	case r.Decision != "":
		fmt.Fprintf(w, "Pod %s is pending; explained from its condition, as the cycle that decided left no explanation (profile %s, at %s).\n", pod, r.Profile, r.Time.UTC().Format("2006-01-02T15:04:05Z"))
		fmt.Fprintf(w, "Scheduler: %s\n", r.Decision)
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
