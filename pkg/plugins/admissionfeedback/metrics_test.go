package admissionfeedback

import (
	"testing"

	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// The dashboard's refusals panel reads every reason: each label value the
// plugin can record is on /metrics from registration, at 0.
func TestRefusalReasonSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	want := []string{"OutOfExtendedResource", "Other"}
	for r := range knownReasons {
		want = append(want, r)
	}
	metricstest.ExpectSeries(t, "berth_admissionfeedback_refusals_total", "reason", want...)
}
