package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's args in the config scheme, as in main
	"github.com/berth-scheduler/berth/pkg/registry"
)

// Scheduler is a Berth scheduler running in this process.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan error
}

// PrepareConfig writes dir/name: the KubeSchedulerConfiguration of the first
// source file, with the profiles of all sources (the first profile of a
// given schedulerName wins), clientConnection.kubeconfig pointing at
// kubeconfig (the files under manifests/ name the path a control-plane node
// has) and leader election on only if leaderElect. One scheduler can thus
// run the example configs of several plugins side by side. The scheduler
// wants one queue sort in every profile: when a source profile sets one
// (Coscheduling's), the profiles that set none get it too, as
// manifests/examples/coscheduling.yaml does for default-scheduler.
func PrepareConfig(dir, name, kubeconfig string, leaderElect bool, sources ...string) (string, error) {
	var doc map[string]any
	var profiles []any
	seen := map[string]bool{}
	for i, src := range sources {
		raw, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		var d map[string]any
		if err := yaml.Unmarshal(raw, &d); err != nil {
			return "", fmt.Errorf("parsing %s: %w", src, err)
		}
		if i == 0 {
			doc = d
		}
		ps, _ := d["profiles"].([]any)
		for _, p := range ps {
			pm, _ := p.(map[string]any)
			n, _ := pm["schedulerName"].(string)
			if n == "" {
				n = "default-scheduler"
			}
			if !seen[n] {
				seen[n] = true
				profiles = append(profiles, p)
			}
		}
	}
	if doc == nil {
		return "", fmt.Errorf("no config file given")
	}
	shareQueueSort(profiles)
	if len(profiles) > 0 {
		doc["profiles"] = profiles
	}
	doc["clientConnection"] = setKey(doc["clientConnection"], "kubeconfig", kubeconfig)
	doc["leaderElection"] = setKey(doc["leaderElection"], "leaderElect", leaderElect)
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, name)
	return dst, os.WriteFile(dst, out, 0o600)
}

// shareQueueSort gives every profile without a queueSort the first one set.
func shareQueueSort(profiles []any) {
	var qs any
	for _, p := range profiles {
		pm, _ := p.(map[string]any)
		plugins, _ := pm["plugins"].(map[string]any)
		if q, ok := plugins["queueSort"]; ok && qs == nil {
			qs = q
		}
	}
	if qs == nil {
		return
	}
	for _, p := range profiles {
		pm, _ := p.(map[string]any)
		if pm == nil {
			continue
		}
		plugins, _ := pm["plugins"].(map[string]any)
		if plugins == nil {
			plugins = map[string]any{}
			pm["plugins"] = plugins
		}
		if _, ok := plugins["queueSort"]; !ok {
			plugins["queueSort"] = qs
		}
	}
}

func setKey(m any, key string, value any) map[string]any {
	mm, _ := m.(map[string]any)
	if mm == nil {
		mm = map[string]any{}
	}
	mm[key] = value
	return mm
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
	s := &Scheduler{cancel: cancel, done: make(chan error, 1)}
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
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}
