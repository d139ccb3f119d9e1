// Package metricstest reads the process's legacy metrics registry in unit
// tests: which series of a metric are on /metrics.
package metricstest

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// LabelValues returns the values of label over the series of metric name
// that the registry exposes now (nil if it exposes none).
func LabelValues(t *testing.T, name, label string) []string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					values = append(values, l.GetValue())
				}
			}
		}
	}
	return values
}

// ExpectSeries fails t unless metric has a series for each of values of
// label (zero-valued series count: they are what registration creates).
func ExpectSeries(t *testing.T, metric, label string, values ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, v := range LabelValues(t, metric, label) {
		have[v] = true
	}
	for _, v := range values {
		if !have[v] {
			t.Errorf("no series %s{%s=%q}", metric, label, v)
		}
	}
}
