#!/usr/bin/env bash
# The chart's alerts under promtool's unit tests (test/monitoring/alerts_test.yaml)
# and its rule checks: renders the chart's PrometheusRule (release berth in
# namespace berth-system), writes its spec as a rule file (promcheck
# -rules-out) beside a copy of the tests, and runs promtool check rules and
# promtool test rules. make verify runs it; HELM, PROMCHECK and PROMTOOL name
# the binaries (make builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELM:?HELM must name the helm binary (make verify sets it)}"
: "${PROMCHECK:?PROMCHECK must name the promcheck binary (make verify sets it)}"
: "${PROMTOOL:?PROMTOOL must name the promtool binary (make verify sets it)}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$HELM" template berth charts/berth --namespace berth-system \
  --set metrics.prometheusRule.enabled=true --show-only templates/prometheusrule.yaml > "$work/rendered.yaml"
"$PROMCHECK" -rendered "$work/rendered.yaml" -rules-out "$work/rules.yaml"
cp test/monitoring/alerts_test.yaml "$work/"
"$PROMTOOL" check rules --lint=all --lint-fatal "$work/rules.yaml"
"$PROMTOOL" test rules "$work/alerts_test.yaml"
