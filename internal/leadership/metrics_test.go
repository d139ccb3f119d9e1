package leadership

import (
	"slices"
	"testing"

	"k8s.io/component-base/metrics/testutil"

	"github.com/berth-scheduler/berth/internal/testing/metricstest"
)

// This package's provider is the process's only leader-election metrics
// provider (client-go keeps the first installed, and Berth's packages
// initialize before component-base's): it must still expose kube-scheduler's
// leader_election_master_status and leader_election_slowpath_total, as the
// upstream binary does, or Berth's /metrics loses them.
func TestUpstreamLeaderElectionMetricsAreExposed(t *testing.T) {
	const lease = "berth-test-lease"
	m := provider{}.NewLeaderMetric()
	m.On(lease)
	m.SlowpathExercised(lease)
	for _, name := range []string{"leader_election_master_status", "leader_election_slowpath_total"} {
		if got := metricstest.LabelValues(t, name, "name"); !slices.Contains(got, lease) {
			t.Fatalf("%s series for name: %v, want %s among them", name, got, lease)
		}
	}
	if v, err := testutil.GetGaugeMetricValue(masterStatus.WithLabelValues(lease)); err != nil || v != 1 {
		t.Errorf("leader_election_master_status{name=%q} = %v (%v), want 1 while leading", lease, v, err)
	}
	if v, err := testutil.GetCounterMetricValue(slowpath.WithLabelValues(lease)); err != nil || v != 1 {
		t.Errorf("leader_election_slowpath_total{name=%q} = %v (%v), want 1", lease, v, err)
	}
	m.Off(lease)
	if v, _ := testutil.GetGaugeMetricValue(masterStatus.WithLabelValues(lease)); v != 0 {
		t.Errorf("leader_election_master_status after Off = %v, want 0 (standby)", v)
	}
	if _, leading := State(); leading {
		t.Error("State says leading after Off")
	}
}
