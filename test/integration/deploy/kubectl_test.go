package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// bin/kubectl-berth as kubectl runs it: its help names the command as the
// user types it, and it prints the version of the build (the Makefile's
// VERSION and the Kubernetes release in go.mod).
var _ = Describe("kubectl berth", func() {
	run := func(args ...string) string {
		GinkgoHelper()
		bin := os.Getenv("BERTH_KUBECTL_BIN")
		Expect(bin).NotTo(BeEmpty(), "BERTH_KUBECTL_BIN is not set: run `make test-integration`")
		out, err := exec.Command(bin, args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s %v: %s", bin, args, out)
		return string(out)
	}

	It("says kubectl berth in its help, not kubectl-berth", func() {
		help := run("--help")
		Expect(help).To(ContainSubstring("kubectl berth [command]"))
		Expect(help).To(ContainSubstring(`Use "kubectl berth [command] --help"`))
		Expect(help).NotTo(ContainSubstring("kubectl-berth [command]"))
		Expect(run("explain", "--help")).To(And(ContainSubstring("kubectl berth explain (POD | --pending) [flags]"),
			ContainSubstring("kubectl berth explain --pending -A"), MatchRegexp(`-o, --output string\s+Output format\. One of: \(table, json, yaml, kyaml, name, jsonpath, jsonpath-as-json, jsonpath-file\)\. \(default "table"\)`)))
	})

	It("prints the build's Berth and Kubernetes versions", func() {
		raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
		Expect(err).NotTo(HaveOccurred())
		out := run("version")
		Expect(out).To(HavePrefix("kubectl-berth v" + strings.TrimSpace(string(raw))))
		Expect(out).To(MatchRegexp(`\(Kubernetes v1\.[0-9]+\.[0-9]+\)`))
	})
})
