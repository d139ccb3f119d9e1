package coscheduling

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/quantity"
)

// minResourcesGap compares a group's minResources (and minMember pods) with
// the cluster's free capacity: per node, allocatable minus requested, plus
// what the group's own placed members request there (they count toward
// minResources already), summed over nodes. It returns "" when they fit, else
// a message with the numbers. It reads the cycle's snapshot: no API call.
func minResourcesGap(key string, s *spec, nodes []fwk.NodeInfo) string {
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
		var own []fwk.Resource
		for _, pi := range ni.GetPods() {
			if k, ok := groupKeyOf(pi.GetPod()); ok && k == key {
				own = append(own, pi.CalculateResource().Resource)
			}
		}
		for name := range need {
			f := amount(alloc, name) - amount(req, name)
			if name == v1.ResourcePods {
				f = int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()) + len(own))
			} else {
				for _, r := range own {
					f += amount(r, name)
				}
			}
			if f > 0 {
				free[name] += f
			}
		}
	}
	var short []string
	for name, n := range need {
		if free[name] < n {
			short = append(short, fmt.Sprintf("%s %s (free %s)", name, quantity.FromScaled(name, n), quantity.FromScaled(name, free[name])))
		}
	}
	if len(short) == 0 {
		return ""
	}
	slices.Sort(short)
	return fmt.Sprintf("pod group %s: minResources do not fit the cluster's free capacity: needs %s", key, strings.Join(short, ", "))
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
