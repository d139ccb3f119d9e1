package snapshot

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// keptAnnotations are the annotations scheduling reads, and the only ones a
// snapshot keeps (besides Options.KeepAnnotations): any other may hold a
// whole object (kapp's original, a GitOps tool's last state), credentials
// or addresses. The value says who reads it.
var keptAnnotations = map[string]string{
	"berth.io/node-usage":                            "LoadAware's NodeAnnotations source (its default annotationKey; --keep-annotation keeps another)",
	"explain.berth.dev/request":                      "Explain: the pods that ask",
	"kubernetes.io/config.mirror":                    "simulate: a mirror pod stays where its kubelet runs it",
	"pv.kubernetes.io/bind-completed":                "VolumeBinding: a claim fully bound",
	"pv.kubernetes.io/bound-by-controller":           "VolumeBinding, the PV controller's binding",
	"pv.kubernetes.io/provisioned-by":                "VolumeBinding, NodeVolumeLimits: a dynamically provisioned volume",
	"pv.kubernetes.io/migrated-to":                   "NodeVolumeLimits, VolumeBinding: CSI migration",
	"volume.kubernetes.io/selected-node":             "VolumeBinding: the node a claim is provisioned for",
	"volume.kubernetes.io/storage-provisioner":       "VolumeBinding: the claim's provisioner",
	"volume.beta.kubernetes.io/storage-provisioner":  "VolumeBinding: the claim's provisioner (older key)",
	"volume.beta.kubernetes.io/storage-class":        "VolumeBinding: a claim's class (older key)",
	"storage.alpha.kubernetes.io/migrated-plugins":   "NodeVolumeLimits: a CSINode's migrated in-tree plugins",
	"resource.kubernetes.io/pod-claim-name":          "DynamicResources: the pod claim a ResourceClaim was made for",
	"resource.kubernetes.io/extended-resource-claim": "DynamicResources: a pod's claim for extended resources backed by devices",
	"berth.io/allow-draining":                        "CELPolicy: the rule of manifests/control-plane's configuration (pods that may go to draining nodes)",
	"berth.io/draining":                              "CELPolicy: the rule of manifests/control-plane's configuration (nodes being drained)",
}

// KeptAnnotation says whether a snapshot keeps annotation key when taken
// with --keep-annotation keep.
func KeptAnnotation(key string, keep []string) bool {
	_, ok := keptAnnotations[key]
	return ok || slices.Contains(keep, key)
}

// droppedField is a field a snapshot leaves out of every object of Kinds.
type droppedField struct {
	Kinds []string
	Path  []string
	Why   string
}

// droppedFields are left out of the objects whose kind they name. A
// controller's pod template and a Service's ports are read by nothing of
// scheduling: only their selectors are.
var droppedFields = []droppedField{
	{[]string{"Node"}, []string{"status", "addresses"}, "addresses"},
	{[]string{"Node"}, []string{"status", "daemonEndpoints"}, "the kubelet's port"},
	{[]string{"Node"}, []string{"status", "config"}, "the kubelet's config source"},
	{[]string{"Node"}, []string{"status", "nodeInfo", "machineID"}, "machine identity"},
	{[]string{"Node"}, []string{"status", "nodeInfo", "systemUUID"}, "machine identity"},
	{[]string{"Node"}, []string{"status", "nodeInfo", "bootID"}, "machine identity"},
	{[]string{"Node"}, []string{"spec", "providerID"}, "the cloud's machine ID"},
	{[]string{"Pod"}, []string{"spec", "hostAliases"}, "addresses"},
	{[]string{"Pod"}, []string{"spec", "dnsConfig"}, "addresses"},
	{[]string{"Pod"}, []string{"status", "podIP"}, "addresses"},
	{[]string{"Pod"}, []string{"status", "podIPs"}, "addresses"},
	{[]string{"Pod"}, []string{"status", "hostIP"}, "addresses"},
	{[]string{"Pod"}, []string{"status", "hostIPs"}, "addresses"},
	{[]string{"ReplicaSet", "StatefulSet", "ReplicationController"}, []string{"spec", "template"}, "the pod template: only the selector is read (PodTopologySpread's default constraints)"},
	{[]string{"ReplicaSet", "StatefulSet", "ReplicationController"}, []string{"spec", "volumeClaimTemplates"}, "only the selector is read"},
	{[]string{"ReplicaSet", "StatefulSet", "ReplicationController"}, []string{"status"}, "only the selector is read"},
	{[]string{"Service"}, []string{"spec", "ports"}, "only the selector is read"},
	{[]string{"Service"}, []string{"spec", "clusterIP"}, "addresses"},
	{[]string{"Service"}, []string{"spec", "clusterIPs"}, "addresses"},
	{[]string{"Service"}, []string{"spec", "externalIPs"}, "addresses"},
	{[]string{"Service"}, []string{"spec", "loadBalancerIP"}, "addresses"},
	{[]string{"Service"}, []string{"spec", "externalName"}, "addresses"},
	{[]string{"Service"}, []string{"status"}, "addresses"},
	{[]string{"StorageClass"}, []string{"parameters"}, "the provisioner's settings (may name credentials' Secrets, accounts): not read by scheduling"},
	{[]string{"StorageClass"}, []string{"mountOptions"}, "not read by scheduling"},
}

// droppedContainerFields are left out of every container (pods'; the
// controllers' templates are dropped whole).
var droppedContainerFields = []string{"env", "envFrom", "command", "args", "workingDir",
	"livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "volumeMounts", "volumeDevices"}

// droppedVolumeFields are left out of the volume sources that hold them,
// in a pod's volumes and a PersistentVolume's spec: servers, paths,
// attributes and secrets no plugin reads (the source's kind stays, and the
// fields VolumeRestrictions and NodeVolumeLimits compare: a CSI driver and
// volume handle, a disk's ID, an RBD image, an iSCSI target).
var droppedVolumeFields = map[string][]string{
	"nfs":        {"server", "path"},
	"hostPath":   {"path"},
	"local":      {"path"},
	"csi":        {"volumeAttributes", "nodePublishSecretRef", "nodeStageSecretRef", "controllerPublishSecretRef", "controllerExpandSecretRef", "nodeExpandSecretRef"},
	"flexVolume": {"options", "secretRef"},
	"cephfs":     {"secretRef", "secretFile", "path"},
	"rbd":        {"keyring", "secretRef"},
	"iscsi":      {"secretRef", "chapAuthDiscovery", "chapAuthSession", "initiatorName"},
	"glusterfs":  {"endpoints", "endpointsNamespace", "path"},
	"gitRepo":    {"repository", "revision"},
}

// minimize leaves out of u what scheduling does not read: annotations but
// keptAnnotations and keep, droppedFields, droppedContainerFields and
// droppedVolumeFields.
func minimize(u *unstructured.Unstructured, keep map[string]bool) {
	if a := u.GetAnnotations(); a != nil {
		kept := map[string]string{}
		for k, v := range a {
			if _, ok := keptAnnotations[k]; ok || keep[k] {
				kept[k] = v
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		u.SetAnnotations(kept)
	}
	kind := u.GetKind()
	for _, f := range droppedFields {
		if slices.Contains(f.Kinds, kind) {
			unstructured.RemoveNestedField(u.Object, f.Path...)
		}
	}
	for _, kind := range []string{"containers", "initContainers", "ephemeralContainers"} {
		editEach(u, deleting(droppedContainerFields...), "spec", kind)
	}
	switch kind {
	case "Pod":
		editEach(u, minimizeVolumeSource, "spec", "volumes")
	case "PersistentVolume":
		if spec, ok := u.Object["spec"].(map[string]any); ok {
			minimizeVolumeSource(spec)
		}
	}
}

// editEach applies edit to each object of the list at path in u.
func editEach(u *unstructured.Unstructured, edit func(map[string]any), path ...string) {
	list, found, _ := unstructured.NestedSlice(u.Object, path...)
	if !found {
		return
	}
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			edit(m)
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, list, path...)
}

// deleting is an edit that deletes fields.
func deleting(fields ...string) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range fields {
			delete(m, f)
		}
	}
}

// minimizeVolumeSource drops droppedVolumeFields from the sources m holds.
func minimizeVolumeSource(m map[string]any) {
	for source, fields := range droppedVolumeFields {
		if s, ok := m[source].(map[string]any); ok {
			for _, f := range fields {
				delete(s, f)
			}
		}
	}
}

// ExplainFields writes what a snapshot keeps and leaves out, from the
// tables minimize applies (kubectl berth snapshot --explain-fields).
func ExplainFields(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "A snapshot holds the objects below, with only what scheduling reads.")
	fmt.Fprintln(tw, "\nRESOURCE\tREAD BY")
	for _, r := range Resources {
		fmt.Fprintf(tw, "%s\t%s\n", r.Key(), r.Why)
	}
	fmt.Fprintln(tw, "\nAnnotations kept (every other is left out; --keep-annotation KEY keeps one more, e.g. what a CELPolicy rule reads):")
	fmt.Fprintln(tw, "ANNOTATION\tREAD BY")
	for _, k := range slices.Sorted(maps.Keys(keptAnnotations)) {
		fmt.Fprintf(tw, "%s\t%s\n", k, keptAnnotations[k])
	}
	fmt.Fprintln(tw, "\nFields left out:")
	fmt.Fprintln(tw, "KIND\tFIELD\tWHY")
	for _, f := range droppedFields {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.Join(f.Kinds, ", "), strings.Join(f.Path, "."), f.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nAlso left out: of every container, %s (may hold secrets); of container statuses, state, lastState,\n", strings.Join(droppedContainerFields, ", "))
	fmt.Fprintln(w, "containerID and imageID (a container's last words); kubectl's last-applied annotation; managed fields (but of a")
	fmt.Fprintln(w, "pod, the kubelet's status writes and who set spec.nodeName, which AdmissionFeedback reads); of volume")
	fmt.Fprintln(w, "sources in pods and PersistentVolumes:")
	for _, s := range slices.Sorted(maps.Keys(droppedVolumeFields)) {
		fmt.Fprintf(w, "  %s: %s\n", s, strings.Join(droppedVolumeFields[s], ", "))
	}
	fmt.Fprintln(w, "\nKept though they may look private: a node's status.images and containers' images (ImageLocality scores by")
	fmt.Fprintln(w, "them), volume handles and disk IDs (VolumeRestrictions and NodeVolumeLimits compare them), and names of every")
	fmt.Fprintln(w, "kind (--anonymize renames them).")
	return nil
}
