package coscheduling

import (
	"testing"

	"github.com/berth-scheduler/berth/pkg/metricstest"
)

// The status-writer panel reads every result: each must be on /metrics from
// registration, at 0.
func TestStatusWriteSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	got := map[string]bool{}
	for _, v := range metricstest.LabelValues(t, "berth_coscheduling_status_writes_total", "result") {
		got[v] = true
	}
	for _, r := range []string{"ok", "conflict", "error"} {
		if !got[r] {
			t.Errorf("no series berth_coscheduling_status_writes_total{result=%q} after registration", r)
		}
	}
}

func TestRejectionReasonSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	got := map[string]bool{}
	for _, v := range metricstest.LabelValues(t, "berth_coscheduling_rejections_total", "reason") {
		got[v] = true
	}
	for _, r := range rejectionReasons {
		if !got[r] {
			t.Errorf("no series berth_coscheduling_rejections_total{reason=%q} after registration", r)
		}
	}
}
