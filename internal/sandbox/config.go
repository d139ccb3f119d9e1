package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

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
