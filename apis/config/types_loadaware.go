package config

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LoadAwareArgs configures the LoadAware plugin: placement by measured node
// utilisation.
type LoadAwareArgs struct {
	metav1.TypeMeta

	// Source of node usage.
	Source LoadAwareSource
	// MetricsRefreshInterval is how often the MetricsAPI source lists NodeMetrics.
	MetricsRefreshInterval metav1.Duration
	// MetricsExpiration is the age after which a node's sample counts as missing.
	MetricsExpiration metav1.Duration
	// UsageThresholds are per-resource limits in percent of allocatable; 0 turns a resource's filter off.
	UsageThresholds map[v1.ResourceName]int64
	// ResourceWeights weigh each resource in the score.
	ResourceWeights map[v1.ResourceName]int64
	// DefaultPodEstimate is the estimate of a pod (per resource) that requests nothing.
	DefaultPodEstimate v1.ResourceList
	// OnMissingMetrics says what Filter does with a node without a fresh sample.
	OnMissingMetrics LoadAwareMissingMetricsPolicy
	// AnnotationKey is the node annotation the NodeAnnotations source reads.
	AnnotationKey string
	// EstimateGracePeriod is how long a pod must have been running before a
	// sample for the sample to include it; until then its estimate counts.
	EstimateGracePeriod metav1.Duration
}

// LoadAwareSource names where node usage comes from.
type LoadAwareSource string

const (
	// LoadAwareSourceMetricsAPI lists metrics.k8s.io/v1beta1 NodeMetrics (metrics-server).
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
