package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of CoschedulingArgs.
const (
	DefaultCoschedulingScheduleTimeout      = 60 * time.Second
	DefaultCoschedulingStatusUpdateInterval = time.Second
)

// SetDefaults_CoschedulingArgs fills what is unset.
func SetDefaults_CoschedulingArgs(obj *CoschedulingArgs) { //nolint:revive // name required by defaulter-gen
	if obj.ScheduleTimeout == nil {
		obj.ScheduleTimeout = &metav1.Duration{Duration: DefaultCoschedulingScheduleTimeout}
	}
	if obj.WriteStatus == nil {
		obj.WriteStatus = ptr.To(true)
	}
	if obj.StatusUpdateInterval == nil {
		obj.StatusUpdateInterval = &metav1.Duration{Duration: DefaultCoschedulingStatusUpdateInterval}
	}
}
