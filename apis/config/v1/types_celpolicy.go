package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CELPolicyArgs configures the CELPolicy plugin: scheduling rules written as
// CEL expressions. See pkg/plugins/celpolicy/README.md.
type CELPolicyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Rules are evaluated for every pod that their match selects.
	Rules []CELPolicyRule `json:"rules,omitempty"`
}

// CELPolicyRule is one named rule. It has a filter, a score, or both.
type CELPolicyRule struct {
	// Name identifies the rule in messages, events and metrics (a DNS-1123 label, unique).
	Name string `json:"name"`
	// Match is a bool expression over `pod` only, evaluated once per pod.
	// Empty matches every pod.
	Match string `json:"match,omitempty"`
	// Filter is a bool expression over `pod`, `node` and `nodeInfo`; false rejects the node.
	Filter string `json:"filter,omitempty"`
	// Score is an int or double expression over `pod`, `node` and `nodeInfo`,
	// clamped to [0, 100].
	Score string `json:"score,omitempty"`
	// Weight of the score in the plugin's weighted average, 1-100.
	// Defaults to 1 when score is set; must be unset otherwise.
	Weight *int32 `json:"weight,omitempty"`
	// Message is the rejection reason shown in the FailedScheduling event when
	// filter is false. Only with filter. Defaults to a text naming the rule.
	Message string `json:"message,omitempty"`
	// FailurePolicy is Fail (a runtime error rejects the node) or Ignore (the
	// rule is skipped for that node). Defaults to Fail.
	FailurePolicy *CELFailurePolicy `json:"failurePolicy,omitempty"`
}

// CELFailurePolicy says what a runtime error in a rule does.
type CELFailurePolicy string

const (
	// CELFailurePolicyFail rejects the node, naming the rule.
	CELFailurePolicyFail CELFailurePolicy = "Fail"
	// CELFailurePolicyIgnore skips the rule for that node.
	CELFailurePolicyIgnore CELFailurePolicy = "Ignore"
)
