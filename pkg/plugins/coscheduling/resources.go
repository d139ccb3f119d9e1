package coscheduling

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/quantity"
)

// minResourcesGap compares a group's minResources (and minMember pods) with
// the cluster's free capacity: per node, allocatable minus requested, summed
// over nodes. It is asked only while none of the group's members is placed,
// so none of them is among the requested. It returns "" when they fit, else a
// message with the numbers and what is lacking by resource. It reads the
// cycle's snapshot (no API call), one pass over the nodes, not their pods.
func minResourcesGap(key string, s *spec, nodes []fwk.NodeInfo) (string, map[v1.ResourceName]int64) {
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
		for name := range need {
			f := amount(alloc, name) - amount(req, name)
			if name == v1.ResourcePods {
				f = int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
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
// pod deleted from a node frees its requests and a pod slot, a node added
// its allocatable, a node updated its allocatable's change (labels and
// taints free nothing: minResources count every node). id names the event.
func freedBy(oldObj, newObj any) (id string, freed map[v1.ResourceName]int64, ok bool) {
	if newObj == nil {
		p, isPod := oldObj.(*v1.Pod)
		if !isPod {
			return "", nil, false
		}
		if p.Spec.NodeName == "" {
			// A pending pod's nomination changed (sent as an assigned pod's
			// deletion): it held no room.
			return "pod/" + string(p.UID), nil, true
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
		// A shrink counts against what was freed (a device plugin that
		// deregisters and registers again nets to nothing).
		for name, q := range o.Status.Allocatable {
			freed[name] -= quantity.Scaled(name, q)
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
