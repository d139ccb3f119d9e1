package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ConfirmBinderArgs configures the ConfirmBinder plugin: before writing the
// Binding, it checks the chosen node against the API server's live state.
// See pkg/plugins/confirmbinder/README.md.
type ConfirmBinderArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Confirm is WhenTight (default: confirm only when the node would be left
	// with little headroom) or Always.
	Confirm ConfirmMode `json:"confirm,omitempty"`
	// TightHeadroomPercent: in WhenTight mode, confirm when, by the
	// scheduler's cache, some resource of the chosen node would have less than
	// this share of allocatable left after the pod. 0-100, default 10.
	TightHeadroomPercent *int32 `json:"tightHeadroomPercent,omitempty"`
	// ConfirmTimeout bounds the API calls of one confirmation. Default 5s.
	ConfirmTimeout *metav1.Duration `json:"confirmTimeout,omitempty"`
	// OnConfirmError is Requeue (default: the binding fails and the pod is
	// scheduled again) or Bind (bind without confirmation).
	OnConfirmError ConfirmErrorPolicy `json:"onConfirmError,omitempty"`
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
