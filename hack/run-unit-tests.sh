#!/usr/bin/env bash
# Runs the unit-test binaries that `go test -c -o DIR/ PKG...` compiled (make
# test-unit-bin), each in its package's directory as go test runs them, and
# prints go test's summary line per package (a failing package's output in
# full). A test binary is linked once this way: go test, asked to run tests
# after a -c build, links every binary again (links are not cached); three
# of the race binaries took about 10 s of CPU to link here. Like go test
# (-p, GOMAXPROCS by default), it runs UNIT_TEST_JOBS binaries at a time
# (the number of CPUs by default); a package's output is printed whole when
# it ends.
#
#	hack/run-unit-tests.sh DIR PKG...
set -uo pipefail
dir=$(cd "$1" && pwd) || exit 1 # absolute: each binary runs in its package's directory
shift
cd "$(dirname "$0")/.."
# The list first: a go list that fails must fail the run, not shorten it.
pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@") || exit 1
jobs=${UNIT_TEST_JOBS:-$(nproc)}
if [[ ! $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "run-unit-tests: UNIT_TEST_JOBS must be a number from 1, not \"$jobs\"" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# run PKG PKGDIR N: one binary, its summary (and a failure's output) into
# $out/N.txt; its exit status is the test's.
run() {
  local pkg=$1 pkgdir=$2 n=$3 bin start rc took log
  bin="$dir/${pkg##*/}.test"
  if [[ ! -x $bin ]]; then
    printf 'FAIL\t%s [no test binary %s: did make test-unit-bin fail?]\n' "$pkg" "$bin" > "$out/$n.txt"
    return 1
  fi
  start=$(date +%s.%N)
  log=$(cd "$pkgdir" && "$bin" -test.paniconexit0 -test.timeout=10m -test.count=1 2>&1)
  rc=$?
  took=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3fs", e - s }')
  if [[ $rc -eq 0 ]]; then
    printf 'ok  \t%s\t%s\n' "$pkg" "$took" > "$out/$n.txt"
  else
    printf '%s\nFAIL\t%s\t%s\n' "$log" "$pkg" "$took" > "$out/$n.txt"
  fi
  return $rc
}
fail=0
ran=0
declare -A name=() # pid -> output file number
# reap: wait for one running binary, print its result.
reap() {
  local pid rc=0
  wait -n -p pid "${!name[@]}" || rc=$?
  cat "$out/${name[$pid]}.txt"
  unset "name[$pid]"
  (( rc == 0 )) || fail=1
}
while read -r pkg pkgdir; do
  [[ -n $pkg ]] || continue
  while (( ${#name[@]} >= jobs )); do reap; done
  ran=$((ran + 1))
  run "$pkg" "$pkgdir" "$ran" &
  name[$!]=$ran
done <<< "$pkgs"
while (( ${#name[@]} > 0 )); do reap; done
if [[ $ran -eq 0 ]]; then
  echo "run-unit-tests: no package with tests among $*" >&2
  exit 1
fi
exit $fail
