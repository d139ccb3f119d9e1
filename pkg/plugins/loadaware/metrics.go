package loadaware

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_loadaware"

var (
	lastRefresh = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "last_refresh_timestamp_seconds",
		Help:           "When the MetricsAPI source last listed NodeMetrics successfully (Unix time); the snapshot's age is now minus this.",
		StabilityLevel: metrics.ALPHA,
	})
	refreshErrors = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "refresh_errors_total",
		Help:           "Failed lists of NodeMetrics; the previous snapshot is kept.",
		StabilityLevel: metrics.ALPHA,
	})
	annotationErrors = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "annotation_errors_total",
		Help:           "Usage annotations that could not be decoded (the node counts as having no metrics).",
		StabilityLevel: metrics.ALPHA,
	})
	filteredNodes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "filtered_nodes_total",
		Help:           "Nodes rejected by Filter, by resource over its threshold (or 'metrics' for missing metrics under onMissingMetrics: Reject).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
	missingMetrics = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "missing_metrics_total",
		Help:           "Filter and Score calls for a node without a sample ('missing'), with one older than metricsExpiration ('stale'), or with an impossible one ('invalid').",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason", "extension_point"})
	badSamples = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "bad_samples_total",
		Help:           "Samples that were corrected or refused, by reason: negative (refused: the node is treated as without metrics and scores lowest), overflow (beyond int64, saturated), future (timestamp after the sample was received, clamped to that time), over-allocatable (clamped to allocatable, counted at each Filter or Score that clamps).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	estimatedPods = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "estimated_pods",
		Help:           "Pods assigned since their node's last sample, whose estimates are added to the measured usage.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// Reasons of berth_loadaware_bad_samples_total.
const (
	badNegative        = "negative"
	badOverflow        = "overflow"
	badFuture          = "future"
	badOverAllocatable = "over-allocatable"
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(lastRefresh, refreshErrors, annotationErrors, filteredNodes, missingMetrics, badSamples, estimatedPods)
	})
}
