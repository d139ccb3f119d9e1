package explain

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_explain"

var (
	explanations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "explanations_total",
		Help:           "Explanations computed, by outcome (Placed, Pending).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	explainErrors = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "errors_total",
		Help:           "Explanations that could not be computed (logged; the pod is scheduled regardless).",
		StabilityLevel: metrics.ALPHA,
	})
	explainDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "duration_seconds",
		Help:           "Time to compute one explanation inside the scheduling cycle, by outcome.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 16), // 0.1ms .. ~3.3s
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writes_total",
		Help:           "Writes of explanations to pods, by result (ok; error: each failed try, a queued write is tried up to four times; dropped: the queue was full; superseded: a pending explanation older than the pod's placement or replaced in the queue by a newer one, not written).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	resultBytes = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "result_bytes",
		Help:           "Size of the explain.berth.dev/result annotations written (at most 16 KiB).",
		Buckets:        metrics.ExponentialBuckets(256, 2, 8), // 256B .. 32KiB
		StabilityLevel: metrics.ALPHA,
	})

	skipped = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "skipped_total",
		Help:           "Pods that asked for an explanation and were not explained, by reason (budget: over maxPerMinute).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	registerOnce sync.Once
)

// Reasons of skipped_total.
const skippedBudget = "budget"

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(explanations, explainErrors, explainDuration, writes, resultBytes, skipped)
		skipped.WithLabelValues(skippedBudget).Add(0)
	})
}
