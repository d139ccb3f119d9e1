#!/usr/bin/env bash
# make demo's build: every binary the sandbox runs, one step at a time, each
# with its elapsed time, a running count of the packages it compiles and of
# the modules it downloads, and what is left of a cold start. All are built
# with the same flags (CGO_ENABLED=0 -trimpath, see the Makefile), so the
# steps after the first reuse its build cache.
#
# Usage (from the Makefile): hack/demo-build.sh TARGET=DESCRIPTION=COLD_SECONDS...
# COLD_SECONDS is the step's time on a 2-core machine with empty module and
# build caches (measured; docs/development.md, "The sandbox and the tests").
set -euo pipefail

MAKE=${MAKE:-make}
start=$SECONDS

elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# progress passes make's messages and compiler errors through and condenses
# `go build -v`'s one line per compiled package into a count.
progress() {
  local n=0 d=0 line
  while IFS= read -r line; do
    case $line in
      "go: downloading "*)
        d=$((d + 1))
        if ((d % 50 == 0)); then echo "   ... $d modules downloaded ($(elapsed))"; fi ;;
      "" | *" "* | *:*) echo "$line" ;;
      *)
        n=$((n + 1))
        if ((n % 100 == 0)); then echo "   ... $n packages compiled ($(elapsed))"; fi ;;
    esac
  done
  echo "   $n packages compiled, $d modules downloaded"
}

left=0
for step in "$@"; do
  left=$((left + ${step##*=}))
done
echo ">> make demo: building what the sandbox runs; a cold start (empty caches, 2 cores) takes ~$(minutes "$left"), a warm one seconds"
for step in "$@"; do
  target=${step%%=*}
  rest=${step#*=}
  what=${rest%=*}
  cold=${rest##*=}
  echo ">> [$(elapsed)] $what (cold: ~$(minutes "$cold"); left of a cold start: ~$(minutes "$left"))"
  t=$SECONDS
  "$MAKE" -s --no-print-directory "$target" BUILD_FLAGS=-v 2>&1 | progress
  left=$((left - cold))
  echo ">> [$(elapsed)] $what: $((SECONDS - t))s"
done
