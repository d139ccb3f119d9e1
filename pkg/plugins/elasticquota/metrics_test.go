package elasticquota

import (
	"testing"

	"github.com/berth-scheduler/berth/pkg/metricstest"
)

// The status-writer alert reads the error series: both results must be on
// /metrics from registration, at 0.
func TestStatusWriteSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	got := map[string]bool{}
	for _, v := range metricstest.LabelValues(t, "berth_elasticquota_status_writes_total", "result") {
		got[v] = true
	}
	for _, r := range []string{"ok", "error"} {
		if !got[r] {
			t.Errorf("no series berth_elasticquota_status_writes_total{result=%q} after registration", r)
		}
	}
}

func TestDenialAndPreemptionSeriesExistFromRegistration(t *testing.T) {
	registerMetrics()
	for metric, want := range map[string][]string{
		"berth_elasticquota_denied_total":      {reasonMax, reasonBorrow, reasonNoQuota},
		"berth_elasticquota_preemptions_total": {kindReclaim, kindOwnNamespace, kindNoQuota},
	} {
		label := "reason"
		if metric == "berth_elasticquota_preemptions_total" {
			label = "kind"
		}
		got := map[string]bool{}
		for _, v := range metricstest.LabelValues(t, metric, label) {
			got[v] = true
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("no series %s{%s=%q} after registration", metric, label, w)
			}
		}
	}
}
