package validation

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

// MinLoadAwareRefreshInterval keeps the MetricsAPI source from hammering the
// metrics API (metrics-server itself scrapes every 15s by default).
const MinLoadAwareRefreshInterval = 5 * time.Second

var (
	loadAwareResources      = sets.New(v1.ResourceCPU, v1.ResourceMemory)
	loadAwareSources        = sets.New(config.LoadAwareSourceMetricsAPI, config.LoadAwareSourceNodeAnnotations)
	loadAwareMissingActions = sets.New(config.LoadAwareMissingMetricsAllow, config.LoadAwareMissingMetricsReject)
)

// ValidateLoadAwareArgs checks LoadAwareArgs after defaulting.
func ValidateLoadAwareArgs(path *field.Path, args *config.LoadAwareArgs) error {
	var errs field.ErrorList
	if !loadAwareSources.Has(args.Source) {
		errs = append(errs, field.NotSupported(path.Child("source"), args.Source, sets.List(loadAwareSources)))
	}
	if !loadAwareMissingActions.Has(args.OnMissingMetrics) {
		errs = append(errs, field.NotSupported(path.Child("onMissingMetrics"), args.OnMissingMetrics, sets.List(loadAwareMissingActions)))
	}
	if d := args.MetricsRefreshInterval.Duration; d < MinLoadAwareRefreshInterval {
		errs = append(errs, field.Invalid(path.Child("metricsRefreshInterval"), d.String(), "must be at least "+MinLoadAwareRefreshInterval.String()))
	}
	if args.MetricsExpiration.Duration <= args.MetricsRefreshInterval.Duration {
		errs = append(errs, field.Invalid(path.Child("metricsExpiration"), args.MetricsExpiration.Duration.String(),
			"must be longer than metricsRefreshInterval, or every sample expires before the next one"))
	}
	if d := args.EstimateGracePeriod.Duration; d < 0 {
		errs = append(errs, field.Invalid(path.Child("estimateGracePeriod"), d.String(), "must not be negative"))
	}
	for r, v := range args.UsageThresholds {
		p := path.Child("usageThresholds").Key(string(r))
		if !loadAwareResources.Has(r) {
			errs = append(errs, field.NotSupported(p, r, sets.List(loadAwareResources)))
		} else if v < 0 || v > 100 {
			errs = append(errs, field.Invalid(p, v, "must be a percentage in the range 0-100 (0 turns the filter off for this resource)"))
		}
	}
	var total int64
	for r, v := range args.ResourceWeights {
		p := path.Child("resourceWeights").Key(string(r))
		if !loadAwareResources.Has(r) {
			errs = append(errs, field.NotSupported(p, r, sets.List(loadAwareResources)))
		} else if v < 0 || v > 100 {
			errs = append(errs, field.Invalid(p, v, "must be in the range 0-100"))
		}
		total += v
	}
	if total == 0 && len(args.ResourceWeights) > 0 {
		errs = append(errs, field.Invalid(path.Child("resourceWeights"), args.ResourceWeights, "at least one weight must be positive"))
	}
	for r, q := range args.DefaultPodEstimate {
		p := path.Child("defaultPodEstimate").Key(string(r))
		if !loadAwareResources.Has(r) {
			errs = append(errs, field.NotSupported(p, r, sets.List(loadAwareResources)))
		} else if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
		}
	}
	if args.Source == config.LoadAwareSourceNodeAnnotations {
		for _, msg := range validation.IsQualifiedName(args.AnnotationKey) {
			errs = append(errs, field.Invalid(path.Child("annotationKey"), args.AnnotationKey, msg))
		}
	}
	return errs.ToAggregate()
}
