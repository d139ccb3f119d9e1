package confirmbinder

import (
	"testing"

	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// The alerts divide conflicts by all confirmations: every result's series
// must be on /metrics from registration, at 0, not only once observed.
func TestResultSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_confirmbinder_confirmations_total", "result", resultSkipped, resultFit, resultConflict, resultError)
}
