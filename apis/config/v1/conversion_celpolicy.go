package v1

import (
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/berth-scheduler/berth/apis/config"
)

// Convert_Pointer_v1_CELFailurePolicy_To_config_CELFailurePolicy converts an
// optional failure policy; defaulting has filled it before this runs.
func Convert_Pointer_v1_CELFailurePolicy_To_config_CELFailurePolicy(in **CELFailurePolicy, out *config.CELFailurePolicy, _ conversion.Scope) error { //nolint:revive // name required by conversion-gen
	if *in == nil {
		*out = ""
		return nil
	}
	*out = config.CELFailurePolicy(**in)
	return nil
}

// Convert_config_CELFailurePolicy_To_Pointer_v1_CELFailurePolicy converts back; empty means unset.
func Convert_config_CELFailurePolicy_To_Pointer_v1_CELFailurePolicy(in *config.CELFailurePolicy, out **CELFailurePolicy, _ conversion.Scope) error { //nolint:revive // name required by conversion-gen
	if *in == "" {
		*out = nil
		return nil
	}
	p := CELFailurePolicy(*in)
	*out = &p
	return nil
}
