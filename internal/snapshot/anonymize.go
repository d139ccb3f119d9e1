package snapshot

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"
)

// Anonymizer renames the names of namespaces, nodes, pods and the pods'
// controllers (ReplicaSets, StatefulSets, Jobs, ... and their owners), and
// with labels also label keys and values, consistently: a name is replaced
// wherever it occurs as a whole string (a pod's nodeName, the hostname
// label, a PV's node affinity, a selector), so every equality the
// scheduler tests holds as before. Well-known label keys (kubernetes.io,
// k8s.io, x-k8s.io, berth.dev, and berth.io for LoadAware's default
// annotation) are kept. The names are learnt first, from a metadata-only
// listing, so that a reference written before its object is renamed too.
type Anonymizer struct {
	labels bool
	// names maps an original string to its replacement.
	names map[string]string
	// keys maps a label key to its replacement (with labels).
	keys  map[string]string
	count map[string]int
}

// NewAnonymizer returns an anonymizer that knows no names yet (see Learn);
// labels says whether label keys and values are renamed too.
func NewAnonymizer(labels bool) *Anonymizer {
	return &Anonymizer{labels: labels, names: map[string]string{}, keys: map[string]string{}, count: map[string]int{}}
}

// What says what the anonymizer renames, for the snapshot's header.
func (a *Anonymizer) What() string {
	if a.labels {
		return "names,labels"
	}
	return "names"
}

// learnOrder is the order names are learnt in: a string that is both a
// namespace's and a pod's name is renamed as the namespace.
var learnOrder = []schema.GroupVersionResource{
	{Version: "v1", Resource: "namespaces"},
	{Version: "v1", Resource: "nodes"},
	{Group: "apps", Version: "v1", Resource: "replicasets"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Version: "v1", Resource: "pods"},
}

// Learn lists the metadata of namespaces, nodes, ReplicaSets,
// StatefulSets and pods and learns their names, their owners' names and
// (with labels) their labels.
func (a *Anonymizer) Learn(ctx context.Context, c metadata.Interface, pageSize int64) error {
	for _, gvr := range learnOrder {
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.Resource(gvr).List(ctx, opts)
		})
		p.PageSize = pageSize
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return fmt.Errorf("listing %s: got a %T", gvr.Resource, obj)
			}
			a.learn(gvr.Resource, &m.ObjectMeta)
			return nil
		})
		if err != nil {
			return fmt.Errorf("learning the names of %s: %w", resourceKey(gvr), err)
		}
	}
	return nil
}

// learn records one object's names.
func (a *Anonymizer) learn(resource string, m *metav1.ObjectMeta) {
	prefix := map[string]string{"namespaces": "ns", "nodes": "node", "pods": "pod", "replicasets": "replicaset", "statefulsets": "statefulset"}[resource]
	a.name(prefix, m.Name)
	for _, o := range m.OwnerReferences {
		a.name(strings.ToLower(o.Kind), o.Name)
	}
	if !a.labels {
		return
	}
	for k, v := range m.Labels {
		if !wellKnownKey(k) {
			if _, ok := a.keys[k]; !ok {
				a.count["key"]++
				a.keys[k] = fmt.Sprintf("key-%d", a.count["key"])
			}
		}
		a.name("value", v)
	}
}

// name gives s a replacement prefix-N unless it has one.
func (a *Anonymizer) name(prefix, s string) {
	if s == "" || prefix == "" {
		return
	}
	if _, ok := a.names[s]; ok {
		return
	}
	a.count[prefix]++
	a.names[s] = fmt.Sprintf("%s-%d", prefix, a.count[prefix])
}

// wellKnownKey says whether a label key is Kubernetes' or a scheduler's own
// (kept: plugins and users' rules read them by name).
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

// labelMaps are the keys whose value is a map from label keys to values.
var labelMaps = map[string]bool{"labels": true, "matchLabels": true, "nodeSelector": true, "selector": true}

// keptFields hold strings that are never names.
var keptFields = map[string]bool{"apiVersion": true, "kind": true, "uid": true, "resourceVersion": true}

// Apply renames u's names in place. It also drops what would identify the
// cluster and that scheduling never reads: addresses and IPs, the node's
// machine and boot IDs, and annotations other than well-known ones (a
// user's annotation may hold anything; Explain's results name nodes inside
// a JSON string, so they go too).
func (a *Anonymizer) Apply(u *unstructured.Unstructured) {
	u.SetGenerateName("")
	if ann := u.GetAnnotations(); len(ann) > 0 {
		kept := map[string]string{}
		for k, v := range ann {
			if wellKnownKey(k) && !strings.HasPrefix(k, "explain.berth.dev/") {
				kept[k] = v
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		u.SetAnnotations(kept)
	}
	for _, path := range [][]string{{"status", "addresses"}, {"status", "podIP"}, {"status", "podIPs"}, {"status", "hostIP"}, {"status", "hostIPs"},
		{"status", "nodeInfo", "machineID"}, {"status", "nodeInfo", "systemUUID"}, {"status", "nodeInfo", "bootID"},
		{"spec", "podCIDR"}, {"spec", "podCIDRs"}, {"spec", "providerID"}, {"spec", "clusterIP"}, {"spec", "clusterIPs"}} {
		unstructured.RemoveNestedField(u.Object, path...)
	}
	a.walk(u.Object)
}

// walk renames in m: string values that are learnt names and, in label
// maps, label keys.
func (a *Anonymizer) walk(m map[string]any) {
	for k, v := range m {
		if keptFields[k] {
			continue
		}
		if a.labels && labelMaps[k] {
			if lm, ok := v.(map[string]any); ok && allStrings(lm) {
				out := make(map[string]any, len(lm))
				for lk, lv := range lm {
					if nk, ok := a.keys[lk]; ok {
						lk = nk
					}
					out[lk] = a.replace(lv.(string))
				}
				m[k] = out
				continue
			}
		}
		m[k] = a.value(v)
	}
}

// value renames within one JSON value.
func (a *Anonymizer) value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		a.walk(t)
	case []any:
		for i := range t {
			t[i] = a.value(t[i])
		}
	case string:
		return a.replace(t)
	}
	return v
}

// replace returns s's replacement: a learnt name's, or (with labels) a
// label key's where a key stands as a string (matchExpressions' key,
// topologyKey).
func (a *Anonymizer) replace(s string) string {
	if r, ok := a.names[s]; ok {
		return r
	}
	if r, ok := a.keys[s]; ok {
		return r
	}
	return s
}

func allStrings(m map[string]any) bool {
	for _, v := range m {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}
