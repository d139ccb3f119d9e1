package validation

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

var (
	confirmModes         = sets.New(config.ConfirmAlways, config.ConfirmWhenTight)
	confirmErrorPolicies = sets.New(config.ConfirmErrorRequeue, config.ConfirmErrorBind)
)

// ValidateConfirmBinderArgs checks ConfirmBinderArgs after defaulting.
func ValidateConfirmBinderArgs(path *field.Path, args *config.ConfirmBinderArgs) error {
	var errs field.ErrorList
	if !confirmModes.Has(args.Confirm) {
		errs = append(errs, field.NotSupported(path.Child("confirm"), args.Confirm, sets.List(confirmModes)))
	}
	if args.TightHeadroomPercent < 0 || args.TightHeadroomPercent > 100 {
		errs = append(errs, field.Invalid(path.Child("tightHeadroomPercent"), args.TightHeadroomPercent, "must be a percentage in the range 0-100"))
	}
	if args.ConfirmTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("confirmTimeout"), args.ConfirmTimeout.Duration.String(), "must be positive"))
	}
	if !confirmErrorPolicies.Has(args.OnConfirmError) {
		errs = append(errs, field.NotSupported(path.Child("onConfirmError"), args.OnConfirmError, sets.List(confirmErrorPolicies)))
	}
	return errs.ToAggregate()
}
