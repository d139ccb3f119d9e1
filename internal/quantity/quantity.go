// Package quantity converts resource quantities to and from the integers the
// scheduler counts in: milli-units for cpu, units (bytes, counts) for the rest.
// Plugins that do arithmetic on requests share it, so that a number they
// print reads as the API would write it.
package quantity

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// Scaled is q in the scheduler's units for resource name: milli-units for
// cpu, units for the rest.
func Scaled(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// FromScaled turns a Scaled value back into a Quantity in the format the API
// uses for the resource: decimal for cpu and counts, binary for memory,
// ephemeral storage and huge pages.
func FromScaled(name v1.ResourceName, v int64) *resource.Quantity {
	switch {
	case name == v1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI)
	case name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage || v1helper.IsHugePageResourceName(name):
		return resource.NewQuantity(v, resource.BinarySI)
	default:
		return resource.NewQuantity(v, resource.DecimalSI)
	}
}
