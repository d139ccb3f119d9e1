package coscheduling

import (
	"testing"

	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// The status-writer panel reads every result: each must be on /metrics from
// registration, at 0.
func TestStatusWriteSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_coscheduling_status_writes_total", "result", "ok", "conflict", "error")
}

func TestRejectionReasonSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_coscheduling_rejections_total", "reason", rejectionReasons...)
}
