package config

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ElasticQuotaArgs configures the ElasticQuota plugin: namespace quotas
// (scheduler-plugins' ElasticQuota objects) with a guaranteed min, borrowing up
// to max, and reclaim by preemption.
type ElasticQuotaArgs struct {
	metav1.TypeMeta

	// NamespacesWithoutQuota says whether pods of a namespace without an
	// ElasticQuota are unlimited by this plugin or denied.
	NamespacesWithoutQuota NamespacesWithoutQuotaPolicy
	// Resources limits accounting to these resources; empty: every resource
	// a quota names in min or max.
	Resources []v1.ResourceName
	// StatusUpdateInterval is how often, at most, the leader writes a
	// changed status.used of a quota.
	StatusUpdateInterval metav1.Duration
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
