package offline

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// NodeUse is a node's requests against its allocatable when a simulation
// ends, as the scheduler's cache counts them (every bound pod, whoever
// scheduled it).
type NodeUse struct {
	Node string `json:"node"`
	// CPU in millicores, memory in bytes.
	CPURequested      int64 `json:"cpuRequestedMilli"`
	CPUAllocatable    int64 `json:"cpuAllocatableMilli"`
	MemoryRequested   int64 `json:"memoryRequestedBytes"`
	MemoryAllocatable int64 `json:"memoryAllocatableBytes"`
	Pods              int   `json:"pods"`
}

// QuotaUse is an ElasticQuota's namespace when a simulation ends: what its
// bound pods request (as ElasticQuota counts it: the scheduler's requests
// and one "pods" per pod, for the resources the quota names), and how much
// of that is above min — borrowed from other namespaces' idle min.
type QuotaUse struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Min       v1.ResourceList `json:"min,omitempty"`
	Max       v1.ResourceList `json:"max,omitempty"`
	Used      v1.ResourceList `json:"used"`
	Borrowed  v1.ResourceList `json:"borrowed,omitempty"`
}

// GangUse is a scheduler-plugins PodGroup when a simulation ends: how many
// of its members are bound against the minMember it needs.
type GangUse struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	MinMember int32  `json:"minMember"`
	Bound     int    `json:"bound"`
}

// Fits says whether the gang has the members it needs bound.
func (g GangUse) Fits() bool { return int32(g.Bound) >= g.MinMember }

// totals fills sim's per-node, per-quota and per-gang totals from the
// scheduler's cache (settled: nothing assumed) and the snapshot's quotas and
// groups.
func totals(sim *Simulation, nodes map[string]*framework.NodeInfo, quotas []*schedv1alpha1.ElasticQuota, groups []*schedv1alpha1.PodGroup) {
	used := map[string]v1.ResourceList{}
	bound := map[string]int{} // namespace/group
	for _, q := range quotas {
		used[q.Namespace] = v1.ResourceList{}
	}
	for name, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		req, alloc := ni.GetRequested(), ni.GetAllocatable()
		sim.Nodes = append(sim.Nodes, NodeUse{Node: name,
			CPURequested: req.GetMilliCPU(), CPUAllocatable: alloc.GetMilliCPU(),
			MemoryRequested: req.GetMemory(), MemoryAllocatable: alloc.GetMemory(),
			Pods: len(ni.GetPods())})
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" {
				bound[p.Namespace+"/"+g]++
			}
			u, ok := used[p.Namespace]
			if !ok {
				continue
			}
			for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
				sum := u[r]
				sum.Add(q)
				u[r] = sum
			}
			pods := u[v1.ResourcePods]
			pods.Add(*resource.NewQuantity(1, resource.DecimalSI))
			u[v1.ResourcePods] = pods
		}
	}
	sort.Slice(sim.Nodes, func(i, j int) bool { return sim.Nodes[i].Node < sim.Nodes[j].Node })
	for _, q := range quotas {
		qu := QuotaUse{Namespace: q.Namespace, Name: q.Name, Min: q.Spec.Min, Max: q.Spec.Max, Used: v1.ResourceList{}}
		names := map[v1.ResourceName]bool{}
		for r := range q.Spec.Min {
			names[r] = true
		}
		for r := range q.Spec.Max {
			names[r] = true
		}
		for r := range names {
			u := used[q.Namespace][r]
			qu.Used[r] = u
			// A resource max names and min does not has a min of 0.
			if m := q.Spec.Min[r]; u.Cmp(m) > 0 {
				if qu.Borrowed == nil {
					qu.Borrowed = v1.ResourceList{}
				}
				b := u.DeepCopy()
				b.Sub(m)
				qu.Borrowed[r] = b
			}
		}
		sim.Quotas = append(sim.Quotas, qu)
	}
	sort.Slice(sim.Quotas, func(i, j int) bool { return sim.Quotas[i].Namespace < sim.Quotas[j].Namespace })
	for _, g := range groups {
		sim.Gangs = append(sim.Gangs, GangUse{Namespace: g.Namespace, Name: g.Name, MinMember: g.Spec.MinMember, Bound: bound[g.Namespace+"/"+g.Name]})
	}
	sort.Slice(sim.Gangs, func(i, j int) bool {
		a, b := sim.Gangs[i], sim.Gangs[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
}
