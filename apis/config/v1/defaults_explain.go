package v1

import "k8s.io/utils/ptr"

// DefaultExplainTopNodes is how many nodes an explanation lists by default.
const DefaultExplainTopNodes = 5

// DefaultExplainMaxPerMinute is the default budget of explanations a profile
// computes per minute.
const DefaultExplainMaxPerMinute = 60

// SetDefaults_ExplainArgs fills what is unset.
func SetDefaults_ExplainArgs(obj *ExplainArgs) { //nolint:revive // name required by defaulter-gen
	if obj.SampleOneIn == nil {
		obj.SampleOneIn = ptr.To[int32](0)
	}
	if obj.TopNodes == nil {
		obj.TopNodes = ptr.To[int32](DefaultExplainTopNodes)
	}
	if obj.RedactNodes == nil {
		obj.RedactNodes = ptr.To(false)
	}
	if obj.MaxPerMinute == nil {
		obj.MaxPerMinute = ptr.To[int32](DefaultExplainMaxPerMinute)
	}
}
