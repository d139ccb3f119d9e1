package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// kubectl berth validate against the scheduler's own start-up (app.Setup on
// the suite's API server, Berth's registry): the same verdict for every
// config, and for a config the scheduler refuses, the scheduler's message.
var _ = Describe("kubectl berth validate", func() {
	// validate runs the built binary on path with no cluster to talk to.
	validate := func(ctx SpecContext, path string) (stdout, stderr string, code int) {
		GinkgoHelper()
		cmd := exec.CommandContext(ctx, kubectlBerthBin(), "validate", path)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(env.Dir, "no-such-kubeconfig"))
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), errOut.String(), exit.ExitCode()
		}
		Expect(err).NotTo(HaveOccurred())
		return out.String(), errOut.String(), 0
	}
	// prepare writes src with the suite's kubeconfig, as the scheduler needs
	// it, and nothing else changed (not sandbox.PrepareConfig: it turns leader
	// election off and gives every profile one queue sort).
	prepare := func(src string) string {
		GinkgoHelper()
		raw, err := os.ReadFile(src)
		Expect(err).NotTo(HaveOccurred())
		var doc map[string]any
		Expect(yaml.Unmarshal(raw, &doc)).To(Succeed(), src)
		cc, _ := doc["clientConnection"].(map[string]any)
		if cc == nil {
			cc = map[string]any{}
		}
		cc["kubeconfig"] = env.Kubeconfig
		doc["clientConnection"] = cc
		out, err := yaml.Marshal(doc)
		Expect(err).NotTo(HaveOccurred())
		cfg := filepath.Join(env.Dir, "validate-"+filepath.Base(filepath.Dir(src))+"-"+filepath.Base(src))
		Expect(os.WriteFile(cfg, out, 0o600)).To(Succeed())
		return cfg
	}

	DescribeTable("refuses what the scheduler refuses, with the scheduler's message",
		func(ctx SpecContext, src string, want ...string) {
			cfg := prepare(src)
			setupErr := framework.SetupScheduler(ctx, cfg)
			Expect(setupErr).To(HaveOccurred(), "the scheduler started with %s", src)
			for _, w := range want {
				Expect(setupErr.Error()).To(ContainSubstring(w))
			}
			stdout, stderr, code := validate(ctx, cfg)
			Expect(code).To(Equal(1), "stdout: %s\nstderr: %s", stdout, stderr)
			Expect(stdout).To(BeEmpty())
			Expect(stderr).To(Equal("error: " + cfg + ": " + setupErr.Error() + "\n"))
		},
		Entry("an arg out of range", filepath.Join("testdata", "invalid-args.yaml"), `"CELPolicy"`, `rules[0] ("too-heavy").weight`),
		Entry("a CEL rule that does not compile", filepath.Join("testdata", "bad-celpolicy-rule.yaml"), `rules[1] ("typo").filter`, "undefined field 'lables'"),
		Entry("a misspelt field", filepath.Join("testdata", "validate", "misspelt-field.yaml"), `unknown field "usageThreshold"`),
		Entry("a plugin no registry has", filepath.Join("testdata", "validate", "unknown-plugin.yaml"), "CELPolicies"),
		Entry("two queue sorts", filepath.Join("testdata", "validate", "queue-sort-differs.yaml"), "profiles[1].plugins.queueSort", "must be the same for all profiles"),
		Entry("Coscheduling (the queue sort) configured differently in two profiles", filepath.Join("testdata", "validate", "coscheduling-args-differ.yaml"), "queueSort must be the same for all profiles"),
		Entry("a leader election lock other than leases", filepath.Join("testdata", "validate", "removed-lock.yaml"), `resourceLock value must be "leases"`),
	)

	It("accepts every example config the scheduler starts with, listing its Berth plugins and the CRDs they need", func(ctx SpecContext) {
		root, err := sandbox.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		examples, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		// Not testdata/scheduler-config.yaml: its profiles use the suite's
		// test-only plugins, which no release registers.
		var configs []string
		for _, f := range examples {
			raw, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			var doc struct{ Kind string }
			if yaml.Unmarshal(raw, &doc) == nil && doc.Kind == "KubeSchedulerConfiguration" {
				configs = append(configs, f)
			}
		}
		Expect(len(configs)).To(BeNumerically(">=", 8))
		for _, src := range configs {
			cfg := prepare(src)
			Expect(framework.SetupScheduler(ctx, cfg)).To(Succeed(), src)
			stdout, stderr, code := validate(ctx, cfg)
			Expect(code).To(Equal(0), "%s: %s", src, stderr)
			Expect(stdout).To(HavePrefix(cfg+": valid\n"), src)
			if filepath.Base(src) == "all-plugins.yaml" {
				Expect(stdout).To(SatisfyAll(
					MatchRegexp(`profile berth-all: Berth plugins: .*CELPolicy`),
					ContainSubstring("needs, for Coscheduling (default-scheduler, berth-all): the API server serving podgroups.scheduling.x-k8s.io/v1alpha1"),
					ContainSubstring("install manifests/crds/scheduling.x-k8s.io_elasticquotas.yaml"),
				), src)
			}
		}
	})
})
