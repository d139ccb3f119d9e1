package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AdmissionFeedbackArgs configures the AdmissionFeedback plugin: pods refused
// by a kubelet's admission are remembered per node and controller, and the
// controller's replacements go elsewhere.
type AdmissionFeedbackArgs struct {
	metav1.TypeMeta

	// Reasons are the pod status reasons that count as a kubelet admission
	// refusal: exact reasons, or prefixes ending in "*".
	Reasons []string
	// RefusalTTL is how long a node is avoided for a controller after its
	// first refusal; each repeated refusal doubles it.
	RefusalTTL metav1.Duration
	// MaxRefusalTTL caps the doubling.
	MaxRefusalTTL metav1.Duration
	// BlackHoleThreshold is how many controllers a node must have refused
	// within BlackHoleWindow to score lowest for every pod (0: never).
	BlackHoleThreshold int32
	// BlackHoleWindow is the window of BlackHoleThreshold.
	BlackHoleWindow metav1.Duration
}
