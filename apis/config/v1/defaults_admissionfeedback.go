package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of AdmissionFeedbackArgs.
const (
	DefaultAdmissionFeedbackRefusalTTL         = 5 * time.Minute
	DefaultAdmissionFeedbackMaxRefusalTTL      = time.Hour
	DefaultAdmissionFeedbackBlackHoleThreshold = 3
	DefaultAdmissionFeedbackBlackHoleWindow    = 10 * time.Minute
)

// DefaultAdmissionFeedbackReasons are the kubelet admission reasons counted
// as refusals by default (pkg/plugins/admissionfeedback/README.md lists
// which kubelet component writes each).
func DefaultAdmissionFeedbackReasons() []string {
	return []string{"OutOf*", "UnexpectedAdmissionError", "TopologyAffinityError", "SMTAlignmentError", "NodeAffinity", "NodePorts"}
}

// SetDefaults_AdmissionFeedbackArgs fills what is unset.
func SetDefaults_AdmissionFeedbackArgs(obj *AdmissionFeedbackArgs) { //nolint:revive // name required by defaulter-gen
	if obj.Reasons == nil {
		obj.Reasons = DefaultAdmissionFeedbackReasons()
	}
	if obj.RefusalTTL == nil {
		obj.RefusalTTL = &metav1.Duration{Duration: DefaultAdmissionFeedbackRefusalTTL}
	}
	if obj.MaxRefusalTTL == nil {
		obj.MaxRefusalTTL = &metav1.Duration{Duration: DefaultAdmissionFeedbackMaxRefusalTTL}
	}
	if obj.BlackHoleThreshold == nil {
		obj.BlackHoleThreshold = ptr.To[int32](DefaultAdmissionFeedbackBlackHoleThreshold)
	}
	if obj.BlackHoleWindow == nil {
		obj.BlackHoleWindow = &metav1.Duration{Duration: DefaultAdmissionFeedbackBlackHoleWindow}
	}
}
