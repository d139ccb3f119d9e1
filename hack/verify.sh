#!/usr/bin/env bash
# Fails when the tree is not as the generators, gofmt and `go mod tidy` leave it.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt needed on:"; echo "$unformatted"; fail=1
fi

echo ">> layout (pkg/ is the public surface)"
hack/verify-layout.sh || fail=1
echo ">> one version (VERSION, the chart, the manifests' image, the CHANGELOG)"
hack/verify-version.sh || fail=1
echo ">> the release check (hack/verifyrelease), the link checker (hack/linkcheck), the krew manifest's generator (hack/tools/krew)"
go test -count=1 ./hack/verifyrelease ./hack/linkcheck || fail=1
(cd hack/tools/krew && CGO_ENABLED=0 go test -trimpath -count=1 ./...) || fail=1
echo ">> Markdown links: every relative link and #anchor resolves (hack/linkcheck)"
go run ./hack/linkcheck . || fail=1
echo ">> promcheck's own tests (hack/tools/promcheck), built as make builds promcheck"
(cd hack/tools/promcheck && CGO_ENABLED=0 go test -trimpath -count=1 ./...) || fail=1
echo ">> vulncheck's own tests (hack/tools/vuln)"
(cd hack/tools/vuln && CGO_ENABLED=0 go test -trimpath -count=1 ./...) || fail=1
echo ">> the chart's alerts: promtool check rules and promtool test rules (test/monitoring/alerts_test.yaml)"
hack/test-alerts.sh || fail=1
echo ">> GitHub Actions workflows (actionlint)"
: "${ACTIONLINT:?ACTIONLINT must name the actionlint binary (make verify sets it)}"
"$ACTIONLINT" -no-color || fail=1
echo ">> every action the workflows use is pinned by commit (or is this repository's own)"
if unpinned=$(grep -nE '^\s*-?\s*uses:' .github/workflows/*.yml | grep -vE 'uses: \./|@[0-9a-f]{40}( |$)'); then
  echo "not pinned by a commit SHA:"; echo "$unpinned"; fail=1
fi

# Berth's own module is vetted by make lint: golangci-lint's govet runs go
# vet's analyzers beside the other linters on one load of the packages. A
# go vet ./... here as well type-checked every one of Berth's dependencies
# a second time (vet computes facts for each): most of verify's 1,188 s in a
# cold CI run at d81292e. The tools modules, which lint does not reach, are
# vetted here.
echo ">> go vet of the tools modules with code (Berth's own module: make lint)"
for mod in hack/tools/*/; do
  if compgen -G "$mod*.go" >/dev/null; then (cd "$mod" && go vet ./...) || fail=1; fi
done

echo ">> generated code"
hack/update-codegen.sh
hack/render-chart.sh
echo ">> go mod tidy (and the tools modules under hack/tools)"
go mod tidy
for mod in hack/tools/*/; do (cd "$mod" && go mod tidy); done
if ! git diff --quiet -- . || [[ -n $(git ls-files --others --exclude-standard) ]]; then
  echo "generated files or go.mod/go.sum are stale; run 'make generate' and 'go mod tidy' and commit:"
  git status --short
  git diff --stat
  fail=1
fi
exit $fail
