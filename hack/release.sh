#!/usr/bin/env bash
# make release: every artifact of a Berth release, in dist/ (README,
# "Releases"). Needs Go, GNU tar (--sort), findutils (find -printf) and
# coreutils (sha256sum, numfmt). From the Makefile, which passes the version, the link flags
# and the tools it built:
#   BERTH_VERSION (v0.1.0 on the tag v0.1.0, else v0.1.0-dev+<sha>)
#   LDFLAGS       make build's link flags (the version, the commit, the
#                 commit's date: the same inputs build the same bytes)
#   BUILD_DATE    the commit's date, the archives' file times
#   HELM, CYCLONEDX, KREW (the krew manifest generator, hack/tools/krew),
#   KREW_BIN and KREW_VALIDATE (krew and its validate-krew-manifest), and
#   VERIFY (the release check, hack/verifyrelease), and GOTOOLCHAIN (go.mod's
#   toolchain line, which every binary must be built with)
#
# It writes:
#   berth-scheduler_<version>_linux_{amd64,arm64}.tar.gz
#   kubectl-berth_<version>_{linux,darwin}_{amd64,arm64}.tar.gz and
#     kubectl-berth_<version>_windows_amd64.tar.gz (krew's archive names)
#   <archive>.sbom.cdx.json   the CycloneDX SBOM of the archive's binary
#   berth-<chart version>.tgz the Helm chart (version and appVersion)
#   berth.yaml                the krew plugin manifest (plugins/berth.yaml in
#                             krew's index), with the archives' sha256
#                             (checked by krew's validate-krew-manifest and
#                             installed by krew)
#   checksums.txt             sha256 of every file above (sha256sum -c)
# and then checks them (hack/verifyrelease).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${BERTH_VERSION:?}" "${LDFLAGS:?}" "${BUILD_DATE:?}" "${HELM:?}" "${CYCLONEDX:?}" "${KREW:?}" "${KREW_BIN:?}" "${KREW_VALIDATE:?}" "${VERIFY:?}"
DIST=${DIST:-dist}
SCHEDULER_PLATFORMS=${SCHEDULER_PLATFORMS:-linux/amd64 linux/arm64}
KUBECTL_PLATFORMS=${KUBECTL_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}

start=$SECONDS
say() { printf '>> [%4ds] %s\n' $((SECONDS - start)) "$*"; }

rm -rf "$DIST"
mkdir -p "$DIST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# archive NAME PKG BIN OS ARCH: builds PKG for OS/ARCH as BIN and packs it
# with the LICENSE into DIST/NAME_<version>_OS_ARCH.tar.gz, reproducibly
# (sorted, owner 0, the commit's date), and writes its SBOM beside it.
archive() {
  local name=$1 pkg=$2 bin=$3 os=$4 arch=$5
  local base="${name}_${BERTH_VERSION}_${os}_${arch}"
  [[ $os == windows ]] && bin+=.exe
  say "building $base ($pkg)"
  mkdir -p "$work/$base"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$LDFLAGS" -o "$work/$base/$bin" "$pkg"
  cp LICENSE "$work/$base/LICENSE"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX --mtime="$BUILD_DATE" \
    -C "$work/$base" -cf - "$bin" LICENSE | gzip -n -9 > "$DIST/$base.tar.gz"
  # The SBOM from the binary's own build information (the modules linked
  # into it, with their go.sum hashes, and the binary's sha256), the
  # release's version as the component's; GOOS/GOARCH for the purls'
  # platform qualifiers (cyclonedx-gomod reads them from go env); no serial
  # number or timestamp, so the same commit writes the same SBOM.
  GOOS=$os GOARCH=$arch "$CYCLONEDX" bin -json -noserial -notimestamp -version "$BERTH_VERSION" \
    -output "$DIST/$base.tar.gz.sbom.cdx.json" "$work/$base/$bin"
}

for p in $SCHEDULER_PLATFORMS; do
  archive berth-scheduler ./cmd/scheduler berth-scheduler "${p%/*}" "${p#*/}"
done
for p in $KUBECTL_PLATFORMS; do
  archive kubectl-berth ./cmd/kubectl-berth kubectl-berth "${p%/*}" "${p#*/}"
done

chart_version=${BERTH_VERSION#v}
say "packaging the chart as berth-$chart_version.tgz (appVersion $BERTH_VERSION)"
"$HELM" package charts/berth --version "$chart_version" --app-version "$BERTH_VERSION" -d "$DIST" >/dev/null

say "writing the krew manifest berth.yaml"
"$KREW" -version "$BERTH_VERSION" -out "$DIST/berth.yaml" "$DIST"/kubectl-berth_*.tar.gz
# krew's own checks (the ones krew-index's CI runs), then an install by krew
# itself, from the manifest and this machine's archive, into a scratch
# KREW_ROOT: the plugin krew installs prints the release's version.
say "checking berth.yaml with krew's validate-krew-manifest, and installing it with krew"
"$KREW_VALIDATE" -manifest "$DIST/berth.yaml" -skip-install 2>&1 | sed 's/^/   /'
host_archive="$DIST/kubectl-berth_${BERTH_VERSION}_$(go env GOOS)_$(go env GOARCH).tar.gz"
if [[ -f $host_archive ]]; then
  KREW_ROOT="$work/krew" KREW_NO_UPGRADE_CHECK=1 "$KREW_BIN" install --manifest="$DIST/berth.yaml" --archive="$host_archive" 2>&1 | sed 's/^/   /'
  installed=$("$work/krew/bin/kubectl-berth" version)
  [[ $installed == *"$BERTH_VERSION"* ]] || { echo "krew installed a kubectl-berth that says '$installed', not $BERTH_VERSION" >&2; exit 1; }
else
  echo "   (no archive for this machine's platform: krew install not tried)"
fi

say "writing checksums.txt"
(cd "$DIST" && find . -type f ! -name checksums.txt -printf '%P\n' | LC_ALL=C sort | xargs sha256sum > checksums.txt)

# Every binary is built with go.mod's toolchain (the Makefile exports it as
# GOTOOLCHAIN), or with the Go on the PATH under make GO_TOOLCHAIN=local.
want_go=${GOTOOLCHAIN:?GOTOOLCHAIN is exported by the Makefile from the toolchain line of go.mod}
[[ $want_go == local ]] && want_go=$(go env GOVERSION)
"$VERIFY" -version "$BERTH_VERSION" -go "$want_go" "$DIST"
say "dist/ ($(du -sh "$DIST" | cut -f1)):"
(cd "$DIST" && find . -type f -printf '%s\t%P\n' | LC_ALL=C sort -k2 | numfmt --field=1 --to=iec --suffix=B --padding=7)
