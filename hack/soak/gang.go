package main

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Gangs of both kinds the soak runs: scheduler-plugins' PodGroups
// (Coscheduling; members labelled scheduling.x-k8s.io/pod-group) and
// Kubernetes' own (GangScheduling under the GenericWorkload gate; members
// name a scheduling.k8s.io/v1beta1 PodGroup in spec.schedulingGroup). The
// gang invariants (2: never partial, liveness) judge both alike.

// nativePrefix marks a native group's name in a gang key.
const nativePrefix = "native:"

// gangKey is the pod's gang, namespace/name (a native group's name with
// nativePrefix), or "" for a pod of none.
func gangKey(p *v1.Pod) string {
	if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" {
		return p.Namespace + "/" + g
	}
	if nativeMember(p) {
		return p.Namespace + "/" + nativePrefix + *p.Spec.SchedulingGroup.PodGroupName
	}
	return ""
}

// nativeMember: the pod is a Kubernetes PodGroup's member (its group's
// cycle schedules it).
func nativeMember(p *v1.Pod) bool {
	sg := p.Spec.SchedulingGroup
	return sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != ""
}

// gang is what the invariants need of a group of either kind.
type gang struct {
	key, namespace, resourceVersion string
	// min: minMember, or a native group's gang minCount.
	min          int
	minResources v1.ResourceList
}

func sgGang(pg *schedv1alpha1.PodGroup) gang {
	return gang{key: pg.Namespace + "/" + pg.Name, namespace: pg.Namespace, resourceVersion: pg.ResourceVersion,
		min: int(pg.Spec.MinMember), minResources: pg.Spec.MinResources}
}

// nativeGang is a native group's gang; ok is false for a group without a
// gang policy (its pods are scheduled one by one).
func nativeGang(pg *schedulingv1beta1.PodGroup) (gang, bool) {
	g := pg.Spec.SchedulingPolicy.Gang
	if g == nil {
		return gang{}, false
	}
	return gang{key: pg.Namespace + "/" + nativePrefix + pg.Name, namespace: pg.Namespace, resourceVersion: pg.ResourceVersion,
		min: int(g.MinCount)}, true
}

// gangs lists the groups of both kinds.
func (w *watcher) gangs() []gang {
	var out []gang
	for _, o := range w.groups.List() {
		out = append(out, sgGang(o.(*schedv1alpha1.PodGroup)))
	}
	for _, o := range w.nativeGroups.List() {
		if g, ok := nativeGang(o.(*schedulingv1beta1.PodGroup)); ok {
			out = append(out, g)
		}
	}
	return out
}

// gangOf is the pod's group, if the pod is a member and the group exists.
func (w *watcher) gangOf(p *v1.Pod) (gang, bool) {
	if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" {
		o, ok, _ := w.groups.GetByKey(p.Namespace + "/" + g)
		if !ok {
			return gang{}, false
		}
		return sgGang(o.(*schedv1alpha1.PodGroup)), true
	}
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		o, ok, _ := w.nativeGroups.GetByKey(p.Namespace + "/" + *sg.PodGroupName)
		if !ok {
			return gang{}, false
		}
		return nativeGang(o.(*schedulingv1beta1.PodGroup))
	}
	return gang{}, false
}
