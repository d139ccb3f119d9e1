package v1

import "k8s.io/utils/ptr"

// DefaultExplainTopNodes is how many nodes an explanation lists by default.
const DefaultExplainTopNodes = 5

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
}
