package coscheduling

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/quantity"
)

// minResourcesGap compares a group's minResources (and minMember pods) with
// the cluster's free capacity: per node, allocatable minus requested, plus
// what the group's own placed members request there (they count toward
// minResources already), summed over nodes. It returns "" when they fit, else
// a message with the numbers and what is lacking by resource. It reads the
// cycle's snapshot (no API call) and walks the pods of the nodes in own only
// (the nodes of the group's placed members): O(nodes + their pods).
func minResourcesGap(key string, s *spec, nodes []fwk.NodeInfo, own sets.Set[string]) (string, map[v1.ResourceName]int64) {
	need := make(map[v1.ResourceName]int64, len(s.minResources)+1)
	for name, q := range s.minResources {
		need[name] = quantity.Scaled(name, q)
	}
	if _, ok := need[v1.ResourcePods]; !ok {
		need[v1.ResourcePods] = int64(s.minMember)
	}
	free := make(map[v1.ResourceName]int64, len(need))
	for _, ni := range nodes {
		if ni == nil || ni.Node() == nil {
			continue
		}
		alloc, req := ni.GetAllocatable(), ni.GetRequested()
		var mine []fwk.Resource
		if own.Has(ni.Node().Name) {
			for _, pi := range ni.GetPods() {
				if k, ok := groupKeyOf(pi.GetPod()); ok && k == key {
					mine = append(mine, pi.CalculateResource().Resource)
				}
			}
		}
		for name := range need {
			f := amount(alloc, name) - amount(req, name)
			if name == v1.ResourcePods {
				f = int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()) + len(mine))
			} else {
				for _, r := range mine {
					f += amount(r, name)
				}
			}
			if f > 0 {
				free[name] += f
			}
		}
	}
	var short []string
	gap := map[v1.ResourceName]int64{}
	for name, n := range need {
		if free[name] < n {
			short = append(short, fmt.Sprintf("%s %s (free %s)", name, quantity.FromScaled(name, n), quantity.FromScaled(name, free[name])))
			gap[name] = n - free[name]
		}
	}
	if len(short) == 0 {
		return "", nil
	}
	slices.Sort(short)
	return fmt.Sprintf("pod group %s: minResources do not fit the cluster's free capacity: needs %s", key, strings.Join(short, ", ")), gap
}

// freedBy says what a cluster event may free for a gang's minResources: a
// pod deleted frees its requests and a pod slot, a node added its
// allocatable, a node updated its allocatable's growth (labels and taints
// free nothing: minResources count every node). id names the event.
func freedBy(oldObj, newObj any) (id string, freed map[v1.ResourceName]int64, ok bool) {
	if newObj == nil {
		p, isPod := oldObj.(*v1.Pod)
		if !isPod {
			return "", nil, false
		}
		freed = map[v1.ResourceName]int64{v1.ResourcePods: 1}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			freed[name] += quantity.Scaled(name, q)
		}
		return "pod/" + string(p.UID), freed, true
	}
	n, isNode := newObj.(*v1.Node)
	if !isNode {
		return "", nil, false
	}
	freed = map[v1.ResourceName]int64{}
	for name, q := range n.Status.Allocatable {
		freed[name] = quantity.Scaled(name, q)
	}
	if o, was := oldObj.(*v1.Node); was && o != nil {
		for name, q := range o.Status.Allocatable {
			freed[name] -= quantity.Scaled(name, q)
		}
		for name, v := range freed {
			if v < 0 {
				freed[name] = 0
			}
		}
	}
	return "node/" + n.Name + "/" + n.ResourceVersion, freed, true
}

// amount reads one resource of r in the scheduler's units.
func amount(r fwk.Resource, name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	default:
		return r.GetScalarResources()[name]
	}
}
