package confirmbinder

import (
	"testing"

	"github.com/berth-scheduler/berth/pkg/metricstest"
)

// The alerts divide conflicts by all confirmations: every result's series
// must be on /metrics from registration, at 0, not only once observed.
func TestResultSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	got := map[string]bool{}
	for _, v := range metricstest.LabelValues(t, "berth_confirmbinder_confirmations_total", "result") {
		got[v] = true
	}
	for _, r := range []string{resultSkipped, resultFit, resultConflict, resultError} {
		if !got[r] {
			t.Errorf("no series berth_confirmbinder_confirmations_total{result=%q} after registration", r)
		}
	}
}
