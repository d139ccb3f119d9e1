// Package fitoptions gives plugins that ask upstream's noderesources.Fits
// what a node lacks (Explain's nearest nodes, Coscheduling's preemption dry
// run) the options the scheduler's own NodeResourcesFit uses, from the
// process's feature gates: one place to follow when upstream adds a field.
package fitoptions

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
)

// FromGates returns the scheduler's features from the process's feature
// gates and noderesources' request options for them.
func FromGates() (feature.Features, noderesources.ResourceRequestsOptions) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	return fts, noderesources.ResourceRequestsOptions{
		EnablePodLevelResources:                            fts.EnablePodLevelResources,
		EnableDRAExtendedResource:                          fts.EnableDRAExtendedResource,
		EnableDRANodeAllocatableResources:                  fts.EnableDRANodeAllocatableResources,
		EnableInPlacePodVerticalScalingSchedulerPreemption: fts.EnableInPlacePodVerticalScalingSchedulerPreemption,
	}
}
