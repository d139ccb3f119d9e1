package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabelValues(t *testing.T) {
	for q, want := range map[string][2]string{
		"label_values(berth_build_info, job)":              {"berth_build_info", "job"},
		` label_values( up{namespace="a,b"} , instance ) `: {`up{namespace="a,b"}`, "instance"},
	} {
		sel, label, ok := labelValues(q)
		if !ok || sel != want[0] || label != want[1] {
			t.Errorf("labelValues(%q) = %q, %q, %v; want %q, %q", q, sel, label, ok, want[0], want[1])
		}
	}
	if _, _, ok := labelValues("query_result(up)"); ok {
		t.Error("query_result(up) read as label_values")
	}
}

func TestSubstituteLongestNameFirst(t *testing.T) {
	got := substitute(`x{job=~"$job", a=~"$jobs", b=~"${job}"}`, map[string]string{"job": "J", "jobs": "S"})
	if want := `x{job=~"J", a=~"S", b=~"J"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestBerthPlugin(t *testing.T) {
	for name, want := range map[string]string{
		"berth_loadaware_last_refresh_timestamp_seconds": "loadaware",
		"berth_explain_explanations_total":               "explain",
		"berth_build_info":                               "",
		"scheduler_pending_pods":                         "",
	} {
		got, ok := berthPlugin(name)
		if got != want || ok != (want != "") {
			t.Errorf("berthPlugin(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

const page = `# HELP berth_build_info Always 1.
# TYPE berth_build_info gauge
berth_build_info{kubernetes="v1.37.2",version="v0.1.0"} 1
# HELP scheduler_schedule_attempts_total Attempts.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="p",result="scheduled"} COUNT
# HELP scheduler_scheduling_attempt_duration_seconds Latency.
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.1"} BUCKET
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf"} BUCKET
scheduler_scheduling_attempt_duration_seconds_sum 1
scheduler_scheduling_attempt_duration_seconds_count BUCKET
# HELP berth_explain_explanations_total Explanations.
# TYPE berth_explain_explanations_total counter
berth_explain_explanations_total{namespace="theirs",outcome="placed"} 3
`

// Two scrapes of a scheduler: the variable resolves, a rate and a latency
// quantile over new observations are drawn, a quantile over none is not (a
// NaN), a disabled plugin's empty panel is skipped, an enabled plugin's is a
// finding, and a metric's own namespace label is kept as exported_namespace.
func TestEvalDashboards(t *testing.T) {
	dir := t.TempDir()
	write := func(name, count, bucket string) string {
		p := filepath.Join(dir, name)
		text := strings.NewReplacer("COUNT", count, "BUCKET", bucket).Replace(page)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	moving := []string{write("a", "1", "1"), write("b", "5", "3")}
	still := []string{write("c", "5", "3"), write("d", "5", "3")}

	var d dashboard
	d.Templating.List = append(d.Templating.List, struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Query string `json:"query"`
	}{Name: "job", Type: "query", Query: "label_values(berth_build_info, job)"})
	panel := func(title, expr string) {
		d.Panels = append(d.Panels, struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		}{Title: title, Targets: []struct {
			Expr string `json:"expr"`
		}{{Expr: expr}}})
	}
	panel("rate", `sum(rate(scheduler_schedule_attempts_total{job=~"$job", result="scheduled"}[5m]))`)
	panel("p99", `histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket{job=~"$job"}[5m])))`)
	panel("explain", `sum by (exported_namespace) (berth_explain_explanations_total{job=~"$job", namespace="ns"})`)
	panel("loadaware", `berth_loadaware_last_refresh_timestamp_seconds{job=~"$job"}`)
	target := map[string]string{"job": "berth-metrics", "namespace": "ns"}

	findings, report, err := evalDashboards(map[string]dashboard{"d": d}, moving, target, map[string]bool{"explain": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 0 {
		t.Errorf("findings with observations between the scrapes: %v", findings)
	}
	all := strings.Join(report, "\n")
	for _, want := range []string{`variable job = "berth-metrics"`, `panel "rate": 1 series`, `panel "p99": 1 series`, `panel "explain": 1 series`, `panel "loadaware": skipped`} {
		if !strings.Contains(all, want) {
			t.Errorf("report lacks %q:\n%s", want, all)
		}
	}

	findings, _, err = evalDashboards(map[string]dashboard{"d": d}, still, target, map[string]bool{"explain": true, "loadaware": true})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(findings, "\n")
	for _, want := range []string{`panel "p99" returns no series`, `panel "loadaware" returns no series`} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `panel "rate"`) {
		t.Errorf("a zero rate is drawn, not a finding:\n%s", got)
	}

	d.Templating.List[0].Query = "label_values(berth_confirmbinder_confirmations_total, job)"
	findings, _, err = evalDashboards(map[string]dashboard{"d": d}, moving, target, map[string]bool{"explain": true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(findings, "\n"); !strings.Contains(got, "variable job") || !strings.Contains(got, `panel "rate" returns no series`) {
		t.Errorf("a variable without a value must empty the panels:\n%s", got)
	}
}
