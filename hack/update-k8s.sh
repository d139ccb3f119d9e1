#!/usr/bin/env bash
# Pins Berth to a Kubernetes release, in one command: rewrites the
# k8s.io/kubernetes requirement and the replace block that maps every staging
# module (listed as v0.0.0 in k8s.io/kubernetes' own go.mod) to the matching
# v0.x.y tag, tidies go.mod, raises the tools modules' shared requirements to
# Berth's (align-tools), and moves the chart's kubeVersion range to the new
# minor. A pre-release (v1.38.0-beta.0) pins the staging modules' matching
# pre-release (v0.38.0-beta.0): for a scratch branch, not for main.
#
#   hack/update-k8s.sh v1.38.0
#
# Then make build test; docs/compatibility.md lists what a bump has needed.
set -euo pipefail

version=${1:?usage: hack/update-k8s.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)(-(alpha|beta|rc)\.[0-9]+)?$ ]] ||
  { echo "version must look like v1.37.2 or v1.38.0-beta.0, got $version" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"

cd "$(dirname "$0")/.."
modfile=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
[[ -f $modfile ]] || { echo "cannot read go.mod of k8s.io/kubernetes@$version" >&2; exit 1; }

# Staging modules are the ones k8s.io/kubernetes replaces with ./staging/src/...
# The sample-* modules are examples that nothing imports; the proxy does not serve all of them.
mapfile -t mods < <(sed -n 's#^\s*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$modfile" | grep -v '^k8s.io/sample-' | sort)
((${#mods[@]})) || { echo "no staging modules found in $modfile" >&2; exit 1; }

go mod edit -require="k8s.io/kubernetes@$version"
# Drop the previous pins, then write the new ones.
for old in $(go mod edit -json | sed -n 's/^\s*"Path": "\(k8s\.io\/[^"]*\)",$/\1/p' | sort -u); do
  go mod edit -dropreplace="$old" 2>/dev/null || true
done
{
  echo
  echo "// Staging modules pinned to k8s.io/kubernetes $version (written by hack/update-k8s.sh)."
  echo "replace ("
  for m in "${mods[@]}"; do echo "	$m => $m $staging"; done
  echo ")"
} >>go.mod
go mod edit -fmt
go mod tidy
go run ./hack/align-tools hack/tools/kwok hack/tools/helm hack/tools/kustomize hack/tools/promcheck hack/tools/benchreport
# The chart installs on the minor it is built for.
sed -i "s/^kubeVersion: .*/kubeVersion: \">=1.${minor}.0-0 <1.$((minor + 1)).0-0\"/" charts/berth/Chart.yaml
echo "pinned k8s.io/kubernetes $version and ${#mods[@]} staging modules at $staging, tidied go.mod and the tools modules, chart kubeVersion 1.${minor}"
echo "now: make build test (the envtest binaries of $version are built by make)"
