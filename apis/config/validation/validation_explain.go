package validation

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

// Bounds of ExplainArgs.
const (
	MaxExplainTopNodes     = 20
	MaxExplainSampleOneIn  = 1000000
	MaxExplainMaxPerMinute = 100000
)

// ValidateExplainArgs checks ExplainArgs after defaulting.
func ValidateExplainArgs(path *field.Path, args *config.ExplainArgs) error {
	var errs field.ErrorList
	if args.SampleOneIn < 0 || args.SampleOneIn > MaxExplainSampleOneIn {
		errs = append(errs, field.Invalid(path.Child("sampleOneIn"), args.SampleOneIn, "must be between 0 (only pods that ask) and 1000000"))
	}
	if args.TopNodes < 1 || args.TopNodes > MaxExplainTopNodes {
		errs = append(errs, field.Invalid(path.Child("topNodes"), args.TopNodes, "must be between 1 and 20 (the explanation is size-bounded)"))
	}
	if args.MaxPerMinute < 0 || args.MaxPerMinute > MaxExplainMaxPerMinute {
		errs = append(errs, field.Invalid(path.Child("maxPerMinute"), args.MaxPerMinute, "must be between 0 (no bound) and 100000"))
	}
	seen := sets.New[string]()
	for i, ns := range args.Namespaces {
		p := path.Child("namespaces").Index(i)
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p, ns, msg))
		}
		if seen.Has(ns) {
			errs = append(errs, field.Duplicate(p, ns))
		}
		seen.Insert(ns)
	}
	return errs.ToAggregate()
}
