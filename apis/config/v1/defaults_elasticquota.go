package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultElasticQuotaStatusUpdateInterval is the default debounce of status.used writes.
const DefaultElasticQuotaStatusUpdateInterval = 2 * time.Second

// SetDefaults_ElasticQuotaArgs fills what is unset.
func SetDefaults_ElasticQuotaArgs(obj *ElasticQuotaArgs) { //nolint:revive // name required by defaulter-gen
	if obj.NamespacesWithoutQuota == "" {
		obj.NamespacesWithoutQuota = NamespacesWithoutQuotaUnlimited
	}
	if obj.StatusUpdateInterval == nil {
		obj.StatusUpdateInterval = &metav1.Duration{Duration: DefaultElasticQuotaStatusUpdateInterval}
	}
}
