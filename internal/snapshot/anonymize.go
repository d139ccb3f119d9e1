package snapshot

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"
)

// Anonymizer renames namespaces, nodes, pods and the pods' controllers
// (ReplicaSets, StatefulSets, Jobs, ... and their owners) at the fields
// that hold them — an object's own name and namespace, a pod's nodeName
// and nominatedNodeName, owner references, a pod affinity term's
// namespaces, ResourceSlices' and VolumeAttachments' nodeName — and in
// label positions (label maps, selectors' matchLabels and matchExpressions,
// nodeSelector, node affinity's matchFields), where a value that is such a
// name (the hostname label, a StatefulSet's pod-name label) gets the same
// new name. With labels, every other label value and every label key but
// the well-known ones (kubernetes.io, k8s.io, x-k8s.io, berth.dev,
// berth.io) is renamed too, at the same positions and in topologyKey and
// matchLabelKeys; the values of kubernetes.io/os and /arch are kept.
// Nothing else is touched: quantities, scheduler names, priority class
// names, container names and images keep their values.
//
// The names are learnt first, from a metadata-only listing, so that a label
// value naming a pod listed later is recognised.
type Anonymizer struct {
	labels bool
	// kinds maps a learnt name to the prefix of its new name ("node", "ns",
	// "pod", "replicaset", ...): the first kind it was learnt as wins.
	kinds map[string]string
	// renamed holds the new name of each name and label value.
	renamed map[string]string
	// keys holds the new name of each label key (with labels).
	keys map[string]string
	// keepAnnotations are the annotation keys Apply keeps besides the
	// well-known ones.
	keepAnnotations map[string]bool
	count           map[string]int
}

// NewAnonymizer returns an anonymizer that knows no names yet (see Learn);
// labels says whether label keys and values are renamed too; keep lists
// annotation keys to keep (a LoadAware annotationKey outside the well-known
// domains).
func NewAnonymizer(labels bool, keep ...string) *Anonymizer {
	a := &Anonymizer{labels: labels, kinds: map[string]string{}, renamed: map[string]string{}, keys: map[string]string{},
		keepAnnotations: map[string]bool{}, count: map[string]int{}}
	for _, k := range keep {
		a.keepAnnotations[k] = true
	}
	return a
}

// What says what the anonymizer renames, for the snapshot's header.
func (a *Anonymizer) What() string {
	if a.labels {
		return "names,labels"
	}
	return "names"
}

// learnOrder is the order names are learnt in, with each one's prefix: a
// string that is both a namespace's and a pod's name is renamed as the
// namespace.
var learnOrder = []struct {
	schema.GroupVersionResource
	prefix string
}{
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "ns"},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "node"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "replicaset"},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "statefulset"},
	{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "pod"},
}

// Learn lists the metadata of namespaces, nodes, ReplicaSets, StatefulSets
// and pods and learns their names and their owners' names. A resource the
// credentials may not list is skipped (Take names it as omitted).
func (a *Anonymizer) Learn(ctx context.Context, c metadata.Interface, pageSize int64) error {
	if pageSize == 0 {
		pageSize = defaultPageSize
	}
	for _, r := range learnOrder {
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.Resource(r.GroupVersionResource).List(ctx, opts)
		})
		p.PageSize = pageSize
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return fmt.Errorf("listing %s: got a %T", r.Resource, obj)
			}
			a.learn(r.prefix, m.Name)
			for _, o := range m.OwnerReferences {
				a.learn(strings.ToLower(o.Kind), o.Name)
			}
			return nil
		})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("learning the names of %s: %w", resourceKey(r.GroupVersionResource), err)
		}
	}
	return nil
}

// learn records that name is a name of the kind prefix says.
func (a *Anonymizer) learn(prefix, name string) {
	if name == "" || prefix == "" {
		return
	}
	if _, ok := a.kinds[name]; !ok {
		a.kinds[name] = prefix
	}
}

// next returns prefix-N, N counting up per prefix, skipping a learnt name
// (a cluster whose nodes are called node-1, node-2, ...).
func (a *Anonymizer) next(prefix string) string {
	for {
		a.count[prefix]++
		r := fmt.Sprintf("%s-%d", prefix, a.count[prefix])
		if _, taken := a.kinds[r]; !taken {
			return r
		}
	}
}

// name returns the new name of a name of the kind prefix says (learnt or
// not: a pod's nodeName may name a node that is gone).
func (a *Anonymizer) name(prefix, s string) string {
	if s == "" {
		return s
	}
	if r, ok := a.renamed[s]; ok {
		return r
	}
	if p, ok := a.kinds[s]; ok {
		prefix = p
	}
	r := a.next(prefix)
	a.renamed[s] = r
	return r
}

// vocabularyKeys are label keys whose values are Kubernetes' own words
// (linux, amd64), which rules and DaemonSets name: kept.
var vocabularyKeys = map[string]bool{
	"kubernetes.io/os": true, "kubernetes.io/arch": true, "beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
}

// value returns the new value of label key's value s: a learnt name's new
// name, else (with labels, but for vocabularyKeys) value-N, else s.
func (a *Anonymizer) value(key, s string) string {
	if r, ok := a.renamed[s]; ok {
		return r
	}
	if p, ok := a.kinds[s]; ok {
		return a.name(p, s)
	}
	if !a.labels || s == "" || vocabularyKeys[key] {
		return s
	}
	return a.name("value", s)
}

// key returns a label key's new name (with labels; well-known keys kept).
func (a *Anonymizer) key(k string) string {
	if !a.labels || wellKnownKey(k) {
		return k
	}
	if r, ok := a.keys[k]; ok {
		return r
	}
	r := a.next("key")
	a.keys[k] = r
	return r
}

// wellKnownKey says whether a label or annotation key is Kubernetes', a
// scheduler's or Berth's own (kept: plugins and users' rules read them by
// name).
func wellKnownKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io", "x-k8s.io", "berth.dev", "berth.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// leakyFields are dropped from every object: addresses, IPs, identities of
// machines, and free text (condition and state messages) that scheduling
// never reads.
var leakyFields = [][]string{
	{"status", "addresses"}, {"status", "podIP"}, {"status", "podIPs"}, {"status", "hostIP"}, {"status", "hostIPs"},
	{"status", "nodeInfo", "machineID"}, {"status", "nodeInfo", "systemUUID"}, {"status", "nodeInfo", "bootID"},
	{"status", "message"}, {"status", "loadBalancer"},
	{"spec", "podCIDR"}, {"spec", "podCIDRs"}, {"spec", "providerID"}, {"spec", "clusterIP"}, {"spec", "clusterIPs"},
	{"spec", "externalIPs"}, {"spec", "loadBalancerIP"}, {"spec", "externalName"}, {"spec", "hostAliases"}, {"spec", "dnsConfig"},
	{"spec", "hostname"}, {"spec", "subdomain"},
}

// Apply renames u's names in place and drops what would identify the
// cluster and scheduling never reads (leakyFields, condition messages,
// annotations but the ones scheduling reads).
func (a *Anonymizer) Apply(u *unstructured.Unstructured) {
	u.SetGenerateName("")
	kept := map[string]string{}
	for k, v := range u.GetAnnotations() {
		if _, ok := keptAnnotations[k]; ok || a.keepAnnotations[k] {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	u.SetAnnotations(kept)
	for _, path := range leakyFields {
		unstructured.RemoveNestedField(u.Object, path...)
	}
	editEach(u, deleting("message"), "status", "conditions")

	// The object's own name (its namespace, a "namespace" field, is walk's).
	switch u.GetKind() {
	case "Namespace":
		u.SetName(a.name("ns", u.GetName()))
	case "Node", "CSINode", "NodeMetrics":
		u.SetName(a.name("node", u.GetName()))
	case "Pod":
		u.SetName(a.name("pod", u.GetName()))
	default:
		if p, ok := a.kinds[u.GetName()]; ok && p == strings.ToLower(u.GetKind()) {
			u.SetName(a.name(p, u.GetName()))
		}
	}
	refs := u.GetOwnerReferences()
	for i := range refs {
		refs[i].Name = a.name(strings.ToLower(refs[i].Kind), refs[i].Name)
	}
	if len(refs) > 0 {
		u.SetOwnerReferences(refs)
	}
	a.walk(u.Object)
}

// walk renames below m: namespace fields (metadata's, a PV's claimRef's),
// nodeName and nominatedNodeName fields (pods', ResourceSlices',
// VolumeAttachments'), CSI node IDs, label maps (keys and values), selector
// requirements (key, values), topologyKey, matchLabelKeys, pod affinity
// terms' namespaces, and node affinity's matchFields on metadata.name.
// Each field is visited once, so nothing is renamed twice.
func (a *Anonymizer) walk(m map[string]any) {
	for k, v := range m {
		switch k {
		case "labels", "matchLabels", "nodeSelector", "selector":
			if lm, ok := v.(map[string]any); ok && allStrings(lm) {
				out := make(map[string]any, len(lm))
				for lk, lv := range lm {
					out[a.key(lk)] = a.value(lk, lv.(string))
				}
				m[k] = out
				continue
			}
		case "matchExpressions", "matchFields":
			if reqs, ok := v.([]any); ok {
				for _, r := range reqs {
					if rm, ok := r.(map[string]any); ok {
						a.requirement(k == "matchFields", rm)
					}
				}
				continue
			}
		case "topologyKey":
			if s, ok := v.(string); ok {
				m[k] = a.key(s)
				continue
			}
		case "matchLabelKeys", "mismatchLabelKeys":
			if ks, ok := v.([]any); ok {
				for i, s := range ks {
					if s, ok := s.(string); ok {
						ks[i] = a.key(s)
					}
				}
				continue
			}
		case "namespaces":
			if ns, ok := v.([]any); ok {
				for i, s := range ns {
					if s, ok := s.(string); ok {
						ns[i] = a.name("ns", s)
					}
				}
				continue
			}
		case "namespace":
			if s, ok := v.(string); ok && s != "" {
				m[k] = a.name("ns", s)
				continue
			}
		case "nodeName", "nominatedNodeName":
			if s, ok := v.(string); ok && s != "" {
				m[k] = a.name("node", s)
				continue
			}
		case "nodeID":
			// A CSINode driver's ID of the node in its storage system.
			if s, ok := v.(string); ok && s != "" {
				m[k] = a.name("nodeid", s)
				continue
			}
		}
		a.descend(v)
	}
}

// requirement renames a selector requirement: a label key and its values,
// or (matchFields) a node's name.
func (a *Anonymizer) requirement(field bool, r map[string]any) {
	key, _ := r["key"].(string)
	values, _ := r["values"].([]any)
	switch {
	case field && key == "metadata.name":
		for i, v := range values {
			if s, ok := v.(string); ok {
				values[i] = a.name("node", s)
			}
		}
	case !field:
		r["key"] = a.key(key)
		for i, v := range values {
			if s, ok := v.(string); ok {
				values[i] = a.value(key, s)
			}
		}
	}
}

// descend walks into maps and lists.
func (a *Anonymizer) descend(v any) {
	switch t := v.(type) {
	case map[string]any:
		a.walk(t)
	case []any:
		for _, e := range t {
			a.descend(e)
		}
	}
}

func allStrings(m map[string]any) bool {
	for _, v := range m {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}
