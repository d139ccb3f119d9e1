package confirmbinder

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_confirmbinder"

// Results of a confirmation.
const (
	resultSkipped  = "skipped"
	resultFit      = "fit"
	resultConflict = "conflict"
	resultError    = "error"
)

var (
	confirmations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "confirmations_total",
		Help:           "Bindings by confirmation result: skipped (WhenTight, roomy node), fit, conflict, error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	conflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "conflicts_total",
		Help:           "Conflicts caught before binding, by reason (node-deleted, node-cordoned, taint, resource, pods, host-port, node-affinity).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	confirmDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "confirmation_duration_seconds",
		Help:           "Time to confirm a binding against the API server (node GET and pod LIST), lock wait included.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(confirmations, conflicts, confirmDuration)
		// Every result on /metrics from the start, at 0: the conflict-rate
		// alert divides by them all.
		for _, r := range []string{resultSkipped, resultFit, resultConflict, resultError} {
			confirmations.WithLabelValues(r)
		}
	})
}
