package admissionfeedback

import (
	"slices"
	"testing"

	"github.com/berth-scheduler/berth/pkg/metricstest"
)

// The dashboard's refusals panel reads every reason: each label value the
// plugin can record is on /metrics from registration, at 0.
func TestRefusalReasonSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	got := metricstest.LabelValues(t, "berth_admissionfeedback_refusals_total", "reason")
	for r := range knownReasons {
		if !slices.Contains(got, r) {
			t.Errorf("no series for reason %q after registration (have %v)", r, got)
		}
	}
	for _, r := range []string{"OutOfExtendedResource", "Other"} {
		if !slices.Contains(got, r) {
			t.Errorf("no series for reason %q after registration", r)
		}
	}
}
