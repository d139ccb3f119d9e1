package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AdmissionFeedbackArgs configures the AdmissionFeedback plugin: when a
// kubelet's admission refuses a pod (OutOfcpu, UnexpectedAdmissionError,
// TopologyAffinityError, ...), the node is avoided for the replacements the
// pod's controller creates. See pkg/plugins/admissionfeedback/README.md.
type AdmissionFeedbackArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Reasons are the pod status reasons (status.reason of a Failed pod)
	// that count as a kubelet admission refusal: exact reasons, or prefixes
	// ending in "*". Default: OutOf*, UnexpectedAdmissionError,
	// TopologyAffinityError, SMTAlignmentError, NodeAffinity, NodePorts.
	Reasons []string `json:"reasons,omitempty"`
	// RefusalTTL is how long a node is avoided for a controller's pods after
	// the node refused one of them. Each repeated refusal of the same
	// controller by the same node doubles it. Default 5m; 1s to maxRefusalTTL.
	RefusalTTL *metav1.Duration `json:"refusalTTL,omitempty"`
	// MaxRefusalTTL caps the doubling. Default 1h; at most 24h.
	MaxRefusalTTL *metav1.Duration `json:"maxRefusalTTL,omitempty"`
	// BlackHoleThreshold: a node that refused pods of this many controllers
	// within blackHoleWindow scores lowest for every pod (Score must be
	// enabled). Default 3; 0 turns it off.
	BlackHoleThreshold *int32 `json:"blackHoleThreshold,omitempty"`
	// BlackHoleWindow is the window of blackHoleThreshold. Default 10m;
	// 1s to 24h.
	BlackHoleWindow *metav1.Duration `json:"blackHoleWindow,omitempty"`
}
