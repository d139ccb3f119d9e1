// Package v1 holds the versioned (kubescheduler.config.k8s.io/v1) types of
// Berth's plugin args as users write them in a KubeSchedulerConfiguration:
// pointer fields, so that unset values can be defaulted.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/berth-scheduler/berth/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1
