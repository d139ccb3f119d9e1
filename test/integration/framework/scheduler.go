package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's args in the config scheme, as in main
	"github.com/berth-scheduler/berth/pkg/registry"
)

// Scheduler is a Berth scheduler running in this process.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan error
}

// PrepareConfig copies a KubeSchedulerConfiguration file into dir, pointing
// clientConnection.kubeconfig at kubeconfig (the files under manifests/ name
// the path a control-plane node has) and turning leader election off unless
// leaderElect is true. It returns the new file's path.
func PrepareConfig(src, dir, kubeconfig string, leaderElect bool) (string, error) {
	raw, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("parsing %s: %w", src, err)
	}
	cc, _ := doc["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	doc["clientConnection"] = cc
	le, _ := doc["leaderElection"].(map[string]any)
	if le == nil {
		le = map[string]any{}
	}
	le["leaderElect"] = leaderElect
	doc["leaderElection"] = le
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	return dst, os.WriteFile(dst, out, 0o600)
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
func StartScheduler(ctx context.Context, configFile string) (*Scheduler, error) {
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	opts.SecureServing.BindPort = 0
	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, registry.Options()...)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Scheduler{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- app.Run(ctx, cc, sched) }()
	return s, nil
}

// Stop stops the scheduler and waits for app.Run to return.
func (s *Scheduler) Stop() {
	s.cancel()
	<-s.done
}
