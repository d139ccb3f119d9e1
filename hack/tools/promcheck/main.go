// Command promcheck checks the monitoring bundle the Berth chart renders
// (helm template with metrics.prometheusRule and dashboards enabled): every
// alert expression and every dashboard panel query parses with Prometheus'
// PromQL parser, every alert has a severity, a summary and a runbook_url, the
// dashboard JSON is valid and each panel has a query, and every metric name
// they read is on a scheduler's live /metrics (-names, one name per line, as
// the deploy suite scraped it) or is one of the -external names other
// exporters provide. With -scrapes (pages of one live scheduler's /metrics),
// it loads them into an in-memory TSDB as Prometheus would store them and
// evaluates every dashboard variable and panel query: each must return
// series, but the panels of plugins the scheduler does not run (-plugins).
// It prints the checked names and exits 1 on any finding.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func main() {
	rendered := flag.String("rendered", "", "helm template output with the PrometheusRule and the dashboard ConfigMap")
	namesFile := flag.String("names", "", "metric names on the live /metrics, one per line")
	external := flag.String("external", "up", "comma-separated names other exporters provide (up is Prometheus' own)")
	scrapes := flag.String("scrapes", "", "comma-separated /metrics pages of one live scheduler, oldest first: evaluate every dashboard variable and panel against them")
	target := flag.String("target", "", "with -scrapes: the target labels Prometheus adds, name=value,... (job, namespace, pod)")
	rulesOut := flag.String("rules-out", "", "write the -rendered PrometheusRule's spec to this file as a Prometheus rule file (for promtool test rules) and exit")
	plugins := flag.String("plugins", "", "the Berth plugins the live scheduler's profiles enable, as in their metrics' names (explain,celpolicy,...); empty: all. Other plugins' metrics need not be on -names, and with -scrapes their panels may be empty")
	flag.Parse()
	if *rulesOut != "" {
		if err := writeRules(*rendered, *rulesOut); err != nil {
			fmt.Fprintln(os.Stderr, "promcheck:", err)
			os.Exit(2)
		}
		return
	}
	enabled := map[string]bool{}
	for _, p := range strings.Split(*plugins, ",") {
		if p = strings.TrimSpace(p); p != "" {
			enabled[p] = true
		}
	}
	findings, checked, dashboards, err := run(*rendered, *namesFile, strings.Split(*external, ","), enabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(2)
	}
	fmt.Printf("promcheck: %d metric names checked: %s\n", len(checked), strings.Join(checked, " "))
	if *scrapes != "" {
		if *target == "" {
			fmt.Fprintln(os.Stderr, "promcheck: -scrapes needs -target (the scrape's job, namespace, ...)")
			os.Exit(2)
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(*target, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = v
			}
		}
		evalFindings, report, err := evalDashboards(dashboards, strings.Split(*scrapes, ","), labels, enabled)
		if err != nil {
			fmt.Fprintln(os.Stderr, "promcheck:", err)
			os.Exit(2)
		}
		for _, r := range report {
			fmt.Println("promcheck:", r)
		}
		findings = append(findings, evalFindings...)
	}
	for _, f := range findings {
		fmt.Println("promcheck:", f)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}

// writeRules writes the spec of the one PrometheusRule in the rendered chart
// to out: its groups are a Prometheus rule file, as the operator hands them
// to Prometheus (every field kept, not only those promcheck reads).
func writeRules(renderedPath, out string) error {
	raw, err := os.ReadFile(renderedPath)
	if err != nil {
		return err
	}
	var specs []any
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var o struct {
			Kind string `json:"kind"`
			Spec any    `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return fmt.Errorf("decoding the rendered chart: %w", err)
		}
		if o.Kind == "PrometheusRule" {
			specs = append(specs, o.Spec)
		}
	}
	if len(specs) != 1 {
		return fmt.Errorf("%s: %d PrometheusRules, want one (render with metrics.prometheusRule.enabled=true)", renderedPath, len(specs))
	}
	b, err := yaml.Marshal(specs[0])
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func run(renderedPath, namesPath string, external []string, enabled map[string]bool) (findings, checked []string, dashboards map[string]dashboard, err error) {
	raw, err := os.ReadFile(renderedPath)
	if err != nil {
		return nil, nil, nil, err
	}
	live, err := readNames(namesPath)
	if err != nil {
		return nil, nil, nil, err
	}
	dashboards = map[string]dashboard{}
	for _, e := range external {
		if e = strings.TrimSpace(e); e != "" {
			live[e] = true
		}
	}
	used := map[string]string{} // name -> where first used
	exprs := 0
	promql := parser.NewParser(parser.Options{})
	check := func(where, expr string) {
		exprs++
		names, err := selectedNames(promql, expr)
		if err != nil {
			findings = append(findings, fmt.Sprintf("%s: %v", where, err))
			return
		}
		for _, name := range names {
			if _, seen := used[name]; !seen {
				used[name] = where
			}
		}
	}
	var rules, panels int
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, nil, nil, fmt.Errorf("decoding the rendered chart: %w", err)
		}
		switch {
		case o.Kind == "PrometheusRule":
			for _, g := range o.Spec.Groups {
				for _, r := range g.Rules {
					rules++
					where := fmt.Sprintf("rule %s/%s", g.Name, r.Alert+r.Record)
					check(where, r.Expr)
					if r.Alert == "" {
						continue
					}
					if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook_url"] == "" {
						findings = append(findings, where+": an alert needs labels.severity, annotations.summary and annotations.runbook_url")
					}
				}
			}
		case o.Kind == "ConfigMap" && strings.HasSuffix(o.Metadata.Name, "-dashboard"):
			for key, text := range o.Data {
				var d dashboard
				dec := json.NewDecoder(strings.NewReader(text))
				if err := dec.Decode(&d); err != nil {
					findings = append(findings, fmt.Sprintf("dashboard %s: invalid JSON: %v", key, err))
					continue
				}
				if _, err := dec.Token(); !errors.Is(err, io.EOF) {
					findings = append(findings, fmt.Sprintf("dashboard %s: data after the JSON object", key))
				}
				dashboards[key] = d
				for _, v := range d.Templating.List {
					if v.Type != "query" {
						continue
					}
					if sel, _, ok := labelValues(v.Query); ok {
						check(fmt.Sprintf("dashboard %s variable %s", key, v.Name), sel)
					} else {
						findings = append(findings, fmt.Sprintf("dashboard %s: variable %s: query %q is not label_values(metric, label)", key, v.Name, v.Query))
					}
				}
				for _, p := range d.Panels {
					panels++
					if len(p.Targets) == 0 {
						findings = append(findings, fmt.Sprintf("dashboard %s: panel %q has no query", key, p.Title))
					}
					for _, t := range p.Targets {
						check(fmt.Sprintf("dashboard %s panel %q", key, p.Title), t.Expr)
					}
				}
			}
		}
	}
	if rules == 0 || panels == 0 {
		findings = append(findings, fmt.Sprintf("%d rules and %d dashboard panels rendered: render with metrics.prometheusRule.enabled and dashboards.enabled", rules, panels))
	}
	for name, where := range used {
		if plugin, ok := berthPlugin(name); ok && len(enabled) > 0 && !enabled[plugin] {
			continue // a plugin the live scheduler does not run
		}
		checked = append(checked, name)
		if !live[name] {
			findings = append(findings, fmt.Sprintf("%s reads %s, which is not on the live /metrics", where, name))
		}
	}
	sort.Strings(checked)
	sort.Strings(findings)
	fmt.Printf("promcheck: %d rules, %d panels, %d expressions parsed\n", rules, panels, exprs)
	return findings, checked, dashboards, nil
}

// selectedNames parses expr and returns the metric names its selectors
// name, in order of appearance.
func selectedNames(p parser.Parser, expr string) ([]string, error) {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

func readNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	names := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if n := strings.TrimSpace(s.Text()); n != "" {
			names[n] = true
		}
	}
	return names, s.Err()
}
