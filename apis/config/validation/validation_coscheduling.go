package validation

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

// Bounds of CoschedulingArgs.ScheduleTimeout: the framework caps a Permit
// wait at 15 minutes (a longer wait is cut silently, so it is refused here).
const (
	MinScheduleTimeout = time.Second
	MaxScheduleTimeout = 15 * time.Minute
)

// ValidateCoschedulingArgs checks CoschedulingArgs after defaulting.
func ValidateCoschedulingArgs(path *field.Path, args *config.CoschedulingArgs) error {
	var errs field.ErrorList
	if d := args.ScheduleTimeout.Duration; d < MinScheduleTimeout || d > MaxScheduleTimeout {
		errs = append(errs, field.Invalid(path.Child("scheduleTimeout"), d.String(),
			"must be between "+MinScheduleTimeout.String()+" and "+MaxScheduleTimeout.String()+" (the framework's cap on a Permit wait)"))
	}
	if d := args.StatusUpdateInterval.Duration; d < MinStatusUpdateInterval || d > MaxStatusUpdateInterval {
		errs = append(errs, field.Invalid(path.Child("statusUpdateInterval"), d.String(),
			"must be between "+MinStatusUpdateInterval.String()+" and "+MaxStatusUpdateInterval.String()))
	}
	return errs.ToAggregate()
}
