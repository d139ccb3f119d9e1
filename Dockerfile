# Berth scheduler image. The build stage runs `make build`, the same command
# CI and developers use, so the image's binary is built exactly like theirs.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is reused while go.mod and go.sum do not change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Version inputs come from build args because .git is not in the build context.
ARG BERTH_VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
RUN make build BERTH_VERSION=${BERTH_VERSION} GIT_COMMIT=${GIT_COMMIT}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/scheduler /usr/local/bin/berth-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/berth-scheduler"]
