package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb"
)

// scrapeInterval is the time between two loaded scrapes: the dashboard's
// rate()s over 5m see both.
const scrapeInterval = 30 * time.Second

// evalDashboards loads scrapes (live /metrics pages of one scheduler, oldest
// first) into an in-memory TSDB as Prometheus would store them for a target
// with targetLabels (job, namespace, pod, ...), then evaluates each
// dashboard's variables and panel queries at the last scrape, as Grafana
// would ask. A panel whose queries all return nothing is a finding unless
// every Berth metric it reads belongs to a plugin not in enabled (its panel
// has nothing to show on this profile; listed as skipped). An empty enabled
// means every plugin.
func evalDashboards(ds map[string]dashboard, scrapes []string, targetLabels map[string]string, enabled map[string]bool) (findings, report []string, err error) {
	dir, err := os.MkdirTemp("", "promcheck-tsdb-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logger := slog.New(slog.DiscardHandler)
	db, err := tsdb.Open(dir, logger, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = db.Close() }()

	ctx := context.Background()
	last := time.Now().Truncate(time.Second)
	first := last.Add(-time.Duration(len(scrapes)-1) * scrapeInterval)
	for i, path := range scrapes {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		ts := first.Add(time.Duration(i) * scrapeInterval)
		if err := load(ctx, db, string(raw), targetLabels, ts); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}

	exprParser := parser.NewParser(parser.Options{})
	engine := promql.NewEngine(promql.EngineOpts{Logger: logger, MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	// query returns the samples of expr's result that Grafana would draw
	// (a NaN, e.g. histogram_quantile over no observations, draws nothing).
	query := func(expr string) (promql.Vector, error) {
		q, err := engine.NewInstantQuery(ctx, db, nil, expr, last)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		res := q.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		var all promql.Vector
		switch v := res.Value.(type) {
		case promql.Vector:
			all = v
		case promql.Scalar:
			all = promql.Vector{{F: v.V}}
		default:
			return nil, fmt.Errorf("unexpected result type %s", res.Value.Type())
		}
		var drawn promql.Vector
		for _, s := range all {
			if !math.IsNaN(s.F) {
				drawn = append(drawn, s)
			}
		}
		return drawn, nil
	}

	keys := make([]string, 0, len(ds))
	for k := range ds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		d := ds[key]
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			expr, label, ok := labelValues(v.Query)
			if !ok {
				continue // a finding of run's already
			}
			want, ok := targetLabels[label]
			if !ok {
				return nil, nil, fmt.Errorf("dashboard %s: variable %s selects by %s: -target must give the scrape's %s", key, v.Name, label, label)
			}
			values, err := query(fmt.Sprintf("group by (%s) (%s)", label, expr))
			found := false
			for _, s := range values {
				found = found || s.Metric.Get(label) == want
			}
			// Without the value, Grafana has nothing to select: the panels
			// are asked with a regex no target's label matches.
			vars[v.Name] = ""
			switch {
			case err != nil:
				findings = append(findings, fmt.Sprintf("dashboard %s: variable %s: %v", key, v.Name, err))
			case !found:
				findings = append(findings, fmt.Sprintf("dashboard %s: variable %s (%s) has no value %q: every panel that selects by it is empty", key, v.Name, v.Query, want))
			default:
				report = append(report, fmt.Sprintf("dashboard %s: variable %s = %q", key, v.Name, want))
				// As Grafana formats a multi-value variable for a regex
				// matcher, escaped for PromQL's double-quoted string.
				vars[v.Name] = strings.ReplaceAll(regexp.QuoteMeta(want), `\`, `\\`)
			}
		}
		for _, p := range d.Panels {
			series, skippable := 0, true
			var readsOf []string
			for _, t := range p.Targets {
				expr := substitute(t.Expr, vars)
				drawn, err := query(expr)
				if err != nil {
					findings = append(findings, fmt.Sprintf("dashboard %s panel %q: %s: %v", key, p.Title, expr, err))
					continue
				}
				series += len(drawn)
				names, _ := selectedNames(exprParser, expr) // it parsed for the query above
				for _, name := range names {
					plugin, ok := berthPlugin(name)
					if !ok || len(enabled) == 0 || enabled[plugin] {
						skippable = false
					} else {
						readsOf = append(readsOf, plugin)
					}
				}
			}
			switch {
			case series > 0:
				report = append(report, fmt.Sprintf("dashboard %s panel %q: %d series", key, p.Title, series))
			case skippable && len(readsOf) > 0:
				report = append(report, fmt.Sprintf("dashboard %s panel %q: skipped, reads only plugins not enabled (%s)", key, p.Title, strings.Join(slices.Compact(slices.Sorted(slices.Values(readsOf))), ", ")))
			default:
				findings = append(findings, fmt.Sprintf("dashboard %s panel %q returns no series from the live scheduler", key, p.Title))
			}
		}
	}
	return findings, report, nil
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// labelValues splits Grafana's label_values(selector, label).
func labelValues(q string) (selector, label string, ok bool) {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// substitute replaces $name and ${name} as Grafana does for a regex
// matcher (the value already quoted for one).
func substitute(expr string, vars map[string]string) string {
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	// Longest first: $job must not replace the start of $jobs.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		expr = strings.ReplaceAll(expr, "${"+name+"}", vars[name])
		expr = strings.ReplaceAll(expr, "$"+name, vars[name])
	}
	return expr
}

// berthPlugin says which Berth plugin a metric is of: berth_<plugin>_...
// (berth_build_info is every scheduler's).
func berthPlugin(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "berth_")
	if !ok {
		return "", false
	}
	plugin, _, ok := strings.Cut(rest, "_")
	if !ok || plugin == "build" {
		return "", false
	}
	return plugin, true
}

// load appends one /metrics page at ts as the series Prometheus stores for
// it: a histogram's _bucket (le), _sum and _count, a summary's quantiles,
// _sum and _count, and up = 1.
func load(ctx context.Context, db *tsdb.DB, text string, target map[string]string, ts time.Time) error {
	textParser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := textParser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return err
	}
	app := db.Appender(ctx)
	t := ts.UnixMilli()
	add := func(name string, m *dto.Metric, extra map[string]string, v float64) error {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			if p.GetValue() != "" { // Prometheus stores no empty label
				l[p.GetName()] = p.GetValue()
			}
		}
		for k, v := range extra {
			l[k] = v
		}
		for k, v := range target { // honor_labels: false, the target's labels win
			if old, clash := l[k]; clash {
				l["exported_"+k] = old
			}
			l[k] = v
		}
		l["__name__"] = name
		_, err := app.Append(0, labels.FromMap(l), t, v)
		return err
	}
	if err := add("up", &dto.Metric{}, nil, 1); err != nil {
		_ = app.Rollback()
		return err
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var err error
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				err = add(name, m, nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				err = add(name, m, nil, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				err = add(name, m, nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false // the text format's le="+Inf" bucket is one of them
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), +1)
					if err = add(name+"_bucket", m, map[string]string{"le": formatFloat(b.GetUpperBound())}, float64(b.GetCumulativeCount())); err != nil {
						break
					}
				}
				if err == nil && !inf {
					err = add(name+"_bucket", m, map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				}
				if err == nil {
					err = add(name+"_sum", m, nil, h.GetSampleSum())
				}
				if err == nil {
					err = add(name+"_count", m, nil, float64(h.GetSampleCount()))
				}
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					if err = add(name, m, map[string]string{"quantile": formatFloat(q.GetQuantile())}, q.GetValue()); err != nil {
						break
					}
				}
				if err == nil {
					err = add(name+"_sum", m, nil, s.GetSampleSum())
				}
				if err == nil {
					err = add(name+"_count", m, nil, float64(s.GetSampleCount()))
				}
			}
			if err != nil {
				_ = app.Rollback()
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return app.Commit()
}

func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
