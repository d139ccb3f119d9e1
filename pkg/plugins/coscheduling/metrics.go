package coscheduling

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_coscheduling"

var (
	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "rejections_total",
		Help: "Gang members refused or released, by reason: min-resources (PreFilter: the group's minResources exceed the cluster's free capacity), " +
			"gang-failed (PreFilter: the gang could not be placed and waits for a change), member-unschedulable (held members released because a member fits nowhere), " +
			"member-released (held members released because one left Permit), timeout (scheduleTimeout reached at Permit), yielded (released for a higher-ranked gang).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	bindFailuresTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_bind_failures_total",
		Help:           "Members whose binding failed after their gang was released (retried at once; the gang stands).",
		StabilityLevel: metrics.ALPHA,
	})
	statusWritesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "status_writes_total",
		Help:           "Writes of PodGroup status, by result (ok, conflict, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	gangLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_scheduling_duration_seconds",
		Help:           "Time from a gang's first member seen to minMember members bound.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 14), // 0.1s .. ~27min
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once

	// rejectionReasons are every reason rejectionsTotal records, on /metrics
	// from registration (at 0) for the dashboard and alerts.
	rejectionReasons = []string{"min-resources", "gang-failed", "member-unschedulable", "member-released", "timeout", "yielded"}
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rejectionsTotal, bindFailuresTotal, statusWritesTotal, gangLatency)
		for _, r := range rejectionReasons {
			rejectionsTotal.WithLabelValues(r)
		}
		// Every result on /metrics from the start, at 0 (the status-writer panel).
		for _, r := range []string{"ok", "conflict", "error"} {
			statusWritesTotal.WithLabelValues(r)
		}
	})
}
