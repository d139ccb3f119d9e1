package offline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// NodeCopies asks for Count copies of the snapshot's node Template, each
// with Labels set (a new pool of that shape: "would 3 more of these place
// my pending pods?").
type NodeCopies struct {
	Template string
	Count    int
	Labels   map[string]string
}

// ParseNodeCopies reads --add-nodes' TEMPLATE=N[:KEY=VALUE,...].
func ParseNodeCopies(s string) (NodeCopies, error) {
	spec, labels, _ := strings.Cut(s, ":")
	template, count, ok := strings.Cut(spec, "=")
	var n NodeCopies
	if _, err := fmt.Sscanf(count, "%d", &n.Count); !ok || template == "" || err != nil || n.Count < 1 || fmt.Sprint(n.Count) != count {
		return n, fmt.Errorf("%q: want TEMPLATE=N[:KEY=VALUE,...], N a number of copies, at least 1", s)
	}
	n.Template = template
	if labels != "" {
		n.Labels = map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return n, fmt.Errorf("%q: label %q is not KEY=VALUE", s, kv)
			}
			n.Labels[k] = v
		}
	}
	return n, nil
}

// copyName names the i-th copy of template (from 1).
func copyName(template string, i int) string { return fmt.Sprintf("%s-sim-%d", template, i) }

// templateDaemon is a DaemonSet's pod on a template node; Again: the simulation
// places it again (replace mode), and so its copies.
type templateDaemon struct {
	Pod   *v1.Pod
	Again bool
}

// nodeCopy is template as a new node named name would join at joined
// (zero: the template's creation time): the same shape (capacity,
// allocatable, labels, taints, conditions), no images pulled, no volumes
// attached, no addresses, not cordoned, no annotations (a usage sample of
// the template's is not the copy's), with labels set.
func nodeCopy(template *v1.Node, name string, labels map[string]string, joined time.Time) *v1.Node {
	n := template.DeepCopy()
	n.Name, n.UID, n.ResourceVersion = name, types.UID("simulated-node-"+name), "1"
	if !joined.IsZero() {
		n.CreationTimestamp = metav1.NewTime(joined)
	}
	n.Annotations = nil
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnschedulable })
	n.Labels = maps.Clone(n.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if _, ok := n.Labels[v1.LabelHostname]; ok {
		n.Labels[v1.LabelHostname] = name
	}
	maps.Copy(n.Labels, labels)
	n.Spec.ProviderID, n.Spec.PodCIDR, n.Spec.PodCIDRs, n.Spec.Unschedulable = "", "", nil, false
	n.Status.Addresses, n.Status.Images, n.Status.VolumesAttached, n.Status.VolumesInUse = nil, nil, nil, nil
	return n
}

// reshape applies the plan's capacity changes to the loaded objects (the
// copies Plan.AddNodes asks for, the nodes Plan.RemoveNodes names): the
// removed nodes and what belongs to them (their CSINodes, node-local
// ResourceSlices, NodeMetrics) are dropped; each copy of a template gets
// the template's node, CSINode and node-local ResourceSlices, and a copy
// of each of its DaemonSet pods (daemons, by template: the DaemonSet
// controller would run one on the new node), bound to the copy, or
// unbound to be placed again like its original. It returns the objects,
// the names of the nodes added, and the pod copies to place.
func reshape(kube, metrics []runtime.Object, copies []NodeCopies, removed map[string]bool, daemons map[string][]templateDaemon, joined time.Time) ([]runtime.Object, []runtime.Object, []string, []*v1.Pod) {
	if len(copies) == 0 && len(removed) == 0 {
		return kube, metrics, nil, nil
	}
	nodes := map[string]*v1.Node{}
	csiNodes := map[string]*storagev1.CSINode{}
	nodeSlices := map[string][]*resourcev1.ResourceSlice{}
	taken := map[string]bool{}
	var kept []runtime.Object
	var again []*v1.Pod
	for _, obj := range kube {
		switch o := obj.(type) {
		case *v1.Node:
			nodes[o.Name], taken[o.Name] = o, true
			if removed[o.Name] {
				continue
			}
		case *storagev1.CSINode:
			csiNodes[o.Name] = o
			if removed[o.Name] {
				continue
			}
		case *resourcev1.ResourceSlice:
			if o.Spec.NodeName != nil {
				nodeSlices[*o.Spec.NodeName] = append(nodeSlices[*o.Spec.NodeName], o)
				if removed[*o.Spec.NodeName] {
					continue
				}
			}
		}
		kept = append(kept, obj)
	}
	metrics = slices.DeleteFunc(metrics, func(obj runtime.Object) bool {
		m, ok := obj.(*metricsv1beta1.NodeMetrics)
		return ok && removed[m.Name]
	})
	var added []string
	for _, c := range copies {
		template := nodes[c.Template]
		for i, made := 1, 0; made < c.Count; i++ {
			name := copyName(c.Template, i)
			if taken[name] {
				continue
			}
			taken[name] = true
			made++
			added = append(added, name)
			kept = append(kept, nodeCopy(template, name, c.Labels, joined))
			if cn, ok := csiNodes[c.Template]; ok {
				cc := cn.DeepCopy()
				cc.Name, cc.UID, cc.ResourceVersion, cc.OwnerReferences = name, types.UID("simulated-csinode-"+name), "1", nil
				kept = append(kept, cc)
			}
			for _, s := range nodeSlices[c.Template] {
				sc := s.DeepCopy()
				sc.Name, sc.UID, sc.ResourceVersion, sc.OwnerReferences = s.Name+"-"+name, types.UID("simulated-slice-"+s.Name+"-"+name), "1", nil
				sc.Spec.NodeName = &name
				if sc.Spec.Pool.Name == c.Template {
					sc.Spec.Pool.Name = name
				} else {
					sc.Spec.Pool.Name += "-" + name
				}
				kept = append(kept, sc)
			}
			for _, d := range daemons[c.Template] {
				pc := d.Pod.DeepCopy()
				pc.Name, pc.UID, pc.ResourceVersion = d.Pod.Name+"-"+name, types.UID("simulated-pod-"+d.Pod.Name+"-"+name), "1"
				pc.Spec.NodeName = name
				pinTo(pc, c.Template, name)
				if d.Again {
					unbind(pc)
					again = append(again, pc)
					continue
				}
				kept = append(kept, pc)
			}
		}
	}
	return kept, metrics, added, again
}

// pinTo moves p's node affinity on from (a DaemonSet pod's metadata.name
// match) to to.
func pinTo(p *v1.Pod, from, to string) {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	for i := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		t := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]
		for j := range t.MatchFields {
			for k, v := range t.MatchFields[j].Values {
				if t.MatchFields[j].Key == "metadata.name" && v == from {
					t.MatchFields[j].Values[k] = to
				}
			}
		}
	}
}
