package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CELPolicyArgs configures the CELPolicy plugin: scheduling rules written as
// CEL expressions.
type CELPolicyArgs struct {
	metav1.TypeMeta

	// Rules are evaluated for every pod that their Match selects.
	Rules []CELPolicyRule
}

// CELPolicyRule is one named rule. It has a Filter, a Score, or both.
type CELPolicyRule struct {
	// Name identifies the rule in messages, events and metrics (a DNS-1123 label).
	Name string
	// Match is a bool expression over `pod` only; empty matches every pod.
	Match string
	// Filter is a bool expression; false rejects the node.
	Filter string
	// Score is an int or double expression; values are clamped to [0, 100].
	Score string
	// Weight of Score in the plugin's weighted average (1-100); 0 when there is no Score.
	Weight int32
	// Message is the rejection reason shown when Filter is false.
	Message string
	// FailurePolicy says what a runtime error in the rule does.
	FailurePolicy CELFailurePolicy
}

// CELFailurePolicy says what a runtime error in a rule does.
type CELFailurePolicy string

const (
	// CELFailurePolicyFail rejects the node, naming the rule.
	CELFailurePolicyFail CELFailurePolicy = "Fail"
	// CELFailurePolicyIgnore skips the rule for that node.
	CELFailurePolicyIgnore CELFailurePolicy = "Ignore"
)
