package v1

import "k8s.io/utils/ptr"

// DefaultCELPolicyWeight is the weight of a rule's score when none is given.
const DefaultCELPolicyWeight int32 = 1

// SetDefaults_CELPolicyArgs defaults each rule's weight (only where it has a
// score) and failure policy.
func SetDefaults_CELPolicyArgs(obj *CELPolicyArgs) { //nolint:revive // name required by defaulter-gen
	for i := range obj.Rules {
		r := &obj.Rules[i]
		if r.Score != "" && r.Weight == nil {
			r.Weight = ptr.To(DefaultCELPolicyWeight)
		}
		if r.FailurePolicy == nil {
			r.FailurePolicy = ptr.To(CELFailurePolicyFail)
		}
	}
}
