#!/usr/bin/env bash
# The layout rule (STYLE.md 19): pkg/ is the public surface, the registry and
# the plugins only; what only builds or tests them lives under internal/.
# Fails when a new top-level package appears under pkg/, or when a package
# under pkg/ imports anything under test/ (test code is never API).
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
fail=0

for dir in pkg/*/; do
  name=$(basename "$dir")
  case $name in
    registry|plugins) ;;
    *) echo "pkg/$name: only pkg/registry and pkg/plugins/<name> are public; move it under internal/ (internal/testing/ for test helpers)"; fail=1 ;;
  esac
done
for f in pkg/*; do
  [[ -d $f ]] || { echo "$f: pkg/ holds only the registry and plugins directories"; fail=1; }
done

# Imports of every package under pkg/, its tests' imports included.
while IFS=' ' read -r pkg imports; do
  for imp in $imports; do
    if [[ $imp == "$module/test/"* || $imp == "$module/test" ]]; then
      echo "$pkg imports $imp: packages under pkg/ must not import test/"
      fail=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./pkg/...)

if [[ $fail == 0 ]]; then echo ">> layout: pkg/ holds registry and plugins only, and imports nothing from test/"; fi
exit $fail
