package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

// MaxCELExpressionLength bounds the text of one expression; the compiler's
// cost estimate bounds what it does.
const MaxCELExpressionLength = 10 * 1024

var supportedCELFailurePolicies = sets.New(config.CELFailurePolicyFail, config.CELFailurePolicyIgnore)

// CELPolicyRulePath is the field path of rule i, which names the rule too,
// `rules[1] ("gpu-nodes-for-gpu-pods")`: a config with thirty rules is read
// by name, not by counting.
func CELPolicyRulePath(path *field.Path, i int, name string) *field.Path {
	if name == "" {
		return path.Child("rules").Index(i)
	}
	return path.Child(fmt.Sprintf("rules[%d] (%q)", i, name))
}

// ValidateCELPolicyArgs checks the structure of CELPolicyArgs. Expressions are
// compiled (and their errors reported under the same paths) by the plugin.
func ValidateCELPolicyArgs(path *field.Path, args *config.CELPolicyArgs) error {
	var errs field.ErrorList
	rulesPath := path.Child("rules")
	if len(args.Rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rule is needed"))
	}
	names := sets.New[string]()
	for i, r := range args.Rules {
		p := CELPolicyRulePath(path, i, r.Name)
		switch {
		case r.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names.Has(r.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(r.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), r.Name, msg))
			}
		}
		names.Insert(r.Name)

		if r.Filter == "" && r.Score == "" {
			errs = append(errs, field.Required(p, "a rule needs a filter, a score, or both"))
		}
		for _, e := range []struct{ name, expr string }{{"match", r.Match}, {"filter", r.Filter}, {"score", r.Score}} {
			if len(e.expr) > MaxCELExpressionLength {
				errs = append(errs, field.TooLong(p.Child(e.name), "", MaxCELExpressionLength))
			}
		}
		switch {
		case r.Score == "" && r.Weight != 0:
			errs = append(errs, field.Forbidden(p.Child("weight"), "weight is only allowed with score"))
		case r.Score != "" && (r.Weight < 1 || r.Weight > 100):
			errs = append(errs, field.Invalid(p.Child("weight"), r.Weight, "must be in the range 1-100"))
		}
		if r.Message != "" && r.Filter == "" {
			errs = append(errs, field.Forbidden(p.Child("message"), "message is only allowed with filter"))
		}
		if !supportedCELFailurePolicies.Has(r.FailurePolicy) {
			errs = append(errs, field.NotSupported(p.Child("failurePolicy"), r.FailurePolicy, sets.List(supportedCELFailurePolicies)))
		}
	}
	return errs.ToAggregate()
}
