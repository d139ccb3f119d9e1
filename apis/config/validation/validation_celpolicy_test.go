package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestValidateCELPolicyArgs(t *testing.T) {
	ok := config.CELPolicyRule{Name: "ok", Filter: "true", FailurePolicy: config.CELFailurePolicyFail}
	tests := []struct {
		name    string
		rules   []config.CELPolicyRule
		wantErr []string // substrings; none means valid
	}{
		{name: "valid filter rule", rules: []config.CELPolicyRule{ok}},
		{name: "valid score rule", rules: []config.CELPolicyRule{{Name: "s", Score: "1", Weight: 100, FailurePolicy: config.CELFailurePolicyIgnore}}},
		{name: "no rules", wantErr: []string{"args.rules: Required value"}},
		{name: "missing name", rules: []config.CELPolicyRule{{Filter: "true", FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0].name: Required value"}},
		{name: "name not a DNS label", rules: []config.CELPolicyRule{{Name: "Bad_Name", Filter: "true", FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{`args.rules[0] ("Bad_Name").name: Invalid value: "Bad_Name"`}},
		{name: "duplicate name", rules: []config.CELPolicyRule{ok, ok}, wantErr: []string{`args.rules[1] ("ok").name: Duplicate value: "ok"`}},
		{name: "neither filter nor score", rules: []config.CELPolicyRule{{Name: "n", Match: "true", FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"n\"): Required value: a rule needs a filter, a score, or both"}},
		{name: "weight without score", rules: []config.CELPolicyRule{{Name: "w", Filter: "true", Weight: 2, FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"w\").weight: Forbidden"}},
		{name: "weight zero", rules: []config.CELPolicyRule{{Name: "w", Score: "1", FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"w\").weight: Invalid value: 0: must be in the range 1-100"}},
		{name: "weight too high", rules: []config.CELPolicyRule{{Name: "w", Score: "1", Weight: 101, FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"w\").weight: Invalid value: 101"}},
		{name: "message without filter", rules: []config.CELPolicyRule{{Name: "m", Score: "1", Weight: 1, Message: "x", FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"m\").message: Forbidden"}},
		{name: "unknown failure policy", rules: []config.CELPolicyRule{{Name: "f", Filter: "true", FailurePolicy: "Maybe"}},
			wantErr: []string{`args.rules[0] ("f").failurePolicy: Unsupported value: "Maybe"`}},
		{name: "expression too long", rules: []config.CELPolicyRule{{Name: "l", Filter: strings.Repeat("a", MaxCELExpressionLength+1), FailurePolicy: config.CELFailurePolicyFail}},
			wantErr: []string{"args.rules[0] (\"l\").filter: Too long"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateCELPolicyArgs(field.NewPath("args"), &config.CELPolicyArgs{Rules: tc.rules}), tc.wantErr)
		})
	}
}
