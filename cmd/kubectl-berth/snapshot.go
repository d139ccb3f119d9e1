package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/berth-scheduler/berth/internal/buildinfo"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

func newSnapshotCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	var anonymize, anonymizeLabels, explainFields bool
	var keepAnnotations []string
	var pageSize int64
	cmd := &cobra.Command{
		Use:   "snapshot [FILE]",
		Short: "Write what Berth's scheduler reads from the cluster into one file (for a what-if, or a bug report)",
		Long: "Lists, page by page, every object Berth's scheduler reads — nodes, pods (pending, running, and Failed ones\n" +
			"with a reason, which AdmissionFeedback reads), namespaces, priority classes, volumes and storage, PDBs,\n" +
			"DRA objects, the controllers PodTopologySpread's defaults read, scheduler-plugins' PodGroups and\n" +
			"ElasticQuotas, native Workloads and PodGroups, node metrics — into one JSON file (gzip when FILE ends in\n" +
			".gz; standard output when FILE is - or absent). Resources the cluster does not serve, or the credentials\n" +
			"may not list, are named in the file and on standard error, not silently dropped.\n\n" +
			"Only what scheduling reads is kept (--explain-fields lists it): never Secrets or ConfigMaps, no annotation\n" +
			"but the ones scheduling reads (--keep-annotation keeps another, e.g. one a CELPolicy rule reads), no\n" +
			"addresses, no controllers' pod templates, no containers' env, commands, args, probes or mounts, no volume\n" +
			"servers, paths, attributes or secrets, no StorageClass parameters, no managed fields. It needs get/list\n" +
			"only: manifests/snapshot-reader.yaml is a ClusterRole with exactly what it reads.\n\n" +
			"--anonymize renames namespaces, nodes, pods and the pods' controllers in the fields that hold them (names,\n" +
			"namespaces, nodeName, owner references, the hostname label and selectors), and drops IPs, hostnames and\n" +
			"condition messages too; --anonymize-labels renames label keys\n" +
			"(but Kubernetes' own) and values (but kubernetes.io/os and /arch) too. Quantities, scheduler names and\n" +
			"priority class names are kept, so a config still applies.",
		Example: "  kubectl berth snapshot cluster.json.gz\n" +
			"  kubectl berth snapshot --anonymize --anonymize-labels bug-report.json.gz",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if explainFields {
				return snapshot.ExplainFields(streams.Out)
			}
			// The scheduler sees every namespace: a snapshot of one would
			// simulate a cluster that does not exist.
			if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
				return fmt.Errorf("--namespace %q: a snapshot holds every namespace, as the scheduler sees them (its nodes hold every namespace's pods); leave it out", f.Value)
			}
			cfg, err := flags.ToRESTConfig()
			if err != nil {
				return err
			}
			// Lists of 5,000 nodes and 50,000 pods are about 130 pages:
			// client-go's default 5 requests/s would make that half a minute.
			cfg.QPS, cfg.Burst = 100, 200
			disc, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			o := snapshot.Options{Client: "kubectl-berth " + buildinfo.Version(), PageSize: pageSize, KeepAnnotations: keepAnnotations}
			if anonymize || anonymizeLabels {
				mc, err := metadata.NewForConfig(cfg)
				if err != nil {
					return err
				}
				o.Anonymizer = snapshot.NewAnonymizer(anonymizeLabels, keepAnnotations...)
				if err := o.Anonymizer.Learn(ctx, mc, pageSize); err != nil {
					return err
				}
			}
			path := "-"
			if len(args) == 1 {
				path = args[0]
			}
			h, err := writeSnapshot(path, streams.Out, func(w io.Writer) (*snapshot.Header, error) {
				return snapshot.Take(ctx, disc, dyn, w, o)
			})
			if err != nil {
				return err
			}
			printSnapshotSummary(streams.ErrOut, path, h)
			return nil
		},
	}
	cmd.Flags().BoolVar(&anonymize, "anonymize", false, "rename namespaces, nodes, pods and their controllers consistently; drop hostnames, IPs and condition messages too (annotations scheduling does not read are left out with or without it)")
	cmd.Flags().BoolVar(&anonymizeLabels, "anonymize-labels", false, "with --anonymize: rename label keys (but Kubernetes' own) and values too")
	cmd.Flags().StringSliceVar(&keepAnnotations, "keep-annotation", nil, "an annotation key to keep besides the ones scheduling reads (LoadAware's annotationKey when it is not berth.io/node-usage, one a CELPolicy rule reads)")
	cmd.Flags().BoolVar(&explainFields, "explain-fields", false, "print what a snapshot keeps and leaves out, and exit")
	cmd.Flags().Int64Var(&pageSize, "page-size", 500, "objects per list request")
	return cmd
}

// writeSnapshot writes through take to path ("-": out), gzip-compressed for
// a .gz name. A file is written beside path and renamed into place once
// complete, so a failed snapshot leaves no truncated file.
func writeSnapshot(path string, out io.Writer, take func(io.Writer) (*snapshot.Header, error)) (*snapshot.Header, error) {
	if path == "-" {
		return take(out)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name()) // after the rename: nothing left to remove
	var w io.Writer = f
	var zw *gzip.Writer
	if snapshot.IsGzipName(path) {
		zw = gzip.NewWriter(f)
		w = zw
	}
	h, err := take(w)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return h, err
}

// printSnapshotSummary says what the snapshot holds and what it does not.
func printSnapshotSummary(w io.Writer, path string, h *snapshot.Header) {
	var held []string
	for _, r := range snapshot.Resources {
		if n := h.Counts[r.Key()]; n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, r.Key()))
		}
	}
	if path == "-" {
		path = "standard output"
	}
	fmt.Fprintf(w, "snapshot of a Kubernetes %s cluster written to %s: %s\n", h.Server.GitVersion, path, strings.Join(held, ", "))
	for _, o := range h.Omitted {
		fmt.Fprintf(w, "  not in it: %s (%s)\n", o.Resource, o.Reason)
	}
	if len(h.Incomplete()) > 0 {
		fmt.Fprintln(w, "  incomplete: simulate refuses it without --allow-partial-snapshot; manifests/snapshot-reader.yaml is a ClusterRole with everything a snapshot reads")
	}
}
