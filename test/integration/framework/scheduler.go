package framework

import (
	"context"

	dto "github.com/prometheus/client_model/go"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's args in the config scheme, as in main
	"github.com/berth-scheduler/berth/pkg/registry"
)

// Scheduler is a Berth scheduler running in this process.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan error
	sched  *scheduler.Scheduler
}

// HasNodes reports whether the scheduler's cache holds every named node: a
// spec that creates nodes and then a pod waits for it, or the pod may be
// scheduled (and explained) before the scheduler has seen all of them.
func (s *Scheduler) HasNodes(names ...string) bool {
	nodes := s.sched.Cache.Dump().Nodes
	for _, n := range names {
		if _, ok := nodes[n]; !ok {
			return false
		}
	}
	return true
}

// SetupScheduler builds a scheduler from a config file exactly as the
// binary's `--config` does (app.Setup with Berth's registry) without running
// it. Serving is off (no port, no certificates). Errors are Setup's.
func SetupScheduler(ctx context.Context, configFile string) error {
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0
	_, _, err := app.Setup(ctx, opts, registry.Options()...)
	return err
}

// StartScheduler builds a scheduler from configFile with app.Setup and runs
// it with app.Run until Stop. Upstream registers process-wide state in Run
// (configz, metrics), so a test process runs one scheduler; give it a config
// with one profile per scenario.
// overrides replaces plugin factories of Berth's registry.
func StartScheduler(ctx context.Context, configFile string, overrides runtime.Registry) (*Scheduler, error) {
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0
	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, registry.OptionsWith(overrides)...)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Scheduler{cancel: cancel, done: make(chan error, 1), sched: sched}
	go func() { s.done <- app.Run(ctx, cc, sched) }()
	return s, nil
}

// Stop stops the scheduler and waits for app.Run to return. app.Run returns
// an error even on a clean stop ("finished without leader elect"), so the
// error is only worth logging by the caller.
func (s *Scheduler) Stop() error {
	s.cancel()
	return <-s.done
}

// Counter reads a counter of the scheduler running in this process from its
// metrics registry: the series whose labels include all of labels (0 if none
// has been written yet).
func Counter(name string, labels map[string]string) (float64, error) {
	return value(name, labels, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// Gauge reads a gauge as Counter reads a counter.
func Gauge(name string, labels map[string]string) (float64, error) {
	return value(name, labels, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

func value(name string, labels map[string]string, get func(*dto.Metric) float64) (float64, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return get(m), nil
		}
	}
	return 0, nil
}
