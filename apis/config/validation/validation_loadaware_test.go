package validation

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func validLoadAware() *config.LoadAwareArgs {
	return &config.LoadAwareArgs{
		Source:                 config.LoadAwareSourceMetricsAPI,
		MetricsRefreshInterval: metav1.Duration{Duration: 30 * time.Second},
		MetricsExpiration:      metav1.Duration{Duration: 3 * time.Minute},
		UsageThresholds:        map[v1.ResourceName]int64{v1.ResourceCPU: 80, v1.ResourceMemory: 85},
		ResourceWeights:        map[v1.ResourceName]int64{v1.ResourceCPU: 1, v1.ResourceMemory: 1},
		DefaultPodEstimate:     v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		OnMissingMetrics:       config.LoadAwareMissingMetricsAllow,
		AnnotationKey:          "berth.io/node-usage",
		EstimateGracePeriod:    metav1.Duration{Duration: time.Minute},
	}
}

func TestValidateLoadAwareArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.LoadAwareArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "annotations source", mutate: func(a *config.LoadAwareArgs) { a.Source = config.LoadAwareSourceNodeAnnotations }},
		{name: "unknown source", mutate: func(a *config.LoadAwareArgs) { a.Source = "Prometheus" }, wantErr: []string{`args.source: Unsupported value: "Prometheus"`}},
		{name: "refresh too fast", mutate: func(a *config.LoadAwareArgs) { a.MetricsRefreshInterval.Duration = time.Second },
			wantErr: []string{"args.metricsRefreshInterval: Invalid value: \"1s\": must be at least 5s"}},
		{name: "expiration not longer than refresh", mutate: func(a *config.LoadAwareArgs) { a.MetricsExpiration.Duration = 30 * time.Second },
			wantErr: []string{"args.metricsExpiration: Invalid value"}},
		{name: "threshold over 100", mutate: func(a *config.LoadAwareArgs) { a.UsageThresholds[v1.ResourceCPU] = 101 },
			wantErr: []string{"args.usageThresholds[cpu]: Invalid value: 101"}},
		{name: "unsupported resource", mutate: func(a *config.LoadAwareArgs) { a.ResourceWeights["nvidia.com/gpu"] = 1 },
			wantErr: []string{`args.resourceWeights[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu"`}},
		{name: "all weights zero", mutate: func(a *config.LoadAwareArgs) {
			a.ResourceWeights = map[v1.ResourceName]int64{v1.ResourceCPU: 0, v1.ResourceMemory: 0}
		}, wantErr: []string{"args.resourceWeights: Invalid value"}},
		{name: "negative estimate", mutate: func(a *config.LoadAwareArgs) { a.DefaultPodEstimate[v1.ResourceMemory] = resource.MustParse("-1") },
			wantErr: []string{"args.defaultPodEstimate[memory]: Invalid value"}},
		{name: "bad annotation key", mutate: func(a *config.LoadAwareArgs) {
			a.Source = config.LoadAwareSourceNodeAnnotations
			a.AnnotationKey = "not a key"
		}, wantErr: []string{"args.annotationKey: Invalid value"}},
		{name: "negative grace period", mutate: func(a *config.LoadAwareArgs) { a.EstimateGracePeriod.Duration = -time.Second },
			wantErr: []string{`args.estimateGracePeriod: Invalid value: "-1s": must not be negative`}},
		{name: "unknown missing-metrics policy", mutate: func(a *config.LoadAwareArgs) { a.OnMissingMetrics = "Panic" },
			wantErr: []string{`args.onMissingMetrics: Unsupported value: "Panic"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := validLoadAware()
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateLoadAwareArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}

func TestValidateConfirmBinderArgs(t *testing.T) {
	valid := func() *config.ConfirmBinderArgs {
		return &config.ConfirmBinderArgs{Confirm: config.ConfirmWhenTight, TightHeadroomPercent: 10,
			ConfirmTimeout: metav1.Duration{Duration: 5 * time.Second}, OnConfirmError: config.ConfirmErrorRequeue}
	}
	tests := []struct {
		name    string
		mutate  func(*config.ConfirmBinderArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "always and bind on error", mutate: func(a *config.ConfirmBinderArgs) {
			a.Confirm, a.OnConfirmError = config.ConfirmAlways, config.ConfirmErrorBind
		}},
		{name: "unknown mode", mutate: func(a *config.ConfirmBinderArgs) { a.Confirm = "Sometimes" }, wantErr: []string{`args.confirm: Unsupported value: "Sometimes"`}},
		{name: "headroom over 100", mutate: func(a *config.ConfirmBinderArgs) { a.TightHeadroomPercent = 150 }, wantErr: []string{"args.tightHeadroomPercent: Invalid value: 150"}},
		{name: "zero timeout", mutate: func(a *config.ConfirmBinderArgs) { a.ConfirmTimeout.Duration = 0 }, wantErr: []string{"args.confirmTimeout: Invalid value"}},
		{name: "unknown error policy", mutate: func(a *config.ConfirmBinderArgs) { a.OnConfirmError = "Retry" }, wantErr: []string{`args.onConfirmError: Unsupported value: "Retry"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := valid()
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateConfirmBinderArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}

func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want errors %q, got none", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}
