#!/usr/bin/env bash
# One version source: the VERSION file (X.Y.Z). The chart's version and
# appVersion, the image tag the manifests install and the CHANGELOG's newest
# section must agree with it; the binaries and the image tag read it through
# the Makefile's BERTH_VERSION. The chart's kubeVersion must be go.mod's
# Kubernetes minor, and its metadata present.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
version=$(tr -d '[:space:]' < VERSION)
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "VERSION: \"$version\" is not X.Y.Z"; exit 1
fi
# Top-level keys only (no indentation), quotes and a trailing comment dropped.
chart_key() { sed -n "s/^$1: *[\"']\{0,1\}\([^\"' #]*\).*/\1/p" charts/berth/Chart.yaml; }
chart_version=$(chart_key version)
app_version=$(chart_key appVersion)
[[ $chart_version == "$version" ]] || { echo "charts/berth/Chart.yaml: version $chart_version, VERSION says $version"; fail=1; }
[[ $app_version == "v$version" ]] || { echo "charts/berth/Chart.yaml: appVersion $app_version, VERSION says v$version"; fail=1; }
while IFS= read -r line; do
  file=${line%%:*}
  tag=${line##*ghcr.io/berth-scheduler/berth:}
  [[ $tag == "v$version" ]] || { echo "$file: installs ghcr.io/berth-scheduler/berth:$tag, VERSION says v$version"; fail=1; }
done < <(grep -rHo 'ghcr.io/berth-scheduler/berth:[^"[:space:]]*' manifests)
# kustomize's images: newTag overrides the tag in the resources.
while IFS= read -r line; do
  file=${line%%:*}
  tag=${line##*newTag: }
  [[ $tag == "v$version" ]] || { echo "$file: newTag $tag, VERSION says v$version"; fail=1; }
done < <(grep -rH 'newTag: ' --include=kustomization.yaml manifests | sed 's/["'"'"']//g')
# The image build's default, for a build without make's version.
dockerfile=$(sed -n 's/^ARG BERTH_VERSION=//p' Dockerfile | sort -u | paste -sd' ')
[[ $dockerfile == "v$version-dev" ]] || { echo "Dockerfile: ARG BERTH_VERSION=$dockerfile, VERSION says v$version-dev"; fail=1; }
# The chart installs on the Kubernetes minor the scheduler is built on (a
# kube-scheduler may not be newer than its kube-apiserver; Berth supports
# that one minor): kubeVersion is that minor's range, from go.mod's pin.
k8s=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p' go.mod | head -1)
read -r major minor <<< "$k8s"
want_kube=">=$major.$minor.0-0 <$major.$((minor + 1)).0-0"
kube_version=$(sed -n 's/^kubeVersion: *"\(.*\)".*/\1/p' charts/berth/Chart.yaml)
[[ $kube_version == "$want_kube" ]] || { echo "charts/berth/Chart.yaml: kubeVersion \"$kube_version\", go.mod's k8s.io/kubernetes v$major.$minor wants \"$want_kube\""; fail=1; }
# Chart.yaml's metadata Artifact Hub and helm show read.
for key in sources maintainers; do
  grep -q "^$key:" charts/berth/Chart.yaml || { echo "charts/berth/Chart.yaml: no $key"; fail=1; }
done
license=$(sed -n 's/^ *artifacthub.io\/license: *//p' charts/berth/Chart.yaml)
[[ $license == "Apache-2.0" ]] || { echo "charts/berth/Chart.yaml: artifacthub.io/license \"$license\", LICENSE is Apache-2.0"; fail=1; }
# Keep a Changelog: an Unreleased section, or one for this version, first.
first=$(grep -m1 -o '^## \[[^]]*\]' CHANGELOG.md || true)
case $first in
  "## [Unreleased]"|"## [$version]") ;;
  *) echo "CHANGELOG.md: the first section is '$first'; want '## [Unreleased]' or '## [$version]'"; fail=1 ;;
esac
exit $fail
