package celpolicy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_celpolicy"

var (
	evaluations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "evaluations_total",
		Help:           "CEL evaluations by rule, expression (match, filter, score) and result (true, false, value, error). Outcomes served from the per-node cache are not evaluations and are not counted.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule", "expression", "result"})
	runtimeErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "runtime_errors_total",
		Help:           "Runtime errors (missing key, cost limit, ...) by rule, expression and the failure policy applied.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule", "expression", "failure_policy"})
	clampedScores = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "clamped_scores_total",
		Help:           "Score values outside [0, 100] (or NaN) that were clamped, by rule.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})

	indexResults = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "label_index_cycles_total",
		Help:           "Scheduling cycles whose pod matched a rule with a label-only filter, answered from the label index: narrowed (PreFilter named the matching nodes) or no_nodes (no node has the labels; the pod is unschedulable).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evaluations, runtimeErrors, clampedScores, indexResults)
		for _, r := range []string{"narrowed", "no_nodes"} {
			indexResults.WithLabelValues(r)
		}
	})
}

// exprCounters are one expression's counters, resolved once at start-up so
// that counting on the hot path is an atomic add.
type exprCounters struct {
	isTrue, isFalse, value, errs, errsPolicy metrics.CounterMetric
}

func newExprCounters(rule, expression, policy string) exprCounters {
	return exprCounters{
		isTrue:     evaluations.WithLabelValues(rule, expression, "true"),
		isFalse:    evaluations.WithLabelValues(rule, expression, "false"),
		value:      evaluations.WithLabelValues(rule, expression, "value"),
		errs:       evaluations.WithLabelValues(rule, expression, "error"),
		errsPolicy: runtimeErrors.WithLabelValues(rule, expression, policy),
	}
}
