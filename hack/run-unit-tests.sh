#!/usr/bin/env bash
# Runs the unit-test binaries that `go test -c -o DIR/ PKG...` compiled (make
# test-unit-bin), each in its package's directory as go test runs them, and
# prints go test's summary line per package (a failing package's output in
# full). A test binary is linked once this way: go test, asked to run tests
# after a -c build, links every binary again (links are not cached); three
# of the race binaries took about 10 s of CPU to link here.
#
#	hack/run-unit-tests.sh DIR PKG...
set -uo pipefail
dir=$(cd "$1" && pwd) || exit 1 # absolute: each binary runs in its package's directory
shift
cd "$(dirname "$0")/.."
# The list first: a go list that fails must fail the run, not shorten it.
pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@") || exit 1
fail=0
ran=0
while read -r pkg pkgdir; do
  [[ -n $pkg ]] || continue
  bin="$dir/${pkg##*/}.test"
  if [[ ! -x $bin ]]; then
    printf 'FAIL\t%s [no test binary %s: did make test-unit-bin fail?]\n' "$pkg" "$bin"
    fail=1
    continue
  fi
  start=$(date +%s.%N)
  out=$(cd "$pkgdir" && "$bin" -test.paniconexit0 -test.timeout=10m -test.count=1 2>&1)
  rc=$?
  took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3fs", e - s }')
  ran=$((ran + 1))
  if [[ $rc -eq 0 ]]; then
    printf 'ok  \t%s\t%s\n' "$pkg" "$took"
  else
    printf '%s\nFAIL\t%s\t%s\n' "$out" "$pkg" "$took"
    fail=1
  fi
done <<< "$pkgs"
if [[ $ran -eq 0 ]]; then
  echo "run-unit-tests: no package with tests among $*" >&2
  exit 1
fi
exit $fail
