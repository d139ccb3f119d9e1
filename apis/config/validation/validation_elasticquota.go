package validation

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

var namespacesWithoutQuotaPolicies = sets.New(config.NamespacesWithoutQuotaUnlimited, config.NamespacesWithoutQuotaDenied)

// Bounds of ElasticQuotaArgs.StatusUpdateInterval.
const (
	MinStatusUpdateInterval = 100 * time.Millisecond
	MaxStatusUpdateInterval = 10 * time.Minute
)

// ValidateElasticQuotaArgs checks ElasticQuotaArgs after defaulting.
func ValidateElasticQuotaArgs(path *field.Path, args *config.ElasticQuotaArgs) error {
	var errs field.ErrorList
	if !namespacesWithoutQuotaPolicies.Has(args.NamespacesWithoutQuota) {
		errs = append(errs, field.NotSupported(path.Child("namespacesWithoutQuota"), args.NamespacesWithoutQuota, sets.List(namespacesWithoutQuotaPolicies)))
	}
	seen := sets.New[v1.ResourceName]()
	for i, r := range args.Resources {
		p := path.Child("resources").Index(i)
		if seen.Has(r) {
			errs = append(errs, field.Duplicate(p, r))
			continue
		}
		seen.Insert(r)
		for _, msg := range validation.IsQualifiedName(string(r)) {
			errs = append(errs, field.Invalid(p, r, msg))
		}
	}
	if d := args.StatusUpdateInterval.Duration; d < MinStatusUpdateInterval || d > MaxStatusUpdateInterval {
		errs = append(errs, field.Invalid(path.Child("statusUpdateInterval"), d.String(),
			"must be between "+MinStatusUpdateInterval.String()+" and "+MaxStatusUpdateInterval.String()))
	}
	return errs.ToAggregate()
}
