package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRules(t *testing.T) {
	dir := t.TempDir()
	rendered := filepath.Join(dir, "rendered.yaml")
	doc := `---
kind: ConfigMap
metadata: {name: x}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: berth}
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: up == 0
      keep_firing_for: 5m
`
	if err := os.WriteFile(rendered, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rules.yaml")
	if err := writeRules(rendered, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    keep_firing_for: 5m\n"
	if string(got) != want {
		t.Errorf("rules file:\n%s\nwant:\n%s", got, want)
	}
	if err := os.WriteFile(rendered, []byte("kind: ConfigMap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeRules(rendered, out); err == nil || !strings.Contains(err.Error(), "0 PrometheusRules") {
		t.Errorf("no PrometheusRule: %v, want an error", err)
	}
}
