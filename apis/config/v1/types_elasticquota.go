package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ElasticQuotaArgs configures the ElasticQuota plugin: namespace quotas read
// from scheduler-plugins' ElasticQuota objects (scheduling.x-k8s.io/v1alpha1),
// with a guaranteed min, borrowing up to max, and reclaim by preemption.
// See pkg/plugins/elasticquota/README.md.
type ElasticQuotaArgs struct {
	metav1.TypeMeta `json:",inline"`

	// NamespacesWithoutQuota is Unlimited (default: pods of a namespace
	// without an ElasticQuota are not limited by this plugin) or Denied (they
	// stay pending until their namespace has a quota).
	NamespacesWithoutQuota NamespacesWithoutQuotaPolicy `json:"namespacesWithoutQuota,omitempty"`
	// Resources limits accounting to these resources (for example cpu,
	// memory, nvidia.com/gpu, pods). Default: every resource a quota names in
	// its min or max.
	Resources []corev1.ResourceName `json:"resources,omitempty"`
	// StatusUpdateInterval is how often, at most, the leader writes a changed
	// status.used of a quota. Default 2s; 100ms to 10m.
	StatusUpdateInterval *metav1.Duration `json:"statusUpdateInterval,omitempty"`
}

// NamespacesWithoutQuotaPolicy says what ElasticQuota does with pods of a
// namespace that has no ElasticQuota.
type NamespacesWithoutQuotaPolicy string

const (
	// NamespacesWithoutQuotaUnlimited leaves those pods alone.
	NamespacesWithoutQuotaUnlimited NamespacesWithoutQuotaPolicy = "Unlimited"
	// NamespacesWithoutQuotaDenied keeps those pods pending.
	NamespacesWithoutQuotaDenied NamespacesWithoutQuotaPolicy = "Denied"
)
