package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The chart's identity, as manifests/second-scheduler renders it (make
// generate): the replicas run as its ServiceAccount, with exactly the RBAC
// it grants, on its Lease.
const (
	chartNamespace      = "berth-system"
	chartServiceAccount = "berth-scheduler"
	chartLease          = "berth-scheduler"
)

// installChartRBAC creates the namespace, the ServiceAccount and the RBAC
// of manifests/second-scheduler (the chart rendered with its defaults).
func installChartRBAC(ctx context.Context, cp *sandbox.ControlPlane, root string) error {
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		objs, err := sandbox.ReadObjects(filepath.Join(root, "manifests", "second-scheduler", f))
		if err != nil {
			return err
		}
		if err := cp.Apply(ctx, objs, false); err != nil {
			return fmt.Errorf("applying manifests/second-scheduler/%s: %w", f, err)
		}
	}
	return nil
}

// replicaKubeconfigs are a replica's kubeconfigs as the chart's
// ServiceAccount: through its proxy (the scheduler's client), and straight
// to the API server (delegated authentication and authorization of its
// /metrics, so a scrape answers during an outage).
func replicaKubeconfigs(cp *sandbox.ControlPlane, proxy *sandbox.Proxy, name string) (viaProxy, direct string, err error) {
	user := "system:serviceaccount:" + chartNamespace + ":" + chartServiceAccount
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + chartNamespace}
	if viaProxy, err = cp.UserKubeconfig(user, groups, proxy.Server(), name+"-sa.kubeconfig"); err != nil {
		return "", "", err
	}
	direct, err = cp.UserKubeconfig(user, groups, "", name+"-sa-direct.kubeconfig")
	return viaProxy, direct, err
}

// chartClient is the API client rate of the chart's scheduler
// configuration (manifests/second-scheduler/config.yaml, the chart rendered
// with its defaults).
type chartClient struct {
	QPS   float64 `json:"qps"`
	Burst int32   `json:"burst"`
}

// readChartClient reads the chart's clientConnection rate from its rendered
// configuration under root.
func readChartClient(root string) (chartClient, error) {
	path := filepath.Join(root, "manifests", "second-scheduler", "config.yaml")
	objs, err := sandbox.ReadObjects(path)
	if err != nil {
		return chartClient{}, err
	}
	if len(objs) != 1 {
		return chartClient{}, fmt.Errorf("%s: %d objects, want the ConfigMap alone", path, len(objs))
	}
	text, _, err := unstructured.NestedString(objs[0].Object, "data", "scheduler-config.yaml")
	if err != nil {
		return chartClient{}, fmt.Errorf("%s: %w", path, err)
	}
	var cfg struct {
		ClientConnection chartClient `json:"clientConnection"`
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		return chartClient{}, fmt.Errorf("%s: scheduler-config.yaml: %w", path, err)
	}
	if cfg.ClientConnection.QPS <= 0 || cfg.ClientConnection.Burst <= 0 {
		return chartClient{}, fmt.Errorf("%s: scheduler-config.yaml has no clientConnection qps and burst", path)
	}
	return cfg.ClientConnection, nil
}

// useChartConfig sets the config's leader election to the chart's Lease
// (the only one its Role lets it take), its API client's rate to the
// chart's (upstream's 50/100 holds a 1,000-node leader back: its status
// PATCHes wait on the client's rate limiter) and ConfirmBinder to the
// chart's confirm: Always. rate is readChartClient's.
func useChartConfig(path string, rate chartClient) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	cc, _ := doc["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["qps"], cc["burst"] = rate.QPS, rate.Burst
	doc["clientConnection"] = cc
	le, _ := doc["leaderElection"].(map[string]any)
	if le == nil {
		le = map[string]any{}
	}
	le["resourceNamespace"], le["resourceName"] = chartNamespace, chartLease
	doc["leaderElection"] = le
	// The chart's ConfirmBinder default: beside another binder (the
	// soak's foreign binder, foreign.go) every binding may race.
	profiles, _ := doc["profiles"].([]any)
	found := false
	for _, p := range profiles {
		prof, _ := p.(map[string]any)
		cfgs, _ := prof["pluginConfig"].([]any)
		for _, c := range cfgs {
			pc, _ := c.(map[string]any)
			if pc["name"] != "ConfirmBinder" {
				continue
			}
			args, _ := pc["args"].(map[string]any)
			if args == nil {
				args = map[string]any{}
			}
			args["confirm"] = "Always"
			pc["args"] = args
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s: no ConfirmBinder args to set confirm: Always in", path)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}
