package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ExplainArgs configures the Explain plugin: for the pods that ask
// (annotation explain.berth.dev/request: "true"), it records why the pod
// landed on its node, or why it fits nowhere, per plugin, in the pod's
// annotation explain.berth.dev/result. See pkg/plugins/explain/README.md.
type ExplainArgs struct {
	metav1.TypeMeta `json:",inline"`

	// SampleOneIn also explains one pod in this many that did not ask
	// (chosen by UID, so a pod's retries agree). Default 0: only pods that
	// ask. At most 1000000.
	SampleOneIn *int32 `json:"sampleOneIn,omitempty"`
	// Namespaces, if set, are the only namespaces whose pods are explained
	// (an explanation names other nodes and their scores).
	Namespaces []string `json:"namespaces,omitempty"`
	// TopNodes is how many of the best-scored nodes (placed pods) or
	// nearest nodes (pending pods) are listed. Default 5; 1 to 20.
	TopNodes *int32 `json:"topNodes,omitempty"`
	// RedactNodes replaces the name of every node other than the pod's own
	// with "(redacted)" everywhere in the result (reasons, top and nearest
	// nodes). Default false.
	RedactNodes *bool `json:"redactNodes,omitempty"`
	// MaxPerMinute bounds the explanations this profile computes per minute
	// (a token bucket: up to MaxPerMinute at once, then one every
	// 60s/MaxPerMinute). An explanation is computed inside the scheduling
	// cycle and any pod author can ask, so this bounds what asking costs
	// the scheduler. A pod over the budget is scheduled without one (counted
	// in berth_explain_skipped_total{reason="budget"}); a pending pod is
	// explained on a later attempt, and renewed once a minute at most.
	// Default 60; 0 means no bound; at most 100000.
	MaxPerMinute *int32 `json:"maxPerMinute,omitempty"`
}
