# Berth — kube-scheduler with decision plugins. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO ?= go
# The Go toolchain every build, test and release uses, from one place: the
# toolchain line of go.mod (the release workflow's setup-go and the
# Dockerfile read the same line). Exported, so that a machine whose own Go
# differs (or that sets GOTOOLCHAIN=local) builds with exactly this one;
# the go command fetches it from the module proxy once (about 80 MB).
# `make GO_TOOLCHAIN=local` builds with the Go on the PATH instead.
GO_TOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)
$(if $(GO_TOOLCHAIN),,$(error go.mod has no toolchain line: pin the Go release builds use there))
export GOTOOLCHAIN := $(GO_TOOLCHAIN)
# The Kubernetes release Berth is built from, read from go.mod (hack/update-k8s.sh sets it).
K8S_VERSION := $(shell $(GO) mod edit -json | sed -n '/"Path": "k8s.io\/kubernetes"/{n;s/.*"Version": "\(.*\)".*/\1/p;q}')
$(if $(K8S_VERSION),,$(error cannot read the k8s.io/kubernetes version from go.mod))
K8S_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
K8S_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
# Berth's own version, from one source: the tag v<VERSION> when the commit
# is tagged (a release), else VERSION as a dev version with the commit. The
# binaries, the chart (hack/verify-version.sh) and the image tag read it.
VERSION_FILE := $(strip $(file < VERSION))
$(if $(VERSION_FILE),,$(error cannot read VERSION (missing or empty, or GNU make older than 4.2)))
BERTH_VERSION ?= $(shell git describe --tags --exact-match --dirty --match 'v$(VERSION_FILE)' 2>/dev/null || echo "v$(VERSION_FILE)-dev+$$(git rev-parse --verify -q --short HEAD 2>/dev/null || echo unknown)")
GIT_COMMIT ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
# The build date is the commit's (the build is reproducible, and an unchanged
# tree is not linked again by every target that depends on make build).
BUILD_DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)

# Upstream's version package must name a real Kubernetes version (an empty or
# unparsable gitVersion makes upstream panic); verflag's program name carries
# Berth's version into `scheduler --version`.
VERSION_PKG := k8s.io/component-base/version
K8S_LDFLAGS := -s -w \
	-X '$(VERSION_PKG).gitVersion=$(K8S_VERSION)' \
	-X '$(VERSION_PKG).gitMajor=$(K8S_MAJOR)' \
	-X '$(VERSION_PKG).gitMinor=$(K8S_MINOR)' \
	-X '$(VERSION_PKG).gitTreeState=clean' \
	-X '$(VERSION_PKG).buildDate=$(BUILD_DATE)'
LDFLAGS := $(K8S_LDFLAGS) \
	-X '$(VERSION_PKG).gitCommit=$(GIT_COMMIT)' \
	-X '$(VERSION_PKG)/verflag.programName=Berth $(BERTH_VERSION) built on Kubernetes' \
	-X 'github.com/berth-scheduler/berth/internal/buildinfo.berthVersion=$(BERTH_VERSION)'
# The image builds with exactly this command (see Dockerfile). BUILD_FLAGS=-v
# lists packages as they compile (make demo sets it: a cold build is minutes long).
BUILD_FLAGS ?=
BUILD_CMD = CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "$(LDFLAGS)"
# The sandbox drivers (make demo, make race-report) are built with the
# scheduler's flags so that they reuse its build cache instead of compiling
# Kubernetes a second time. (The scheduler_perf benchmark cannot: upstream's
# test API server finds its own source with runtime.Caller, which -trimpath
# turns into a module path.)
TOOL_BUILD_CMD = CGO_ENABLED=0 $(GO) build -trimpath

# One set of compiler flags for everything but the race detector: vet,
# lint, the binaries, kube-apiserver and kube-controller-manager, the
# integration and benchmark test binaries all compile Kubernetes the same
# way (static, -trimpath), so a cold machine compiles it twice (this and
# -race), not five times. The scheduler_perf harness finds its own source
# through TEST_SRCDIR/TEST_WORKSPACE under -trimpath (see test-bench-smoke).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# -race needs cgo.
RACE_ENV := CGO_ENABLED=1
# Upstream's test API server (scheduler_perf) finds its package directory
# through these when built with -trimpath.
BENCH_ENV := TEST_SRCDIR=$(shell $(GO) env GOMODCACHE) TEST_WORKSPACE=.

BIN := $(CURDIR)/bin
ENVTEST_DIR := $(BIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS := $(ENVTEST_DIR)

# required-version DIR,MODULE: the version of MODULE that DIR/go.mod
# requires, read from the file (no go command run at every make; each tool is a `tool`
# directive of its module, built by `go build` of the package).
required-version = $(shell awk '$$1 == "$(2)" && $$2 ~ /^v/ { print $$2; exit }' $(1)/go.mod)

# metrics-server, for LoadAware's MetricsAPI path in the sandbox and the
# tests: built from its own module (it pins its own Kubernetes libraries).
METRICS_SERVER_MOD := hack/tools/metrics-server
METRICS_SERVER_VERSION := $(call required-version,$(METRICS_SERVER_MOD),sigs.k8s.io/metrics-server)
METRICS_SERVER := $(BIN)/metrics-server-$(METRICS_SERVER_VERSION)

# kube-controller-manager, for the sandbox's real controllers (Deployments,
# ReplicaSets, Jobs, the garbage collector, node lifecycle): a tool line in
# go.mod, so it is built at the Kubernetes version Berth is built from.
# KWOK, for simulated kubelets: its own module (it pins its own Kubernetes
# libraries); its CRDs (Stage and the resource-usage kinds) come from that
# module at the same version.
KWOK_MOD := hack/tools/kwok
KWOK_VERSION := $(call required-version,$(KWOK_MOD),sigs.k8s.io/kwok)
KWOK := $(BIN)/kwok-$(KWOK_VERSION)
KWOK_CRDS := $(BIN)/crds/kwok-$(KWOK_VERSION)

# Helm, for make chart, make generate (the chart renders
# manifests/second-scheduler) and the chart's tests: its own module too.
HELM_MOD := hack/tools/helm
HELM_VERSION := $(call required-version,$(HELM_MOD),helm.sh/helm/v4)
HELM := $(BIN)/helm-$(HELM_VERSION)

# actionlint, for the GitHub Actions workflows (make verify): its own module.
ACTIONLINT_MOD := hack/tools/actionlint
ACTIONLINT_VERSION := $(call required-version,$(ACTIONLINT_MOD),github.com/rhysd/actionlint)
ACTIONLINT := $(BIN)/actionlint-$(ACTIONLINT_VERSION)

# helm-docs, for the chart's README (make generate writes it from
# values.yaml's comments; make verify fails when it is stale): its own module.
HELMDOCS_MOD := hack/tools/helmdocs
HELMDOCS_VERSION := $(call required-version,$(HELMDOCS_MOD),github.com/norwoodj/helm-docs)
HELMDOCS := $(BIN)/helm-docs-$(HELMDOCS_VERSION)

# The chart's monitoring bundle: prometheus-operator's ServiceMonitor and
# PrometheusRule CRDs for the test API server, from its Go module at this
# version (the module holds the manifests), and promcheck (Prometheus' PromQL
# parser, hack/tools/promcheck).
PROM_OPERATOR_VERSION := v0.85.0
PROM_OPERATOR_CRDS := $(BIN)/crds/prometheus-operator-$(PROM_OPERATOR_VERSION)
PROMCHECK := $(BIN)/promcheck
# promtool, for the alerts' unit tests (make verify, hack/test-alerts.sh):
# Prometheus' own, from promcheck's module (the same Prometheus), without
# its service-discovery plugins (the remove_all_sd build tag).
PROMTOOL := $(BIN)/promtool

# kustomize, for the deploy suite: its own module too, aligned with Berth's
# versions (kyaml and the kustomize API are in Berth's test build as well).
KUSTOMIZE_MOD := hack/tools/kustomize
KUSTOMIZE_VERSION := $(call required-version,$(KUSTOMIZE_MOD),sigs.k8s.io/kustomize/kustomize/v5)
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)

# vulncheck (hack/tools/vuln): govulncheck's library against the Go
# vulnerability database built from the golang.org/x/vulndb module its
# go.mod pins (make vulncheck; VULNDB_URL=https://vuln.go.dev checks the
# live database instead, as the GitHub workflows do).
VULN_MOD := hack/tools/vuln
VULNDB_VERSION := $(call required-version,$(VULN_MOD),golang.org/x/vulndb)
VULNCHECK := $(BIN)/vulncheck
VULNDB := $(BIN)/vulndb-$(VULNDB_VERSION)
VULNDB_URL ?= file://$(VULNDB)

# krew (hack/tools/krew): the krew manifest's generator (berth-krew, on
# krew's own types), krew's validate-krew-manifest and krew itself, which
# make release runs on dist/berth.yaml.
KREW_MOD := hack/tools/krew
KREW_VERSION := $(call required-version,$(KREW_MOD),sigs.k8s.io/krew)
KREW_GEN := $(BIN)/berth-krew
KREW_BIN := $(BIN)/krew-$(KREW_VERSION)
KREW_VALIDATE := $(BIN)/validate-krew-manifest-$(KREW_VERSION)

# kind (hack/tools/kind), for make kind-e2e (the GitHub workflow's kind job).
KIND_MOD := hack/tools/kind
KIND_VERSION := $(call required-version,$(KIND_MOD),sigs.k8s.io/kind)
KIND := $(BIN)/kind-$(KIND_VERSION)

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# A Docker tag has no '+': a dev version's build metadata becomes '-'.
IMAGE ?= ghcr.io/berth-scheduler/berth:$(subst +,-,$(BERTH_VERSION))

UNIT_PKGS = ./apis/... ./cmd/... ./internal/... ./pkg/... ./hack/soak

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build bin/scheduler (static, stripped, versioned: the image's build command) and bin/kubectl-berth (kubectl's plugin).
	@echo ">> building bin/scheduler (Berth $(BERTH_VERSION), Kubernetes $(K8S_VERSION)); a cold build takes ~5 min"
	$(BUILD_CMD) -o $(BIN)/scheduler ./cmd/scheduler
	$(BUILD_CMD) -o $(BIN)/kubectl-berth ./cmd/kubectl-berth

.PHONY: envtest-bin
envtest-bin: $(ENVTEST_DIR)/kube-apiserver $(ENVTEST_DIR)/etcd $(ENVTEST_DIR)/kube-controller-manager $(ENVTEST_DIR)/kubectl $(METRICS_SERVER) $(KWOK) $(KWOK_CRDS) ## Build kube-apiserver, kube-controller-manager, kubectl and etcd (versions pinned in go.mod), metrics-server and KWOK (hack/tools/*) from the Go module proxy.

# kubectl, as setup-envtest ships it beside kube-apiserver: the deploy suite
# runs the docs' install and upgrade commands with it (a tool of go.mod).
$(ENVTEST_DIR)/kubectl:
	@mkdir -p $(ENVTEST_DIR)
	@echo ">> building kubectl $(K8S_VERSION) into $(ENVTEST_DIR)"
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@.tmp k8s.io/kubernetes/cmd/kubectl
	@mv $@.tmp $@

$(ENVTEST_DIR)/kube-apiserver:
	@mkdir -p $(ENVTEST_DIR)
	@echo ">> building kube-apiserver $(K8S_VERSION) into $(ENVTEST_DIR) (cold: ~3 min, ~3 GiB)"
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver
	@mv $@.tmp $@

$(ENVTEST_DIR)/kube-controller-manager:
	@mkdir -p $(ENVTEST_DIR)
	@echo ">> building kube-controller-manager $(K8S_VERSION) into $(ENVTEST_DIR) (cold, after kube-apiserver: ~1 min)"
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@.tmp k8s.io/kubernetes/cmd/kube-controller-manager
	@mv $@.tmp $@

$(ENVTEST_DIR)/etcd:
	@mkdir -p $(ENVTEST_DIR)
	@echo ">> building etcd $$($(GO) list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) into $(ENVTEST_DIR)"
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -o $@.tmp go.etcd.io/etcd/server/v3
	@mv $@.tmp $@

$(METRICS_SERVER): $(METRICS_SERVER_MOD)/go.mod $(METRICS_SERVER_MOD)/go.sum
	@echo ">> building metrics-server $(METRICS_SERVER_VERSION) into $(BIN) (cold: ~2 min)"
	cd $(METRICS_SERVER_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w -X 'k8s.io/client-go/pkg/version.gitVersion=$(METRICS_SERVER_VERSION)'" -o $@.tmp sigs.k8s.io/metrics-server/cmd/metrics-server
	@mv $@.tmp $@

$(KWOK): $(KWOK_MOD)/go.mod $(KWOK_MOD)/go.sum
	@echo ">> building kwok $(KWOK_VERSION) into $(BIN) (cold: ~1.5 min)"
	cd $(KWOK_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/kwok/cmd/kwok
	@mv $@.tmp $@

$(KWOK_CRDS):
	@echo ">> KWOK $(KWOK_VERSION) CRDs from its Go module"
	dir=$$(cd $(KWOK_MOD) && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok); \
		mkdir -p $@.tmp && cp $$dir/kustomize/crd/bases/kwok.x-k8s.io_*.yaml $@.tmp/ && chmod u+w $@.tmp/* && mv $@.tmp $@

$(HELM): $(HELM_MOD)/go.mod $(HELM_MOD)/go.sum
	@echo ">> building helm $(HELM_VERSION) into $(BIN)"
	cd $(HELM_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w -X 'helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)'" -o $@.tmp helm.sh/helm/v4/cmd/helm
	@mv $@.tmp $@

# The chart's version: Berth's, without the v.
CHART_VERSION ?= $(patsubst v%,%,$(BERTH_VERSION))

.PHONY: chart
chart: $(HELM) ## Lint and package charts/berth into bin/charts (helm push bin/charts/berth-<version>.tgz oci://<registry>/charts publishes it).
	$(HELM) lint --strict charts/berth
	$(HELM) package charts/berth --version $(CHART_VERSION) --app-version $(BERTH_VERSION) --destination $(BIN)/charts
	@echo ">> $(BIN)/charts/berth-$(CHART_VERSION).tgz; push: $(HELM) push $(BIN)/charts/berth-$(CHART_VERSION).tgz oci://<registry>/charts"

$(PROM_OPERATOR_CRDS):
	@echo ">> prometheus-operator $(PROM_OPERATOR_VERSION) CRDs (ServiceMonitor, PrometheusRule) from its Go module"
	dir=$$($(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROM_OPERATOR_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		mkdir -p $@.tmp && cp $$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
		$$dir/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml $@.tmp/ && mv $@.tmp $@

$(PROMCHECK): $(wildcard hack/tools/promcheck/*.go) hack/tools/promcheck/go.mod hack/tools/promcheck/go.sum
	cd hack/tools/promcheck && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -o $@ .

$(VULNCHECK): $(wildcard $(VULN_MOD)/*.go) $(VULN_MOD)/go.mod $(VULN_MOD)/go.sum
	cd $(VULN_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@ .

# The database as vuln.go.dev serves it (index/ and ID/), from the OSV files
# of the pinned golang.org/x/vulndb module, indexed by vulndb's own indexdb.
$(VULNDB): $(VULN_MOD)/go.mod
	@echo ">> building the Go vulnerability database $(VULNDB_VERSION) into $(BIN)"
	rm -rf $@ $@.tmp
	cd $(VULN_MOD) && $(GO) mod download golang.org/x/vulndb && \
	  $(GO) tool indexdb -vulns "$$($(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv" -out $@.tmp
	mv $@.tmp $@

$(PROMTOOL): hack/tools/promcheck/go.mod hack/tools/promcheck/go.sum
	cd hack/tools/promcheck && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -tags remove_all_sd -ldflags "-s -w" -o $@ github.com/prometheus/prometheus/cmd/promtool

.PHONY: image
# IMAGE_PLATFORMS=linux/amd64,linux/arm64 with IMAGE_OUTPUT=--push builds
# both (a local --load holds one platform).
IMAGE_PLATFORMS ?= linux/$(shell $(GO) env GOARCH)
IMAGE_OUTPUT ?= --load
image: ## Build the container image with buildx (needs a Docker engine; the build command is `make build`'s): IMAGE_PLATFORMS (this machine's), IMAGE_OUTPUT (--load).
	docker buildx build --platform $(IMAGE_PLATFORMS) $(IMAGE_OUTPUT) --build-arg BERTH_VERSION=$(BERTH_VERSION) \
		--build-arg GIT_COMMIT=$(GIT_COMMIT) --build-arg BUILD_DATE=$(BUILD_DATE) -t $(IMAGE) .

##@ Release

CYCLONEDX_MOD := hack/tools/cyclonedx
CYCLONEDX_VERSION := $(call required-version,$(CYCLONEDX_MOD),github.com/CycloneDX/cyclonedx-gomod)
CYCLONEDX := $(BIN)/cyclonedx-gomod-$(CYCLONEDX_VERSION)
DIST ?= dist

$(KREW_GEN): $(wildcard $(KREW_MOD)/*.go) $(KREW_MOD)/go.mod $(KREW_MOD)/go.sum
	cd $(KREW_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@ .

$(KREW_BIN): $(KREW_MOD)/go.mod $(KREW_MOD)/go.sum
	@echo ">> building krew $(KREW_VERSION) into $(BIN)"
	cd $(KREW_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/krew/cmd/krew
	mv $@.tmp $@

$(KREW_VALIDATE): $(KREW_MOD)/go.mod $(KREW_MOD)/go.sum
	cd $(KREW_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/krew/cmd/validate-krew-manifest
	mv $@.tmp $@

$(CYCLONEDX): $(CYCLONEDX_MOD)/go.mod $(CYCLONEDX_MOD)/go.sum
	@echo ">> building cyclonedx-gomod $(CYCLONEDX_VERSION) into $(BIN)"
	cd $(CYCLONEDX_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
	mv $@.tmp $@

.PHONY: release
release: $(HELM) $(CYCLONEDX) $(KREW_GEN) $(KREW_BIN) $(KREW_VALIDATE) ## Write every artifact of a release into dist/: the scheduler (linux/amd64, arm64) and kubectl-berth (linux, darwin: amd64, arm64; windows/amd64) archives, an SBOM per binary, the chart, the krew manifest and checksums.txt; then check them (hack/release.sh). Cold: the scheduler compiles once per architecture.
	$(TOOL_BUILD_CMD) -o $(BIN)/berth-verifyrelease ./hack/verifyrelease
	BERTH_VERSION='$(BERTH_VERSION)' LDFLAGS="$(LDFLAGS)" BUILD_DATE='$(BUILD_DATE)' DIST='$(DIST)' \
		HELM=$(HELM) CYCLONEDX=$(CYCLONEDX) KREW=$(KREW_GEN) KREW_BIN=$(KREW_BIN) KREW_VALIDATE=$(KREW_VALIDATE) VERIFY=$(BIN)/berth-verifyrelease hack/release.sh

##@ Test

.PHONY: test
test: ## Run unit (RACE=1: with the race detector, as CI does), integration and benchmark smoke tests and the 3-minute soak (the README's test command).
	@# The unit tests compile in the background (make test-unit-build, at the
	@# lowest CPU priority; with RACE=1 that compiles Kubernetes a second
	@# time): it runs while the suites run, which leave a core mostly idle
	@# waiting on the API server, and so takes only CPU they do not use. The
	@# unit tests themselves run after the suites; go test links each test
	@# binary then (make test-unit-compile links nothing, see below).
	@mkdir -p $(BIN)
	@echo ">> compiling the unit tests$(if $(filter 1,$(RACE)), (race detector),) in the background (log: $(BIN)/test-unit-build.log)"
	@# The first suite (test/integration) needs only the binaries make demo
	@# builds and its own test binary: it runs while the rest compiles (the
	@# other suites' and the benchmark's test binaries, the deploy suite's
	@# tools, the soak driver: make test-prebuild, at nice 10, log
	@# $(BIN)/test-prebuild.log), in the CPU the suite leaves idle.
	@{ $(MAKE) --no-print-directory test-unit-build > $(BIN)/test-unit-build.log 2>&1 || true; } & build=$$!; \
	rc=0; $(MAKE) --no-print-directory build envtest-bin test-bin-first || rc=$$?; \
	if [ $$rc = 0 ]; then \
		echo ">> compiling what the later suites, the benchmark and the soak need in the background (log: $(BIN)/test-prebuild.log)"; \
		{ nice -n 10 $(MAKE) --no-print-directory test-prebuild > $(BIN)/test-prebuild.log 2>&1; echo $$? > $(BIN)/test-prebuild.rc; } & pre=$$!; \
		$(MAKE) --no-print-directory test-run-suites SUITES="$(FIRST_SUITE)" || rc=$$?; \
		wait $$pre; \
		if [ "$$(cat $(BIN)/test-prebuild.rc)" != 0 ]; then tail -50 $(BIN)/test-prebuild.log; rc=1; fi; \
	fi; \
	if [ $$rc = 0 ]; then \
		$(MAKE) --no-print-directory test-run-suites SUITES="$(LATER_SUITES)" test-bench-smoke test-soak || rc=$$?; \
	fi; \
	wait $$build; \
	$(MAKE) --no-print-directory test-unit || rc=$$?; \
	exit $$rc

# The unit tests are compiled ahead (make test-unit-build, in the
# background of make test and .ci/run) and linked only when they run: go
# list -export -test -deps compiles every package with tests, its test
# files and their dependencies into the build cache with go test's flags,
# and links nothing; make test-unit's go test then reuses all of it but
# the generated test mains (go test compiles those with -dwarf=false, a
# few seconds for all), links each test binary into a temporary directory
# of its own, runs it and deletes it. Linked ahead with go test -c, the binaries took 1.1 GB here
# (1.5 GB with -race), all on disk at once, and CI's disk ran out while
# linking them (stop 47).
# Only packages with tests: cmd/scheduler and pkg/registry (none) import
# kube-scheduler's app, so naming them race-compiled 403 more packages (the
# API server's libraries), 1,723 instead of 1,320, for no test (counted with
# go test -race -c -n -a).
# RACE=1 (.ci/run sets it): the unit tests under the race detector, which
# compiles Kubernetes a second time, with cgo and -race: at 1c0b00a that
# build was about 900 of the 2,265 CPU-seconds of a cold make test after
# make demo (19 min 41 s), which waited 107 s for it at the end. RACE=0, the
# default: the unit tests compiled as everything else is (CGO_ENABLED=0,
# -trimpath), from the build cache make demo filled.
RACE ?= 0
ifeq ($(RACE),1)
UNIT_TEST_FLAGS := -race
UNIT_TEST_ENV := $(RACE_ENV)
else
UNIT_TEST_FLAGS :=
UNIT_TEST_ENV := CGO_ENABLED=0
endif
# go list's test of a package that has tests (unit and integration lists).
HAS_TESTS := or .TestGoFiles .XTestGoFiles
UNIT_TEST_PKGS = $(shell $(GO) list -f '{{if $(HAS_TESTS)}}{{.ImportPath}}{{end}}' $(UNIT_PKGS))

.PHONY: test-unit-build
test-unit-build: ## Compile the unit tests (RACE=1: for the race detector; make test-unit-compile) at the lowest CPU and I/O priority (nice 19, ionice idle), one such build at a time (make test and .ci/run start it in the background).
	nice -n 19 ionice -c 3 $(MAKE) --no-print-directory test-unit-compile

.PHONY: test-unit-compile
test-unit-compile: ## Compile the unit tests and everything they import into the build cache (RACE=1: for the race detector), linking nothing.
	@mkdir -p $(BIN)
	flock $(BIN)/.test-unit-build.lock env $(UNIT_TEST_ENV) $(GO) list $(UNIT_TEST_FLAGS) -export -test -deps -f '' $(UNIT_TEST_PKGS) > /dev/null

# go test's own run: GOMAXPROCS packages at a time, each test binary linked
# into go test's temporary directory and deleted once it has run, a failing
# package's output printed whole. -vet=off: go vet's analyzers run in make
# lint (golangci-lint's govet), and here they took 20 of the 70 s that
# linking and starting the 23 race binaries took.
.PHONY: test-unit
test-unit: ## Run the unit tests (RACE=1: with the race detector).
	env $(UNIT_TEST_ENV) $(GO) test $(UNIT_TEST_FLAGS) -vet=off -count=1 -timeout 10m $(UNIT_TEST_PKGS)

# The suites' and the benchmark's test binaries, compiled by one go test -c
# at go's default parallelism (a go test -p 1 would also compile one package
# at a time) before any of them runs; each then runs from its package
# directory, as go test runs it. Up-to-date binaries are not linked again.
TEST_BIN := $(BIN)/test
# dir:import path of each package with tests under test/integration (go test -c names its binary after the path's last element).
INTEGRATION_SUITES = $(shell $(GO) list -f '{{if $(HAS_TESTS)}}{{.Dir}}:{{.ImportPath}}{{end}}' ./test/integration/...)
.PHONY: test-bins
test-bins: ## Compile the integration suites' and the benchmark's test binaries into bin/test.
	@mkdir -p $(TEST_BIN)
	$(GO) test -c -o $(TEST_BIN)/ ./test/integration/... ./test/bench

.PHONY: test-integration
test-integration: build envtest-bin demo-driver $(KUSTOMIZE) $(HELM) $(PROM_OPERATOR_CRDS) $(PROMCHECK) test-bins ## Run the envtest integration suites (real kube-apiserver, etcd, metrics-server, kube-controller-manager and KWOK; the deploy suite runs bin/scheduler, kustomize and the demo driver).
	@$(MAKE) --no-print-directory test-run-suites

# make test's order: the first suite (test/integration, which needs none of
# the deploy suite's tools) runs while test-prebuild compiles the rest.
FIRST_SUITE = $(firstword $(INTEGRATION_SUITES))
LATER_SUITES = $(wordlist 2,$(words $(INTEGRATION_SUITES)),$(INTEGRATION_SUITES))
.PHONY: test-bin-first test-prebuild test-run-suites
test-bin-first:
	@mkdir -p $(TEST_BIN)
	$(GO) test -c -o $(TEST_BIN)/ $(lastword $(subst :, ,$(FIRST_SUITE)))
test-prebuild: demo-driver $(KUSTOMIZE) $(HELM) $(PROM_OPERATOR_CRDS) $(PROMCHECK) test-bins
	$(TOOL_BUILD_CMD) -o $(BIN)/berth-soak ./hack/soak

# SUITES (dir:import path, as INTEGRATION_SUITES lists them; default all),
# one at a time: each starts its own control plane. Their binaries and tools
# must be built (make test-integration builds them first).
# A stuck spec is named, not only dumped: a spec still running after 3 min
# prints ginkgo's progress report (its goroutine's stack and the step it is
# in) every minute, and at 15 min ginkgo interrupts the suite, reports the
# spec it was in and runs the cleanup nodes, before go test's 20 min timeout
# panics with every goroutine's stack and no spec's name (a suite takes 2 to
# 6 min here).
SUITES ?= $(INTEGRATION_SUITES)
test-run-suites:
	for suite in $(SUITES); do \
		echo ">> $${suite##*:}"; \
		(cd $${suite%%:*} && BERTH_SCHEDULER_BIN=$(BIN)/scheduler BERTH_KUBECTL_BIN=$(BIN)/kubectl-berth BERTH_METRICS_SERVER_BIN=$(METRICS_SERVER) BERTH_DEMO_BIN=$(BIN)/berth-demo BERTH_KWOK_BIN=$(KWOK) BERTH_KWOK_CRDS=$(KWOK_CRDS) KUSTOMIZE=$(KUSTOMIZE) HELM=$(HELM) BERTH_MONITORING_CRDS=$(PROM_OPERATOR_CRDS) PROMCHECK=$(PROMCHECK) \
			$(TEST_BIN)/$${suite##*/}.test -test.v -test.timeout 20m -ginkgo.v -ginkgo.label-filter '!measure' \
				-ginkgo.timeout 15m -ginkgo.poll-progress-after 3m -ginkgo.poll-progress-interval 1m) || exit 1; \
	done

$(KIND): $(KIND_MOD)/go.mod $(KIND_MOD)/go.sum
	cd $(KIND_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/kind
	mv $@.tmp $@

.PHONY: kind-e2e
kind-e2e: build $(ENVTEST_DIR)/kubectl chart $(KIND) $(HELM) $(PROM_OPERATOR_CRDS) ## Run the image under a real kubelet (needs a Docker engine; the GitHub workflow's kind job): a kind cluster, the packaged chart as the second scheduler with helm test, pods through every plugin, /metrics through the ServiceMonitor's path, then the image as the control plane's kube-scheduler (hack/kind-e2e.sh).
	KIND=$(KIND) KUBECTL=$(ENVTEST_DIR)/kubectl HELM=$(HELM) PROM_CRDS=$(PROM_OPERATOR_CRDS) CHART=$(BIN)/charts/berth-$(CHART_VERSION).tgz hack/kind-e2e.sh

.PHONY: measure-burst
measure-burst: build envtest-bin $(HELM) $(KUSTOMIZE) test-bins ## Measure how fast the chart's default profile (every plugin) schedules a 1,000-pod burst at each clientConnection rate, through bin/scheduler against the deploy suite's API server (~10 min; prints pods/s per rate).
	cd test/integration/deploy && BERTH_SCHEDULER_BIN=$(BIN)/scheduler BERTH_KUBECTL_BIN=$(BIN)/kubectl-berth BERTH_METRICS_SERVER_BIN=$(METRICS_SERVER) BERTH_DEMO_BIN=$(BIN)/berth-demo BERTH_KWOK_BIN=$(KWOK) BERTH_KWOK_CRDS=$(KWOK_CRDS) KUSTOMIZE=$(KUSTOMIZE) HELM=$(HELM) BERTH_MONITORING_CRDS=$(PROM_OPERATOR_CRDS) PROMCHECK=$(PROMCHECK) \
		$(TEST_BIN)/deploy.test -test.timeout 40m -ginkgo.v -ginkgo.no-color -ginkgo.label-filter measure -ginkgo.timeout 35m > $(BIN)/measure-burst.log 2>&1 \
		|| { tail -50 $(BIN)/measure-burst.log; exit 1; }
	@grep -E '^ *qps ' $(BIN)/measure-burst.log

.PHONY: test-bench-smoke
test-bench-smoke: envtest-bin test-bins ## Run the scheduler_perf benchmark once at 100 nodes / 200 pods, every profile: it fails unless every pod is scheduled.
	cd test/bench && PATH="$(ENVTEST_DIR):$$PATH" $(BENCH_ENV) $(TEST_BIN)/bench.test -test.timeout 20m -test.run '^$$' -test.bench . -test.benchtime 1x \
		-perf-scheduling-label-filter smoke -data-items-dir $(BIN)/bench/smoke > $(BIN)/bench-smoke.log 2>&1 \
		|| { tail -100 $(BIN)/bench-smoke.log; exit 1; }
	@grep -E '^(ok|PASS|BenchmarkPerfScheduling/[^ ]+)' $(BIN)/bench-smoke.log | cut -c1-90

SOAK_MINUTES ?= 20
SOAK_NODES ?= 1000
SOAK_SEED ?= 0
SOAK_OUT ?= $(BIN)/soak
# SOAK_OPS: the workload's operations per second (2; a machine whose cores
# cannot keep 1,000 nodes' scheduler, API server and watcher up with it
# builds a backlog the 9-leadership invariant reports).
SOAK_OPS ?= 2
# SOAK_FAULT_EVERY: the mean time between faults (20s). At 1,000 nodes on
# two cores, faults every 20 s (a lost lease about every 80 s) left the
# leaders backlogged or absent for over half the run (docs/soak.md).
SOAK_FAULT_EVERY ?= 20s
# SOAK_SCHEDULER_GATES: more feature gates for the replicas ("Name=true,...").
SOAK_SCHEDULER_GATES ?=
SOAK_RUN = $(TOOL_BUILD_CMD) -o $(BIN)/berth-soak ./hack/soak && $(BIN)/berth-soak --scheduler $(BIN)/scheduler --assets $(ENVTEST_DIR) \
	--kwok $(KWOK) --kwok-crds $(KWOK_CRDS) --metrics-server $(METRICS_SERVER) --ops-per-second $(SOAK_OPS)

.PHONY: soak
soak: build envtest-bin ## Soak: two Berth replicas, real kube-controller-manager, SOAK_NODES KWOK nodes, a seeded random workload with faults, invariants checked from the API (SOAK_MINUTES=20 SOAK_NODES=1000 SOAK_SEED=0: a new seed); writes bin/soak/report.md and the replicas' RSS chart rss.svg.
	rm -f $(abspath $(SOAK_OUT))/report.json $(abspath $(SOAK_OUT))/rss.svg
	rc=0; $(SOAK_RUN) --minutes $(SOAK_MINUTES) --nodes $(SOAK_NODES) --seed $(SOAK_SEED) --fault-every $(SOAK_FAULT_EVERY) --scheduler-feature-gates "$(SOAK_SCHEDULER_GATES)" --out $(abspath $(SOAK_OUT)) || rc=$$?; \
	if [ -f $(abspath $(SOAK_OUT))/report.json ]; then \
		(cd hack/tools/benchreport && $(GO) run . -soak $(abspath $(SOAK_OUT))/report.json -soak-chart $(abspath $(SOAK_OUT))/rss.svg) && echo ">> wrote $(abspath $(SOAK_OUT))/rss.svg"; \
	fi; \
	exit $$rc

.PHONY: test-soak
test-soak: build envtest-bin ## The 3-minute soak of make test: seed 1, 200 nodes, a fault every 15s; fails on any violation (docs/soak.md).
	$(SOAK_RUN) --minutes 3 --nodes 200 --seed 1 --fault-every 15s --drain 2m --out $(BIN)/soak-test

# The planted faults of internal/mutant, each run as a short soak by
# soak-mutants (bin/scheduler-mutants: -tags soakmutants, never released).
# 50 nodes: the workload fills the cluster within the 3 minutes, so gangs
# wait for room and quotas reclaim (at 200 nodes a gang released one short
# and reclaim ignoring min went unseen: room was plentiful).
MUTANTS ?= confirmbinder-skips-check elasticquota-ignores-max reclaim-ignores-min preempts-higher-priority coscheduling-one-short admissionfeedback-forgets schedules-without-lease explain-forgets-pending
MUTANT_MINUTES ?= 3
MUTANT_NODES ?= 50

.PHONY: scheduler-mutants
scheduler-mutants: ## bin/scheduler-mutants: the scheduler with internal/mutant's planted faults (-tags soakmutants; for soak-mutants only).
	$(GO) build -tags soakmutants -o $(BIN)/scheduler-mutants ./cmd/scheduler

.PHONY: soak-mutants
soak-mutants: envtest-bin scheduler-mutants ## Proof the soak can fail: one short soak per planted fault (MUTANTS), each must end in a violation, and a control without one that must not; writes bin/soak-mutants/table.md (fault, caught by which invariant, after how long).
	@mkdir -p $(BIN)/soak-mutants; $(TOOL_BUILD_CMD) -o $(BIN)/berth-soak ./hack/soak
	@for m in none $(MUTANTS); do \
		echo ">> mutant $$m"; \
		nodes=$(MUTANT_NODES); planted=$$m; \
		case $$m in none) planted=;; esac; \
		$(BIN)/berth-soak --scheduler $(BIN)/scheduler-mutants --assets $(ENVTEST_DIR) --kwok $(KWOK) --kwok-crds $(KWOK_CRDS) --metrics-server $(METRICS_SERVER) \
			--minutes $(MUTANT_MINUTES) --nodes $$nodes --seed 1 --fault-every 15s --drain 1m --stop-on-violation --mutant "$$planted" --out $(BIN)/soak-mutants/$$m > $(BIN)/soak-mutants/$$m.log 2>&1 && rc=0 || rc=$$?; \
		echo "   exit $$rc: $$(grep -c '^VIOLATION' $(BIN)/soak-mutants/$$m.log || true) violations"; \
	done
	$(BIN)/berth-soak --mutants-table $(BIN)/soak-mutants none $(MUTANTS) | tee $(BIN)/soak-mutants/table.md

.PHONY: soak-leak
soak-leak: build envtest-bin ## Leaks: 25 minutes without leader kills or restarts, failing on a replica's RSS slope over 2 MiB/min or goroutine slope over 5/min (judged over a process start of at least 10 minutes).
	$(SOAK_RUN) --minutes 25 --nodes $(SOAK_NODES) --seed 3 --fault-every 30s \
		--faults node-add,node-cordon,node-delete,node-refuse,node-not-ready,node-relabel,metrics-server-restart,controller-manager-restart \
		--max-rss-slope 2 --max-goroutine-slope 5 --leak-window 10m --out $(BIN)/soak-leak

# make demo's build steps: target=description=seconds on a cold start (2
# cores, empty module and build caches; measured, see docs/development.md).
DEMO_STEPS = \
	build="bin/scheduler and bin/kubectl-berth"=180 \
	$(ENVTEST_DIR)/kube-apiserver="kube-apiserver $(K8S_VERSION)"=70 \
	$(ENVTEST_DIR)/etcd="etcd"=10 \
	$(ENVTEST_DIR)/kube-controller-manager="kube-controller-manager $(K8S_VERSION)"=60 \
	$(METRICS_SERVER)="metrics-server $(METRICS_SERVER_VERSION)"=100 \
	$(KWOK)="KWOK $(KWOK_VERSION)"=90 \
	$(KWOK_CRDS)="KWOK's CRDs"=1 \
	demo-driver="the demo driver"=10

.PHONY: demo
demo: ## Run the local sandbox: a control plane, the real metrics-server, Berth, demo workloads, and a table of decisions.
	@MAKE="$(MAKE)" hack/demo-build.sh $(DEMO_STEPS)
	$(BIN)/berth-demo --scheduler $(BIN)/scheduler --kubectl-berth $(BIN)/kubectl-berth --metrics-server $(METRICS_SERVER) --kwok $(KWOK) --kwok-crds $(KWOK_CRDS) --assets $(ENVTEST_DIR)

.PHONY: demo-driver
demo-driver:
	$(TOOL_BUILD_CMD) $(BUILD_FLAGS) -o $(BIN)/berth-demo ./hack/demo

.PHONY: race-report
race-report: build envtest-bin ## Measure overcommitted nodes with two schedulers racing, DefaultBinder vs ConfirmBinder (ROUNDS=5).
	$(TOOL_BUILD_CMD) -o $(BIN)/berth-race ./hack/race
	$(BIN)/berth-race --scheduler $(BIN)/scheduler --assets $(ENVTEST_DIR) --rounds $(or $(ROUNDS),5)

##@ Benchmarks

BENCH_COUNT ?= 5
BENCH_FULL_COUNT ?= 7
BENCH_DIR = $(BIN)/bench
# The test cases make bench-full runs at 5,000 nodes: the two profiles whose
# ratio operators read (Default, AllPlugins), the overhead gate
# (AllPluginsOverhead: every plugin, deciding as Default) and the
# constrained-pods pair.
BENCH_FULL_CASES = ^(Default|AllPlugins|AllPluginsOverhead|GPUAffinity|GPUCELPolicy)$$
# Runs $(2) rounds of the test cases matching $(3) at one size — one harness
# run per round, so the profiles interleave and each round has its own
# baseline — with a CPU profile of each measured phase, then the plugins'
# micro-benchmarks, then writes docs/benchmarks.md from all sizes measured
# so far (bin/bench/<size>).
define run-bench
	rm -rf $(BENCH_DIR)/$(1) && mkdir -p $(BENCH_DIR)/$(1)
	cd test/bench && $(GO) test -c -o $(BENCH_DIR)/bench.test .
	@start=$$(date +%s); cd test/bench && for round in $$(seq $(2)); do \
		echo ">> $(1): round $$round of $(2)"; \
		PATH="$(ENVTEST_DIR):$$PATH" $(BENCH_ENV) $(BENCH_DIR)/bench.test -test.run '^$$' -test.bench 'BenchmarkPerfScheduling/$(3)/' -test.benchtime 1x -test.timeout 300m \
			-perf-scheduling-label-filter $(1) -perf-cpuprofile -data-items-dir $(BENCH_DIR)/$(1) > $(BENCH_DIR)/$(1)-$$round.log 2>&1 \
			|| { tail -100 $(BENCH_DIR)/$(1)-$$round.log; exit 1; }; \
		awk '/^BenchmarkPerfScheduling\// { for (i = 2; i <= NF; i++) if ($$i == "SchedulingThroughput/Average") print "   " $$1 ": " $$(i-1) " pods/s" }' $(BENCH_DIR)/$(1)-$$round.log; \
	done; echo "$$(( $$(date +%s) - start ))" > $(BENCH_DIR)/$(1)-seconds
	$(GO) test -count=3 -run '^$$' -bench . -benchmem ./pkg/plugins/... | tee $(BENCH_DIR)/micro.txt
	cd hack/tools/benchreport && $(GO) run . -data $(BENCH_DIR)/quick,$(BENCH_DIR)/full -micro $(BENCH_DIR)/micro.txt -notes $(CURDIR)/docs/benchmarks-analysis.md -out $(CURDIR)/docs/benchmarks.md \
		-extra $(BENCH_DIR)/abba.md -k8s $(K8S_VERSION) -command "$(if $(filter full,$(1)),make bench-full (BENCH_FULL_COUNT=$(2)),make bench (BENCH_COUNT=$(2))); rows of the other size, if any, from its last run"
	@echo ">> wrote docs/benchmarks.md"
endef

# Upstream's kube-scheduler from the same release, built as bin/scheduler is
# (same flags, Kubernetes' version ldflags), for the ABBA comparison.
$(BIN)/kube-scheduler: go.mod go.sum
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-scheduler

.PHONY: bench-abba
bench-abba: build envtest-bin $(BIN)/kube-scheduler ## Berth's binary vs upstream's kube-scheduler, default profile, ABBA order (PAIRS=8), 500 nodes / 2,000 pods (ABBA_RATE=N: created at N a second from a run's first binding); writes bin/bench/abba.md.
	@mkdir -p $(BENCH_DIR)
	$(TOOL_BUILD_CMD) -o $(BIN)/berth-abba ./hack/abba
	$(BIN)/berth-abba --berth $(BIN)/scheduler --upstream $(BIN)/kube-scheduler --assets $(ENVTEST_DIR) --pairs $(or $(PAIRS),8) --rate $(or $(ABBA_RATE),0) \
		--out $(BENCH_DIR)/abba.md --command "make bench-abba PAIRS=$(or $(PAIRS),8)$(if $(ABBA_RATE), ABBA_RATE=$(ABBA_RATE))"

.PHONY: bench
bench: envtest-bin ## Benchmark every profile on scheduler_perf, 500 nodes / 1,000 pods, BENCH_COUNT rounds; write docs/benchmarks.md.
	$(call run-bench,quick,$(BENCH_COUNT),.*)

.PHONY: bench-full
bench-full: envtest-bin bench-abba ## The ABBA comparison, then Default, AllPlugins, AllPluginsOverhead and the GPU pair at 5,000 nodes, BENCH_FULL_COUNT rounds (7 rounds: 33 min on 2 cores; 44 min in all); write docs/benchmarks.md.
	$(call run-bench,full,$(BENCH_FULL_COUNT),$(BENCH_FULL_CASES))

.PHONY: bench-gang
bench-gang: envtest-bin ## Gangs only: upstream's GangScheduling vs Berth's Coscheduling, 500 nodes / 100 gangs of 10, BENCH_COUNT rounds; write docs/benchmarks-gang.md.
	rm -rf $(BENCH_DIR)/gang && mkdir -p $(BENCH_DIR)/gang
	cd test/bench && $(GO) test -c -o $(BENCH_DIR)/bench.test .
	cd test/bench && for round in $$(seq $(BENCH_COUNT)); do \
		echo ">> gang: round $$round of $(BENCH_COUNT)"; \
		PATH="$(ENVTEST_DIR):$$PATH" $(BENCH_ENV) $(BENCH_DIR)/bench.test -test.run '^$$' -test.bench '^BenchmarkPerfScheduling/(GangScheduling|Coscheduling|CoschedulingNoStatus)/' -test.benchtime 1x -test.timeout 60m \
			-perf-scheduling-label-filter quick -data-items-dir $(BENCH_DIR)/gang > $(BENCH_DIR)/gang-$$round.log 2>&1 \
			|| { tail -100 $(BENCH_DIR)/gang-$$round.log; exit 1; }; \
		awk '/^BenchmarkPerfScheduling\// { for (i = 2; i <= NF; i++) if ($$i == "SchedulingThroughput/Average") print "   " $$1 ": " $$(i-1) " pods/s" }' $(BENCH_DIR)/gang-$$round.log; \
	done
	cd hack/tools/benchreport && $(GO) run . -data $(BENCH_DIR)/gang -out $(CURDIR)/docs/benchmarks-gang.md -charts=false \
		-k8s $(K8S_VERSION) -command "make bench-gang (BENCH_COUNT=$(BENCH_COUNT))"
	@echo ">> wrote docs/benchmarks-gang.md"

.PHONY: bench-workload
bench-workload: envtest-bin ## The #28 overhead profile and the default profile on the overhead profile's workload (DefaultOverheadWorkload, the ratios' baseline) and on Default's, 5,000 nodes, BENCH_COUNT rounds (5 rounds: about 25 min); write docs/benchmarks-workload.md.
	rm -rf $(BENCH_DIR)/workload && mkdir -p $(BENCH_DIR)/workload
	cd test/bench && $(GO) test -c -o $(BENCH_DIR)/bench.test .
	cd test/bench && for round in $$(seq $(BENCH_COUNT)); do \
		echo ">> workload: round $$round of $(BENCH_COUNT)"; \
		PATH="$(ENVTEST_DIR):$$PATH" $(BENCH_ENV) $(BENCH_DIR)/bench.test -test.run '^$$' -test.bench 'BenchmarkPerfScheduling/^(Default|DefaultOverheadWorkload|AllPluginsOverhead)$$/' -test.benchtime 1x -test.timeout 120m \
			-perf-scheduling-label-filter full -perf-cpuprofile -data-items-dir $(BENCH_DIR)/workload > $(BENCH_DIR)/workload-$$round.log 2>&1 \
			|| { tail -100 $(BENCH_DIR)/workload-$$round.log; exit 1; }; \
		awk '/^BenchmarkPerfScheduling\// { for (i = 2; i <= NF; i++) if ($$i == "SchedulingThroughput/Average") print "   " $$1 ": " $$(i-1) " pods/s" }' $(BENCH_DIR)/workload-$$round.log; \
	done
	cd hack/tools/benchreport && $(GO) run . -data $(BENCH_DIR)/workload -out $(CURDIR)/docs/benchmarks-workload.md -charts=false -base DefaultOverheadWorkload \
		-k8s $(K8S_VERSION) -command "make bench-workload (BENCH_COUNT=$(BENCH_COUNT))"
	@echo ">> wrote docs/benchmarks-workload.md"

##@ Development

.PHONY: generate
generate: $(HELM) $(HELMDOCS) ## Generate deep-copy, defaulting and conversion code for the plugin args, the CRDs, manifests/second-scheduler from charts/berth, and the chart's README (helm-docs).
	hack/update-codegen.sh
	HELM=$(HELM) HELMDOCS=$(HELMDOCS) hack/render-chart.sh

.PHONY: verify
verify: $(HELM) $(HELMDOCS) $(ACTIONLINT) $(PROMCHECK) $(PROMTOOL) ## Check formatting, generated code (the rendered chart and its README included), the alerts' unit tests (promtool), go.mod tidiness (fails on a dirty tree), the workflows (actionlint), the Markdown links and anchors (hack/linkcheck), one version (VERSION) and vet of the tools modules (Berth is vetted by make lint).
	HELM=$(HELM) HELMDOCS=$(HELMDOCS) ACTIONLINT=$(ACTIONLINT) PROMCHECK=$(PROMCHECK) PROMTOOL=$(PROMTOOL) hack/verify.sh

$(HELMDOCS): $(HELMDOCS_MOD)/go.mod $(HELMDOCS_MOD)/go.sum
	@echo ">> building helm-docs $(HELMDOCS_VERSION) into $(BIN)"
	cd $(HELMDOCS_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp github.com/norwoodj/helm-docs/cmd/helm-docs
	@mv $@.tmp $@

$(ACTIONLINT): $(ACTIONLINT_MOD)/go.mod $(ACTIONLINT_MOD)/go.sum
	@echo ">> building actionlint $(ACTIONLINT_VERSION) into $(BIN)"
	cd $(ACTIONLINT_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp github.com/rhysd/actionlint/cmd/actionlint
	@mv $@.tmp $@

.PHONY: vulncheck
vulncheck: $(VULNCHECK) $(if $(filter file://$(VULNDB),$(VULNDB_URL)),$(VULNDB)) ## Check Berth's code, its modules and its Go toolchain (go.mod's toolchain line) for known vulnerabilities it reaches (govulncheck); hack/vulncheck-accepted.txt lists what has no fixed release yet, with why.
	$(VULNCHECK) -db $(VULNDB_URL) -accepted hack/vulncheck-accepted.txt ./...

# LINT_FLAGS: extra golangci-lint run flags (.ci/run sets a longer --timeout).
LINT_FLAGS ?=

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (installed from the Go module proxy at a pinned version): govet (go vet's analyzers), staticcheck and the rest of .golangci.yaml.
	$(GOLANGCI_LINT) run $(LINT_FLAGS) ./...

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	@echo ">> installing golangci-lint $(GOLANGCI_LINT_VERSION)"
	GOBIN=$(BIN)/.golangci $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(BIN)/.golangci/golangci-lint $@

$(KUSTOMIZE): $(KUSTOMIZE_MOD)/go.mod $(KUSTOMIZE_MOD)/go.sum
	@mkdir -p $(BIN)
	@echo ">> building kustomize $(KUSTOMIZE_VERSION) into $(BIN)"
	cd $(KUSTOMIZE_MOD) && CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/kustomize/kustomize/v5
	@mv $@.tmp $@

.PHONY: clean
clean: ## Remove build output (bin/, envtest binaries included, and dist/).
	rm -rf $(BIN) $(DIST)
