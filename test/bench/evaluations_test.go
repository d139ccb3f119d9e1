package bench

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// evaluationsMetric carries scheduler_plugin_evaluation_total of the
// measured phase into the harness's results. The harness's metrics
// collector reads histograms only, so each plugin and extension point is
// exposed as a histogram of one observation whose sum is the count of
// calls divided by 1,000: the harness reports a histogram's mean in
// milliseconds (×1,000), so its "Average" is the number of calls.
//
// The measured phase starts at the harness's first gathering of the
// metrics, after it reset them (legacyregistry.Reset after each test case),
// at which the scheduler's counters exist (its framework creates every
// plugin's series, at zero, when it starts): the metrics collector gathers
// when the measured pods' creation starts, and the only gathering before it
// comes from the last test case's collectors stopping, after the reset
// deleted every series and before this test case's scheduler started. The
// counts then are the baseline (zero in a workload without pods before the
// measured ones). A counter of this file's own, which the reset zeroes,
// tells the first such gathering of a test case from the later ones.
const evaluationsMetric = "berth_bench_plugin_evaluations"

type evaluationsCollector struct {
	desc *prometheus.Desc
	// phase is 0 after the harness's reset, 1 once the baseline is taken.
	phase *metrics.Counter

	mu       sync.Mutex
	baseline map[[2]string]float64
}

func registerEvaluations() {
	c := &evaluationsCollector{
		desc:  prometheus.NewDesc(evaluationsMetric, "Plugin calls in the measured phase (the mean, in ms, of one observation: the count).", []string{"plugin", "extension_point", "profile"}, nil),
		phase: metrics.NewCounter(&metrics.CounterOpts{Name: "berth_bench_measured_phase", Help: "1 once the measured phase's baseline of plugin calls is taken."}),
	}
	legacyregistry.MustRegister(c.phase)
	legacyregistry.RawMustRegister(c)
}

func (c *evaluationsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *evaluationsCollector) Collect(ch chan<- prometheus.Metric) {
	now := readEvaluations()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, err := testutil.GetCounterMetricValue(c.phase); err == nil && v == 0 {
		if len(now) == 0 {
			// No series: a gathering between the reset and this test
			// case's scheduler (the last test case's collectors stopping).
			return
		}
		c.baseline = now
		c.phase.Inc()
	}
	for k, v := range now {
		if d := v - c.baseline[k]; d > 0 {
			h, err := prometheus.NewConstHistogram(c.desc, 1, d/1000, map[float64]uint64{1e12: 1}, k[0], k[1], "default-scheduler")
			if err == nil {
				ch <- h
			}
		}
	}
}

// readEvaluations reads the scheduler's counter directly (not through the
// registry: this runs inside a gathering).
func readEvaluations() map[[2]string]float64 {
	out := map[[2]string]float64{}
	vec := schedmetrics.PluginEvaluationTotal
	if vec == nil || !vec.IsCreated() {
		return out // no scheduler yet
	}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		var plugin, point string
		for _, l := range pb.GetLabel() {
			switch l.GetName() {
			case "plugin":
				plugin = l.GetValue()
			case "extension_point":
				point = l.GetValue()
			}
		}
		out[[2]string{plugin, point}] += pb.GetCounter().GetValue()
	}
	return out
}
