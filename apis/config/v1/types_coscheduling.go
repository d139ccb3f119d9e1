package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CoschedulingArgs configures the Coscheduling plugin: gang scheduling of the
// pods of scheduler-plugins' PodGroup objects (scheduling.x-k8s.io/v1alpha1).
// See pkg/plugins/coscheduling/README.md.
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ScheduleTimeout is how long the members of a group wait at Permit for
	// the rest of the group when its PodGroup sets no scheduleTimeoutSeconds.
	// Default 60s; 1s to 15m (the framework's cap on a Permit wait).
	ScheduleTimeout *metav1.Duration `json:"scheduleTimeout,omitempty"`
	// WriteStatus: the leader writes every PodGroup's status as
	// scheduler-plugins' PodGroup controller does. Default true; set false
	// while that controller still runs (two writers would fight).
	WriteStatus *bool `json:"writeStatus,omitempty"`
	// StatusUpdateInterval is how often, at most, the leader writes a changed
	// PodGroup status. Default 1s; 100ms to 10m.
	StatusUpdateInterval *metav1.Duration `json:"statusUpdateInterval,omitempty"`
}
