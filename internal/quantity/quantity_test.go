package quantity

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   v1.ResourceName
		in     string
		scaled int64
		out    string
	}{
		{v1.ResourceCPU, "1500m", 1500, "1500m"},
		{v1.ResourceCPU, "2", 2000, "2"},
		{v1.ResourceMemory, "1Gi", 1 << 30, "1Gi"},
		{v1.ResourceEphemeralStorage, "10Gi", 10 << 30, "10Gi"},
		{"hugepages-2Mi", "4Mi", 4 << 20, "4Mi"},
		{v1.ResourcePods, "110", 110, "110"},
		{"nvidia.com/gpu", "2", 2, "2"},
	} {
		got := Scaled(tc.name, resource.MustParse(tc.in))
		if got != tc.scaled {
			t.Errorf("Scaled(%s, %s) = %d, want %d", tc.name, tc.in, got, tc.scaled)
		}
		if s := FromScaled(tc.name, got).String(); s != tc.out {
			t.Errorf("FromScaled(%s, %d) = %s, want %s", tc.name, got, s, tc.out)
		}
	}
}
