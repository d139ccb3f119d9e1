package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CoschedulingArgs configures the Coscheduling plugin: gang scheduling of the
// pods of scheduler-plugins' PodGroup objects.
type CoschedulingArgs struct {
	metav1.TypeMeta

	// ScheduleTimeout is how long the members of a group wait at Permit for
	// the rest of the group when the PodGroup sets no scheduleTimeoutSeconds.
	ScheduleTimeout metav1.Duration
	// WriteStatus says whether the leader writes the PodGroups' status
	// (phase, counts, scheduleStartTime, occupiedBy).
	WriteStatus bool
	// StatusUpdateInterval is how often, at most, the leader writes a
	// changed PodGroup status.
	StatusUpdateInterval metav1.Duration
}
