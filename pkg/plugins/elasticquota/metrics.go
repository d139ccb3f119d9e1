package elasticquota

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_elasticquota"

var (
	deniedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "denied_total",
		Help:           "Pods refused in PreFilter, by reason: max (above the quota's max), borrow (beyond min, nothing left to borrow), no-quota (namespacesWithoutQuota: Denied).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	preemptionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemptions_total",
		Help:           "Successful preemptions by kind: reclaim (a namespace within its min took back borrowed resources), own-namespace, no-quota.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	statusWritesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "status_writes_total",
		Help:           "Writes of ElasticQuota status.used by the leader, by result (ok, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// The quota's namespace is quota_namespace: a label named namespace
	// would collide with the scrape target's (Prometheus keeps the target's
	// and renames this one exported_namespace).
	quotaDesc = metrics.NewDesc(metricsSubsystem+"_quota",
		"Per namespace and resource: the quota's min and max and the namespace's used (cpu in cores, others in units), as the scheduler accounts them.",
		[]string{"quota_namespace", "resource", "kind"}, nil, metrics.ALPHA, "")

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(deniedTotal, preemptionsTotal, statusWritesTotal)
		// Both results on /metrics from the start, at 0 (the status-writer alert).
		for _, r := range []string{"ok", "error"} {
			statusWritesTotal.WithLabelValues(r)
		}
		// Every denial reason and preemption kind, at 0, for the dashboard.
		for _, r := range []string{reasonMax, reasonBorrow, reasonNoQuota} {
			deniedTotal.WithLabelValues(r)
		}
		for _, k := range []string{kindReclaim, kindOwnNamespace, kindNoQuota} {
			preemptionsTotal.WithLabelValues(k)
		}
		legacyregistry.CustomMustRegister(&quotaCollector{})
	})
}

// quotaCollector reports every namespace's quota at scrape time, from every
// quota state of the process (one per cluster; one in a scheduler).
type quotaCollector struct {
	metrics.BaseStableCollector
}

func (c *quotaCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- quotaDesc }

func (c *quotaCollector) CollectWithStability(ch chan<- metrics.Metric) {
	for _, sh := range states.All() {
		sh.mgr.mu.RLock()
		for ns, q := range sh.mgr.quotas {
			used := sh.mgr.reported(ns)
			for name := range q.accounted {
				emit := func(kind string, v int64) {
					ch <- metrics.NewLazyConstMetric(quotaDesc, metrics.GaugeValue, scaled(name, v), ns, string(name), kind)
				}
				emit("used", used[name])
				if v, ok := q.min[name]; ok {
					emit("min", v)
				}
				if v, ok := q.max[name]; ok {
					emit("max", v)
				}
			}
		}
		sh.mgr.mu.RUnlock()
	}
}

func scaled(name v1.ResourceName, v int64) float64 {
	if name == v1.ResourceCPU {
		return float64(v) / 1000
	}
	return float64(v)
}
