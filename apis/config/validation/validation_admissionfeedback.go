package validation

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

// MaxAdmissionFeedbackDuration bounds AdmissionFeedbackArgs' durations: state
// is in memory and a refused pod stays until pod GC, so a day is plenty.
const MaxAdmissionFeedbackDuration = 24 * time.Hour

// ValidateAdmissionFeedbackArgs checks AdmissionFeedbackArgs after defaulting.
func ValidateAdmissionFeedbackArgs(path *field.Path, args *config.AdmissionFeedbackArgs) error {
	var errs field.ErrorList
	if len(args.Reasons) == 0 {
		errs = append(errs, field.Required(path.Child("reasons"), "at least one reason; leave the field out for the defaults"))
	}
	seen := sets.New[string]()
	for i, r := range args.Reasons {
		p := path.Child("reasons").Index(i)
		switch {
		case r == "" || r == "*":
			errs = append(errs, field.Invalid(p, r, "must be a reason or a prefix followed by \"*\""))
		case strings.ContainsAny(r, " \t\n"):
			errs = append(errs, field.Invalid(p, r, "must not contain whitespace"))
		case strings.Contains(strings.TrimSuffix(r, "*"), "*"):
			errs = append(errs, field.Invalid(p, r, "\"*\" may only end a prefix"))
		case seen.Has(r):
			errs = append(errs, field.Duplicate(p, r))
		}
		seen.Insert(r)
	}
	ttl, maxTTL := args.RefusalTTL.Duration, args.MaxRefusalTTL.Duration
	if ttl < time.Second {
		errs = append(errs, field.Invalid(path.Child("refusalTTL"), ttl.String(), "must be at least 1s"))
	}
	if maxTTL < ttl {
		errs = append(errs, field.Invalid(path.Child("maxRefusalTTL"), maxTTL.String(), "must not be shorter than refusalTTL ("+ttl.String()+")"))
	} else if maxTTL > MaxAdmissionFeedbackDuration {
		errs = append(errs, field.Invalid(path.Child("maxRefusalTTL"), maxTTL.String(), "must be at most "+MaxAdmissionFeedbackDuration.String()))
	}
	if args.BlackHoleThreshold < 0 {
		errs = append(errs, field.Invalid(path.Child("blackHoleThreshold"), args.BlackHoleThreshold, "must not be negative (0 turns it off)"))
	}
	if d := args.BlackHoleWindow.Duration; d < time.Second || d > MaxAdmissionFeedbackDuration {
		errs = append(errs, field.Invalid(path.Child("blackHoleWindow"), d.String(), "must be between 1s and "+MaxAdmissionFeedbackDuration.String()))
	}
	return errs.ToAggregate()
}
