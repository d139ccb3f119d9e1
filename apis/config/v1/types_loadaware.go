package v1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LoadAwareArgs configures the LoadAware plugin: placement by measured node
// utilisation. See pkg/plugins/loadaware/README.md.
type LoadAwareArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Source of node usage: MetricsAPI (default; metrics.k8s.io NodeMetrics,
	// as metrics-server serves them) or NodeAnnotations.
	Source LoadAwareSource `json:"source,omitempty"`
	// MetricsRefreshInterval is how often the MetricsAPI source lists
	// NodeMetrics. Default 30s, at least 5s.
	MetricsRefreshInterval *metav1.Duration `json:"metricsRefreshInterval,omitempty"`
	// MetricsExpiration is the age after which a node's sample counts as
	// missing. Default 3m; longer than metricsRefreshInterval.
	MetricsExpiration *metav1.Duration `json:"metricsExpiration,omitempty"`
	// UsageThresholds are per-resource limits (cpu, memory) in percent of
	// allocatable that a node's estimated usage may not exceed. Defaults
	// cpu 80, memory 85 for resources not listed; 0 turns a resource's filter off.
	UsageThresholds map[v1.ResourceName]int64 `json:"usageThresholds,omitempty"`
	// ResourceWeights weigh each resource in the score. Defaults cpu 1,
	// memory 1 for resources not listed; 0 leaves a resource out.
	ResourceWeights map[v1.ResourceName]int64 `json:"resourceWeights,omitempty"`
	// DefaultPodEstimate is what a pod that requests nothing of a resource is
	// expected to use. Defaults cpu 250m, memory 200Mi for resources not listed.
	DefaultPodEstimate v1.ResourceList `json:"defaultPodEstimate,omitempty"`
	// OnMissingMetrics is Allow (default: a node without a fresh sample
	// passes the filter) or Reject.
	OnMissingMetrics LoadAwareMissingMetricsPolicy `json:"onMissingMetrics,omitempty"`
	// AnnotationKey is the node annotation read by the NodeAnnotations
	// source. Default berth.io/node-usage.
	AnnotationKey string `json:"annotationKey,omitempty"`
	// EstimateGracePeriod is how long a pod must have been running before a
	// sample is taken for that sample to be trusted to include its usage;
	// until then its estimate is added to the sample (a pod pulling its image
	// uses nothing yet). Default 60s; 0 trusts any sample taken after the pod
	// started.
	EstimateGracePeriod *metav1.Duration `json:"estimateGracePeriod,omitempty"`
}

// LoadAwareSource names where node usage comes from.
type LoadAwareSource string

const (
	// LoadAwareSourceMetricsAPI lists metrics.k8s.io/v1beta1 NodeMetrics.
	LoadAwareSourceMetricsAPI LoadAwareSource = "MetricsAPI"
	// LoadAwareSourceNodeAnnotations reads usage an exporter writes on each node.
	LoadAwareSourceNodeAnnotations LoadAwareSource = "NodeAnnotations"
)

// LoadAwareMissingMetricsPolicy says what Filter does with a node whose usage is unknown.
type LoadAwareMissingMetricsPolicy string

const (
	// LoadAwareMissingMetricsAllow lets the node pass (fail open).
	LoadAwareMissingMetricsAllow LoadAwareMissingMetricsPolicy = "Allow"
	// LoadAwareMissingMetricsReject rejects the node.
	LoadAwareMissingMetricsReject LoadAwareMissingMetricsPolicy = "Reject"
)
