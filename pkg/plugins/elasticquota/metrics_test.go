package elasticquota

import (
	"testing"

	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// The status-writer alert reads the error series: both results must be on
// /metrics from registration, at 0.
func TestStatusWriteSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_elasticquota_status_writes_total", "result", "ok", "error")
}

func TestDenialAndPreemptionSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	metricstest.ExpectSeries(t, "berth_elasticquota_denied_total", "reason", reasonMax, reasonBorrow, reasonNoQuota)
	metricstest.ExpectSeries(t, "berth_elasticquota_preemptions_total", "kind", kindReclaim, kindOwnNamespace, kindNoQuota)
}
