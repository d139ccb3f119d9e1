// Package snapshot writes and reads a cluster's scheduling state as one
// file: every object Berth's scheduler reads (nodes, pods, what the
// upstream plugins and Berth's plugins list), with what scheduling never
// reads and what may be secret left out (managed fields, kubectl's
// last-applied annotation, containers' env, commands and probes; Secrets
// and ConfigMaps are never listed). kubectl berth snapshot writes it.
package snapshot

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"

	"github.com/berth-scheduler/berth/internal/podorigin"
)

// APIVersion and Kind head a snapshot file.
const (
	APIVersion = "snapshot.berth.dev/v1alpha1"
	Kind       = "Snapshot"
)

// defaultPageSize is the list chunk size when Options say none.
const defaultPageSize = 500

// Resource is one kind of object a snapshot holds.
type Resource struct {
	schema.GroupVersionResource
	// Why the scheduler reads it (the README's RBAC table says the same).
	Why string
}

// Key names the resource as the header's counts and omissions do, as
// kubectl does: "pods", "podgroups.scheduling.x-k8s.io".
func (r Resource) Key() string { return resourceKey(r.GroupVersionResource) }

func res(group, version, resource, why string) Resource {
	return Resource{schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, why}
}

// Resources are listed, and written, in this order.
var Resources = []Resource{
	res("", "v1", "namespaces", "NamespaceSelector of pod affinity, ElasticQuota"),
	res("", "v1", "nodes", "every plugin"),
	res("", "v1", "pods", "every plugin: pending pods and the pods bound to nodes"),
	res("scheduling.k8s.io", "v1", "priorityclasses", "preemption and the queue"),
	res("", "v1", "persistentvolumeclaims", "VolumeBinding, VolumeRestrictions, NodeVolumeLimits, VolumeZone"),
	res("", "v1", "persistentvolumes", "VolumeBinding, VolumeZone"),
	res("storage.k8s.io", "v1", "storageclasses", "VolumeBinding"),
	res("storage.k8s.io", "v1", "csinodes", "NodeVolumeLimits, VolumeBinding"),
	res("storage.k8s.io", "v1", "csidrivers", "NodeVolumeLimits, VolumeBinding"),
	res("storage.k8s.io", "v1", "csistoragecapacities", "VolumeBinding's capacity check"),
	res("storage.k8s.io", "v1", "volumeattachments", "NodeVolumeLimits"),
	res("", "v1", "services", "PodTopologySpread's default constraints"),
	res("", "v1", "replicationcontrollers", "PodTopologySpread's default constraints"),
	res("apps", "v1", "replicasets", "PodTopologySpread's default constraints, AdmissionFeedback's controllers"),
	res("apps", "v1", "statefulsets", "PodTopologySpread's default constraints"),
	res("policy", "v1", "poddisruptionbudgets", "DefaultPreemption and ElasticQuota's victims"),
	res("resource.k8s.io", "v1", "deviceclasses", "DynamicResources"),
	res("resource.k8s.io", "v1", "resourceslices", "DynamicResources"),
	res("resource.k8s.io", "v1", "resourceclaims", "DynamicResources"),
	res("resource.k8s.io", "v1", "resourceclaimtemplates", "not read by the scheduler: simulate makes a pending pod's claim from its template, as the resourceclaim controller would"),
	res("resource.k8s.io", "v1", "devicetaintrules", "DynamicResources' device taints"),
	res("scheduling.x-k8s.io", "v1alpha1", "podgroups", "Coscheduling, ElasticQuota (scheduler-plugins' PodGroups)"),
	res("scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota"),
	res("scheduling.k8s.io", "v1beta1", "workloads", "not read by the scheduler: the native PodGroups' Workloads, for the report"),
	res("scheduling.k8s.io", "v1beta1", "podgroups", "GangScheduling and the PodGroup cycle (native gangs, gate GenericWorkload)"),
	res("scheduling.k8s.io", "v1alpha3", "compositepodgroups", "the PodGroup cycle's composite groups (alpha gate)"),
	res("metrics.k8s.io", "v1beta1", "nodes", "LoadAware's MetricsAPI source (node usage)"),
}

// Omission is a resource the snapshot does not hold, and why.
type Omission struct {
	Resource string `json:"resource"`
	Reason   string `json:"reason"`
	// Incomplete: the cluster may hold such objects but the snapshot could
	// not read them (forbidden, or discovery failed), as opposed to a
	// resource the cluster does not serve.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Incomplete lists the omissions of objects the cluster may hold.
func (h *Header) Incomplete() []Omission {
	var out []Omission
	for _, o := range h.Omitted {
		// Files written before the field: by their reasons.
		if o.Incomplete || strings.HasPrefix(o.Reason, "not readable") || strings.HasPrefix(o.Reason, "discovery of") {
			out = append(out, o)
		}
	}
	return out
}

// Header is a snapshot file without its items.
type Header struct {
	metav1.TypeMeta `json:",inline"`
	// Taken is when the listing began.
	Taken metav1.Time `json:"taken"`
	// Server is the API server's version.
	Server *version.Info `json:"server,omitempty"`
	// Client is the kubectl-berth that wrote it.
	Client string `json:"client,omitempty"`
	// Anonymized says what was renamed: "", "names", "names,labels".
	Anonymized string `json:"anonymized,omitempty"`
	// KeptAnnotations are the annotations kept besides the ones
	// scheduling reads (--keep-annotation).
	KeptAnnotations []string `json:"keptAnnotations,omitempty"`
	// Counts are the objects held, by resource ("pods", "nodes.metrics.k8s.io").
	Counts map[string]int `json:"counts"`
	// Omitted are the resources not held: not served by this cluster, or
	// not readable with the user's credentials.
	Omitted []Omission `json:"omitted,omitempty"`
}

// File is a snapshot read whole.
type File struct {
	Header `json:",inline"`
	Items  []*unstructured.Unstructured `json:"items"`
}

// Options say how to take a snapshot.
type Options struct {
	// Client names the writer in the header.
	Client string
	// Anonymizer renames objects as they are written; nil keeps names.
	Anonymizer *Anonymizer
	// PageSize is the list chunk size (defaultPageSize when 0).
	PageSize int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// KeepAnnotations are annotation keys kept besides the ones scheduling
	// reads (a CELPolicy rule's, LoadAware's own annotationKey).
	KeepAnnotations []string
}

// Take lists every resource of Resources the cluster serves, page by page,
// and writes the snapshot to w as JSON as it goes (the header's counts and
// omissions after the items). It returns the header it wrote.
func Take(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface, w io.Writer, o Options) (*Header, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	h := Header{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}, Taken: metav1.NewTime(now().UTC().Truncate(time.Second)),
		Client: o.Client, Counts: map[string]int{}}
	if o.Anonymizer != nil {
		h.Anonymized = o.Anonymizer.What()
	}
	h.KeptAnnotations = o.KeepAnnotations
	info, err := disc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the API server's version: %w", err)
	}
	h.Server = info

	// bufio.Writer keeps the first write error and returns it from every
	// later call and from Flush, which is checked at the end.
	bw := bufio.NewWriterSize(w, 1<<20)
	head, err := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Taken           metav1.Time   `json:"taken"`
		Server          *version.Info `json:"server"`
		Client          string        `json:"client,omitempty"`
		Anonymized      string        `json:"anonymized,omitempty"`
	}{h.TypeMeta, h.Taken, h.Server, h.Client, h.Anonymized})
	if err != nil {
		return nil, err
	}
	// The head without its closing brace, then the items, then the rest.
	_, _ = bw.Write(head[:len(head)-1])
	_, _ = bw.WriteString(`,"items":[`)
	first := true
	served := map[string]map[string]bool{}
	discErr := map[string]error{}
	for _, r := range Resources {
		gv := r.GroupVersion().String()
		names, ok := served[gv]
		if !ok {
			names = map[string]bool{}
			list, err := disc.ServerResourcesForGroupVersion(gv)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				// An aggregated API that does not answer (metrics.k8s.io with
				// metrics-server down answers 503): the rest can still be taken.
				discErr[gv] = err
			default:
				for _, ar := range list.APIResources {
					names[ar.Name] = true
				}
			}
			served[gv] = names
		}
		key := resourceKey(r.GroupVersionResource)
		if err, ok := discErr[gv]; ok {
			h.Omitted = append(h.Omitted, Omission{Resource: key, Reason: "discovery of " + gv + " failed: " + err.Error(), Incomplete: true})
			continue
		}
		if !names[r.Resource] {
			h.Omitted = append(h.Omitted, Omission{Resource: key, Reason: "not served by this cluster"})
			continue
		}
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(r.GroupVersionResource).List(ctx, opts)
		})
		p.PageSize = o.PageSize
		if p.PageSize == 0 {
			p.PageSize = defaultPageSize
		}
		n := 0
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("listing %s: got a %T", key, obj)
			}
			if r.Group == "" && r.Resource == "pods" && !keepPod(u) {
				return nil
			}
			Sanitize(u, o.KeepAnnotations...)
			if o.Anonymizer != nil {
				o.Anonymizer.Apply(u)
			}
			raw, err := json.Marshal(u.Object)
			if err != nil {
				return err
			}
			if !first {
				_ = bw.WriteByte(',')
			}
			first = false
			_, _ = bw.WriteString("\n")
			_, _ = bw.Write(raw)
			n++
			return nil
		})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			// A partly written resource cannot be taken back: say so.
			if n > 0 {
				return nil, fmt.Errorf("listing %s: %w (after %d objects)", key, err, n)
			}
			h.Omitted = append(h.Omitted, Omission{Resource: key, Reason: "not readable with these credentials: " + err.Error(), Incomplete: true})
			continue
		case apierrors.IsNotFound(err) && n == 0:
			h.Omitted = append(h.Omitted, Omission{Resource: key, Reason: "not served by this cluster"})
			continue
		case err != nil:
			return nil, fmt.Errorf("listing %s: %w", key, err)
		}
		h.Counts[key] = n
	}
	tail, err := json.Marshal(struct {
		Counts  map[string]int `json:"counts"`
		Omitted []Omission     `json:"omitted,omitempty"`
	}{h.Counts, h.Omitted})
	if err != nil {
		return nil, err
	}
	_, _ = bw.WriteString("\n],")
	_, _ = bw.Write(tail[1:])
	_, _ = bw.WriteString("\n")
	return &h, bw.Flush()
}

// keepPod says whether a pod is scheduling state: pods that ended hold no
// resources, except Failed pods with a reason on a node, which
// AdmissionFeedback reads as refusals (its args say which reasons count).
func keepPod(u *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return false
	case "Failed":
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
		return reason != "" && node != ""
	}
	return true
}

// resourceKey names a resource as kubectl does: "pods", "podgroups.scheduling.x-k8s.io".
func resourceKey(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

// keptManagedFields is what a snapshot keeps of u's managed fields: of a
// pod, the kubelet's status writes and an entry that owns spec.nodeName
// (its author placed it; a scheduler's binding leaves none), without any
// other field: AdmissionFeedback counts a refusal only of a pod a
// scheduler bound, and times it by the kubelet's write.
func keptManagedFields(u *unstructured.Unstructured) []metav1.ManagedFieldsEntry {
	if u.GetKind() != "Pod" {
		return nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, e := range u.GetManagedFields() {
		switch {
		case podorigin.KubeletStatusWrite(e):
			kept = append(kept, metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, APIVersion: e.APIVersion, Time: e.Time, Subresource: e.Subresource})
		case podorigin.OwnsNodeName(e):
			kept = append(kept, metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation, APIVersion: e.APIVersion, Time: e.Time,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(podorigin.NodeNameFields)})
		}
	}
	return kept
}

// Sanitize leaves out of u what scheduling never reads and what may be
// secret: managed fields (but of a pod's, the facts AdmissionFeedback
// reads: whether its author set spec.nodeName, when the kubelet last wrote
// its status), every annotation but the ones scheduling reads
// (keptAnnotations) and keepAnnotations, the fields of droppedFields
// (addresses, controllers' pod templates, StorageClass parameters),
// containers' env, commands, args, probes and mounts, volume sources'
// servers, paths, attributes and secrets, and containers' states (a
// terminated container's message is whatever it printed last) and runtime
// IDs. kubectl berth snapshot --explain-fields prints the lists.
func Sanitize(u *unstructured.Unstructured, keepAnnotations ...string) {
	u.SetManagedFields(keptManagedFields(u))
	keep := map[string]bool{}
	for _, k := range keepAnnotations {
		keep[k] = true
	}
	minimize(u, keep)
	for _, kind := range []string{"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"} {
		editEach(u, deleting("state", "lastState", "containerID", "imageID"), "status", kind)
	}
}

// Open reads a snapshot file, gzip-compressed when it starts with gzip's
// magic bytes.
func Open(r io.Reader) (*File, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<20)
	}
	f := &File{}
	if err := json.NewDecoder(br).Decode(f); err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", err)
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("not a Berth snapshot: apiVersion %q, kind %q (want %s %s)", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	return f, nil
}

// IsGzipName says whether a file name asks for gzip.
func IsGzipName(name string) bool { return strings.HasSuffix(name, ".gz") }
