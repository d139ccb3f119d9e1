package elasticquota

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

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

// berth_elasticquota_quota names the quota's namespace quota_namespace: a
// label called namespace collides with the scrape target's (Prometheus
// renames it exported_namespace, and the dashboard's and users' queries
// select the wrong one).
func TestQuotaMetricNamesTheQuotaNamespace(t *testing.T) {
	node := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "8"}).Obj()
	newTestPlugin(t, []*v1.Node{node}, []*v1.Pod{pod("team-a", "p", "1", 0, "n")}, eq("team-a", rl("cpu", "2"), rl("cpu", "4")))
	if got := metricstest.LabelValues(t, "berth_elasticquota_quota", "namespace"); len(got) != 0 {
		t.Errorf("series with a namespace label: %v", got)
	}
	metricstest.ExpectSeries(t, "berth_elasticquota_quota", "quota_namespace", "team-a")
	metricstest.ExpectSeries(t, "berth_elasticquota_quota", "kind", "min", "max", "used")
}
