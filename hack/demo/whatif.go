package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The demo's what-if: an operator about to change a CELPolicy rule of the
// running profile snapshots the cluster and replays it offline under the
// current and the proposed rules (kubectl berth snapshot, simulate), before
// the scheduler ever runs the change. Spot capacity got dear: batch pods
// should now prefer on-demand nodes.
const (
	whatIfProfile = "berth-scheduler"
	whatIfRule    = "batch-prefers-spot"
	whatIfScore   = "node.metadata.?labels.?lifecycle.orValue('') == 'on-demand' ? 100 : 0"
	// whatIfPod is the one pod the change moves, from whatIfFrom to an
	// on-demand node (which one depends on whether api, created in the same
	// second, is replaced before it: pods are replaced in creation order).
	whatIfPod, whatIfFrom = "batch-job", "spot-1"
)

// whatIfConfigs writes the running configuration's whatIfProfile alone
// (current) and with whatIfRule scoring whatIfScore (proposed), so that
// simulate replaces that profile's pods only.
func whatIfConfigs(dir string) (current, proposed string, err error) {
	var doc map[string]any
	if err := yaml.Unmarshal(schedulerConfig, &doc); err != nil {
		return "", "", fmt.Errorf("parsing the demo's configuration: %w", err)
	}
	var kept []any
	for _, p := range doc["profiles"].([]any) {
		if p.(map[string]any)["schedulerName"] == whatIfProfile {
			kept = append(kept, p)
		}
	}
	if len(kept) != 1 {
		return "", "", fmt.Errorf("the demo's configuration has %d profiles named %s, want 1", len(kept), whatIfProfile)
	}
	doc["profiles"] = kept
	write := func(name string) (string, error) {
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, raw, 0o600)
	}
	if current, err = write("whatif-current.yaml"); err != nil {
		return "", "", err
	}
	changed := false
	for _, pc := range kept[0].(map[string]any)["pluginConfig"].([]any) {
		pcm := pc.(map[string]any)
		if pcm["name"] != "CELPolicy" {
			continue
		}
		for _, r := range pcm["args"].(map[string]any)["rules"].([]any) {
			if rm := r.(map[string]any); rm["name"] == whatIfRule {
				rm["score"], changed = whatIfScore, true
			}
		}
	}
	if !changed {
		return "", "", fmt.Errorf("the demo's profile %s has no CELPolicy rule %s", whatIfProfile, whatIfRule)
	}
	proposed, err = write("whatif-proposed.yaml")
	return current, proposed, err
}

// runWhatIf snapshots the demo cluster and simulates it under the current
// and the proposed rule, prints the table and checks that the change moves
// whatIfPod, and nothing else.
func runWhatIf(ctx context.Context, kubectlBerth, kubeconfig, dir string) error {
	current, proposed, err := whatIfConfigs(dir)
	if err != nil {
		return err
	}
	snap := filepath.Join(dir, "cluster.json.gz")
	step("what-if: kubectl berth snapshot %s", snap)
	if out, err := exec.CommandContext(ctx, kubectlBerth, "snapshot", snap, "--kubeconfig", kubeconfig).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl berth snapshot: %w\n%s", err, out)
	}
	step("what-if: rule %s scores %q instead; kubectl berth simulate --mode replace, profile %s (offline: the cluster is not touched)", whatIfRule, whatIfScore, whatIfProfile)
	args := []string{"simulate", "--snapshot", snap, "--config", current, "--config", proposed, "--mode", "replace"}
	cmd := exec.CommandContext(ctx, kubectlBerth, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	fmt.Println(string(out))
	if err != nil {
		return fmt.Errorf("kubectl berth simulate: %w", err)
	}
	// The table's rows of changed pods: NAMESPACE POD CHANGE CURRENT
	// PROPOSED [WHY], after the header. A tie (another node that scored as
	// high) is no change.
	var changes []string
	moved, header := false, false
	rows := strings.Split(string(out), "\n")
	for i, row := range rows {
		if !strings.HasPrefix(row, "NAMESPACE ") {
			continue
		}
		header = true
		for _, r := range rows[i+1:] {
			f := strings.Fields(r)
			if len(f) < 5 || f[2] == "tie" {
				continue
			}
			changes = append(changes, fmt.Sprintf("%s %s %s -> %s", f[1], f[2], f[3], f[4]))
			// The why names the rule's plugin: it scored the on-demand
			// node higher than spot-1.
			moved = f[1] == whatIfPod && f[2] == "moved" && f[3] == whatIfFrom && onDemand(f[4]) && strings.Contains(r, "CELPolicy +")
		}
	}
	if !header {
		return fmt.Errorf("what-if: kubectl berth simulate printed no table of changes")
	}
	if len(changes) != 1 || !moved {
		return fmt.Errorf("what-if: changes [%s], want only %s moved from %s to an on-demand node", strings.Join(changes, "; "), whatIfPod, whatIfFrom)
	}
	return nil
}

// onDemand says whether node is one of the demo's on-demand nodes that no
// CELPolicy rule keeps batch pods off (not the GPU node).
func onDemand(node string) bool {
	for _, n := range demoNodes {
		if n.Name == node {
			_, gpu := n.Labels["nvidia.com/gpu.present"]
			return n.Labels["lifecycle"] == "on-demand" && !gpu
		}
	}
	return false
}
