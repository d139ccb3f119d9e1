package v1

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of LoadAwareArgs.
const (
	DefaultLoadAwareRefreshInterval = 30 * time.Second
	DefaultLoadAwareExpiration      = 3 * time.Minute
	DefaultLoadAwareAnnotationKey   = "berth.io/node-usage"
	DefaultLoadAwareGracePeriod     = 60 * time.Second
)

var (
	defaultLoadAwareThresholds = map[v1.ResourceName]int64{v1.ResourceCPU: 80, v1.ResourceMemory: 85}
	defaultLoadAwareWeights    = map[v1.ResourceName]int64{v1.ResourceCPU: 1, v1.ResourceMemory: 1}
	defaultLoadAwareEstimate   = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("200Mi")}
)

// SetDefaults_LoadAwareArgs fills what is unset. Per-resource maps are
// completed resource by resource, so that `usageThresholds: {cpu: 90}` keeps
// the memory default.
func SetDefaults_LoadAwareArgs(obj *LoadAwareArgs) { //nolint:revive // name required by defaulter-gen
	if obj.Source == "" {
		obj.Source = LoadAwareSourceMetricsAPI
	}
	if obj.MetricsRefreshInterval == nil {
		obj.MetricsRefreshInterval = &metav1.Duration{Duration: DefaultLoadAwareRefreshInterval}
	}
	if obj.MetricsExpiration == nil {
		obj.MetricsExpiration = &metav1.Duration{Duration: DefaultLoadAwareExpiration}
	}
	if obj.UsageThresholds == nil {
		obj.UsageThresholds = map[v1.ResourceName]int64{}
	}
	for r, v := range defaultLoadAwareThresholds {
		if _, ok := obj.UsageThresholds[r]; !ok {
			obj.UsageThresholds[r] = v
		}
	}
	if obj.ResourceWeights == nil {
		obj.ResourceWeights = map[v1.ResourceName]int64{}
	}
	for r, v := range defaultLoadAwareWeights {
		if _, ok := obj.ResourceWeights[r]; !ok {
			obj.ResourceWeights[r] = v
		}
	}
	if obj.DefaultPodEstimate == nil {
		obj.DefaultPodEstimate = v1.ResourceList{}
	}
	for r, q := range defaultLoadAwareEstimate {
		if _, ok := obj.DefaultPodEstimate[r]; !ok {
			obj.DefaultPodEstimate[r] = q.DeepCopy()
		}
	}
	if obj.OnMissingMetrics == "" {
		obj.OnMissingMetrics = LoadAwareMissingMetricsAllow
	}
	if obj.AnnotationKey == "" {
		obj.AnnotationKey = DefaultLoadAwareAnnotationKey
	}
	if obj.EstimateGracePeriod == nil {
		obj.EstimateGracePeriod = &metav1.Duration{Duration: DefaultLoadAwareGracePeriod}
	}
}
