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
