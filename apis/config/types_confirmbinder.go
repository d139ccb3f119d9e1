package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ConfirmBinderArgs configures the ConfirmBinder plugin: a check of the chosen
// node against the API server's live state right before binding.
type ConfirmBinderArgs struct {
	metav1.TypeMeta

	// Confirm says when to confirm.
	Confirm ConfirmMode
	// TightHeadroomPercent: in WhenTight mode, confirm when some resource of
	// the node would have less than this share of allocatable left.
	TightHeadroomPercent int32
	// ConfirmTimeout bounds the API calls of one confirmation.
	ConfirmTimeout metav1.Duration
	// OnConfirmError says what an error while confirming does.
	OnConfirmError ConfirmErrorPolicy
}

// ConfirmMode says when ConfirmBinder confirms.
type ConfirmMode string

const (
	// ConfirmAlways confirms every binding.
	ConfirmAlways ConfirmMode = "Always"
	// ConfirmWhenTight confirms only bindings to nodes left with little headroom.
	ConfirmWhenTight ConfirmMode = "WhenTight"
)

// ConfirmErrorPolicy says what an error while confirming does.
type ConfirmErrorPolicy string

const (
	// ConfirmErrorRequeue fails the binding; the pod is scheduled again.
	ConfirmErrorRequeue ConfirmErrorPolicy = "Requeue"
	// ConfirmErrorBind binds without confirmation.
	ConfirmErrorBind ConfirmErrorPolicy = "Bind"
)
