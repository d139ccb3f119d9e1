package validation

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestValidateElasticQuotaArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.ElasticQuotaArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "denied, with resources", mutate: func(a *config.ElasticQuotaArgs) {
			a.NamespacesWithoutQuota = config.NamespacesWithoutQuotaDenied
			a.Resources = []v1.ResourceName{v1.ResourceCPU, "nvidia.com/gpu", v1.ResourcePods}
		}},
		{name: "unknown policy", mutate: func(a *config.ElasticQuotaArgs) { a.NamespacesWithoutQuota = "Ignore" },
			wantErr: []string{`args.namespacesWithoutQuota: Unsupported value: "Ignore"`}},
		{name: "duplicate resource", mutate: func(a *config.ElasticQuotaArgs) { a.Resources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceCPU} },
			wantErr: []string{`args.resources[1]: Duplicate value: "cpu"`}},
		{name: "bad resource name", mutate: func(a *config.ElasticQuotaArgs) { a.Resources = []v1.ResourceName{"nvidia.com/gpu!"} },
			wantErr: []string{`args.resources[0]: Invalid value: "nvidia.com/gpu!"`}},
		{name: "interval too short", mutate: func(a *config.ElasticQuotaArgs) { a.StatusUpdateInterval.Duration = time.Millisecond },
			wantErr: []string{`args.statusUpdateInterval: Invalid value: "1ms": must be between 100ms and 10m0s`}},
		{name: "interval too long", mutate: func(a *config.ElasticQuotaArgs) { a.StatusUpdateInterval.Duration = time.Hour },
			wantErr: []string{`args.statusUpdateInterval: Invalid value: "1h0m0s"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &config.ElasticQuotaArgs{
				NamespacesWithoutQuota: config.NamespacesWithoutQuotaUnlimited,
				StatusUpdateInterval:   metav1.Duration{Duration: 2 * time.Second},
			}
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateElasticQuotaArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}
