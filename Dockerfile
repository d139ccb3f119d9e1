# syntax=docker/dockerfile:1
# Berth scheduler image, multi-arch (linux/amd64, linux/arm64) with buildx:
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg BERTH_VERSION=v0.1.0 --build-arg GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=<the commit's date> -t ghcr.io/berth-scheduler/berth:v0.1.0 .
# (make image; the release workflow pushes both with SBOM and provenance.)
# The build stage runs on the builder's own platform and cross-compiles
# (CGO_ENABLED=0, no emulation), with `make build`, the command CI and
# developers use, so the image's binary is built exactly like theirs.
#
# Base images are pinned by the digest of their multi-arch index. These
# were read from public Dockerfiles (this repository's CI is offline and
# cannot resolve a tag); check and refresh them before a release with
#   crane digest golang:1.26
# (GO_IMAGE only bootstraps: the build runs go.mod's toolchain, see below.)
#   crane digest gcr.io/distroless/static-debian12:nonroot
ARG GO_IMAGE=golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first: this layer is reused while go.mod and go.sum do not change.
# The Go that builds is go.mod's toolchain line, as for make and the
# workflows (the image's own Go only fetches it: the golang image sets
# GOTOOLCHAIN=local, and the Makefile exports the pinned one to make build).
COPY go.mod go.sum ./
RUN GOTOOLCHAIN="$(sed -n 's/^toolchain //p' go.mod)" go mod download
COPY . .
# Version inputs come from build args because .git is not in the build
# context; BUILD_DATE is the commit's date (make release's), so that the
# same commit builds the same binary.
ARG BERTH_VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
ARG TARGETOS
ARG TARGETARCH
RUN GOOS=${TARGETOS} GOARCH=${TARGETARCH} make build \
      BERTH_VERSION=${BERTH_VERSION} GIT_COMMIT=${GIT_COMMIT} BUILD_DATE=${BUILD_DATE}

FROM ${BASE_IMAGE}
ARG BERTH_VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="Berth scheduler" \
      org.opencontainers.image.description="kube-scheduler built from upstream with Berth's scheduler-framework plugins" \
      org.opencontainers.image.source="https://github.com/berth-scheduler/berth" \
      org.opencontainers.image.url="https://github.com/berth-scheduler/berth" \
      org.opencontainers.image.documentation="https://github.com/berth-scheduler/berth#readme" \
      org.opencontainers.image.version="${BERTH_VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Berth"
COPY --from=build /src/bin/scheduler /usr/local/bin/berth-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/berth-scheduler"]
