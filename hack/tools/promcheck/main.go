// Command promcheck checks the monitoring bundle the Berth chart renders
// (helm template with metrics.prometheusRule and dashboards enabled): every
// alert expression and every dashboard panel query parses with Prometheus'
// PromQL parser, every alert has a severity, a summary and a runbook_url, the
// dashboard JSON is valid and each panel has a query, and every metric name
// they read is on a scheduler's live /metrics (-names, one name per line, as
// the deploy suite scraped it) or is one of the -external names other
// exporters provide. It prints the checked names and exits 1 on any finding.
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
	Title  string `json:"title"`
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
	flag.Parse()
	findings, checked, err := run(*rendered, *namesFile, strings.Split(*external, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(2)
	}
	fmt.Printf("promcheck: %d metric names checked: %s\n", len(checked), strings.Join(checked, " "))
	for _, f := range findings {
		fmt.Println("promcheck:", f)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}

func run(renderedPath, namesPath string, external []string) (findings, checked []string, err error) {
	raw, err := os.ReadFile(renderedPath)
	if err != nil {
		return nil, nil, err
	}
	live, err := readNames(namesPath)
	if err != nil {
		return nil, nil, err
	}
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
		e, err := promql.ParseExpr(expr)
		if err != nil {
			findings = append(findings, fmt.Sprintf("%s: %v", where, err))
			return
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
				if _, seen := used[vs.Name]; !seen {
					used[vs.Name] = where
				}
			}
			return nil
		})
	}
	var rules, panels int
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, nil, fmt.Errorf("decoding the rendered chart: %w", err)
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
		checked = append(checked, name)
		if !live[name] {
			findings = append(findings, fmt.Sprintf("%s reads %s, which is not on the live /metrics", where, name))
		}
	}
	sort.Strings(checked)
	sort.Strings(findings)
	fmt.Printf("promcheck: %d rules, %d panels, %d expressions parsed\n", rules, panels, exprs)
	return findings, checked, nil
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
