package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ExplainArgs configures the Explain plugin: why a pod landed on its node,
// and why a pending pod fits nowhere, per plugin, for the pods that ask.
type ExplainArgs struct {
	metav1.TypeMeta

	// SampleOneIn explains, besides the pods that ask, one pod in this many
	// (0: none).
	SampleOneIn int32
	// Namespaces, if set, are the only namespaces whose pods are explained.
	Namespaces []string
	// TopNodes is how many of the best-scored (or nearest) nodes are listed.
	TopNodes int32
	// RedactNodes replaces the name of every node other than the pod's own
	// everywhere in the result.
	RedactNodes bool
	// MaxPerMinute bounds the explanations computed per minute in this
	// profile (0: no bound).
	MaxPerMinute int32
}
