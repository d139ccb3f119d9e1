package offline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// build loads and builds path offline.
func build(t *testing.T, path string) (*Scheduler, []Requirement, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := LoadConfig(klog.Background(), path)
	if err != nil {
		return nil, nil, err
	}
	s, err := Build(ctx, cfg, NewClients())
	if err != nil {
		return nil, nil, err
	}
	return s, Requirements(cfg, s.Profiles), nil
}

func TestEveryExampleConfigBuilds(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join("..", "..", "manifests", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range examples {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Kind string }
		if yaml.Unmarshal(raw, &doc) != nil || doc.Kind != "KubeSchedulerConfiguration" {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, reqs, err := build(t, f)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(s.Profiles) == 0 {
				t.Fatalf("%s: no profiles captured", f)
			}
			if filepath.Base(f) != "all-plugins.yaml" {
				return
			}
			var all *Profile
			for i := range s.Profiles {
				if s.Profiles[i].SchedulerName == "berth-all" {
					all = &s.Profiles[i]
				}
			}
			if all == nil {
				t.Fatalf("no berth-all profile in %+v", s.Profiles)
			}
			for _, want := range []string{"CELPolicy", "LoadAware", "ElasticQuota", "Coscheduling", "ConfirmBinder", "AdmissionFeedback", "Explain", "NodeResourcesFit"} {
				if !slices.Contains(all.Plugins, want) {
					t.Errorf("berth-all runs %v, want %s among them", all.Plugins, want)
				}
			}
			var plugins []string
			for _, r := range reqs {
				plugins = append(plugins, r.Plugin)
			}
			if !slices.Equal(plugins, []string{"Coscheduling", "ElasticQuota", "LoadAware"}) {
				t.Errorf("requirements for %v, want Coscheduling, ElasticQuota, LoadAware: %+v", plugins, reqs)
			}
			if !slices.Equal(reqs[0].Profiles, []string{"default-scheduler", "berth-all"}) {
				t.Errorf("Coscheduling is needed by %v, want both profiles (the queue sort is Coscheduling's in each)", reqs[0].Profiles)
			}
		})
	}
	if n < 8 {
		t.Fatalf("found %d example configs, want at least 8", n)
	}
}

func TestRefusesWhatStartUpRefuses(t *testing.T) {
	for file, want := range map[string][]string{
		"invalid-args.yaml":                      {"berth-invalid", `"CELPolicy"`, `rules[0] ("too-heavy").weight`, "must be in the range 1-100"},
		"bad-celpolicy-rule.yaml":                {"berth-bad-rule", `rules[1] ("typo").filter`, "undefined field 'lables'"},
		"validate/misspelt-field.yaml":           {`unknown field "usageThreshold"`},
		"validate/unknown-plugin.yaml":           {"CELPolicies"},
		"validate/queue-sort-differs.yaml":       {"profiles[1].plugins.queueSort", "must be the same for all profiles"},
		"validate/coscheduling-args-differ.yaml": {"profiles[1].pluginConfig.args", "queueSort must be the same for all profiles"},
		"validate/removed-lock.yaml":             {"leaderElection.resourceLock", `resourceLock value must be "leases"`},
	} {
		t.Run(file, func(t *testing.T) {
			_, _, err := build(t, filepath.Join("..", "..", "test", "integration", "testdata", file))
			if err == nil {
				t.Fatal("built, want an error")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
