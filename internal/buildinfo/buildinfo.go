// Package buildinfo holds Berth's version, set at link time by the
// Makefile's ldflags, and berth_build_info, the gauge every Berth scheduler
// exports whatever its profiles enable (dashboards and alerts select the
// scheduler's scrape job by it).
package buildinfo

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/version"
)

// berthVersion is Berth's version: -X github.com/berth-scheduler/berth/internal/buildinfo.berthVersion=v0.1.0
var berthVersion = "v0.0.0-unset"

// Version is Berth's version as the build set it ("v0.0.0-unset" in a build
// without the Makefile's ldflags, such as go test).
func Version() string { return berthVersion }

var (
	info = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "berth_build_info",
		Help:           "Always 1: the Berth version (version) and the Kubernetes release its scheduler is built from (kubernetes) of this process.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version", "kubernetes"})
	registerOnce sync.Once
)

// Register adds berth_build_info to the legacy registry (the scheduler's
// /metrics). Safe to call more than once.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(info)
		info.WithLabelValues(berthVersion, version.Get().GitVersion).Set(1)
	})
}
