package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// notRun marks a docs block make test does not run, with the reason.
var notRun = regexp.MustCompile(`^<!-- not run by make test: \S.* -->$`)

// shellBlocks returns the ```sh blocks of a Markdown page in order, and
// how many are marked notRun on the line above their fence (skipped).
func shellBlocks(page string) (blocks []string, skipped int) {
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		var body []string
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, lines[j])
		}
		if i > 0 && notRun.MatchString(strings.TrimSpace(lines[i-1])) {
			skipped++
		} else {
			blocks = append(blocks, strings.Join(body, "\n"))
		}
		i = j
	}
	return blocks, skipped
}

// The install guide as an operator follows it: every shell block of
// docs/install.md, in order, with the kubectl and helm built here, against
// an API server of its own (the suite's holds the kustomize base's objects
// already, which a helm install would refuse to adopt). The image and the
// release's URLs point at this checkout. A block marked "not run by make
// test" (a kubelet's or a node's work) is skipped and says why.
var _ = Describe("the install guide", func() {
	It("runs every install, upgrade and uninstall command docs/install.md shows", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
		Expect(err).NotTo(HaveOccurred())
		blocks, skipped := shellBlocks(string(raw))
		Expect(blocks).To(HaveLen(8), "the guide's blocks changed: check this spec still checks what they install")
		Expect(skipped).To(Equal(3))
		Expect(strings.Count(string(raw), "<!-- not run")).To(Equal(skipped), "a not-run marker away from its block, or without a reason")

		cp, err := sandbox.StartControlPlane()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cp.Stop)
		bin := GinkgoT().TempDir()
		kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
		Expect(kubectl).To(BeAnExistingFile(), "kubectl is built into KUBEBUILDER_ASSETS by make envtest-bin")
		Expect(os.Symlink(kubectl, filepath.Join(bin, "kubectl"))).To(Succeed())
		Expect(os.Symlink(os.Getenv("HELM"), filepath.Join(bin, "helm"))).To(Succeed())
		home := GinkgoT().TempDir()
		repl := strings.NewReplacer(
			"<registry>/berth", "registry.example/berth",
			"<tag>", "v0.1.0-test",
			"https://raw.githubusercontent.com/berth-scheduler/berth/v0.1.0/", root+"/")
		for i, b := range blocks {
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", repl.Replace(b))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+cp.Kubeconfig,
				"HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
			out, err := cmd.CombinedOutput()
			GinkgoWriter.Printf("docs/install.md block %d:\n%s\n%s\n", i+1, b, out)
			Expect(err).NotTo(HaveOccurred(), "docs/install.md block %d:\n%s\n%s", i+1, b, out)
		}

		// What the guide says it leaves: the CRDs served, the kustomize
		// base's scheduler, the quota for its priority class and the
		// control plane's extra role.
		served, err := cp.Client.Discovery().ServerResourcesForGroupVersion("scheduling.x-k8s.io/v1alpha1")
		Expect(err).NotTo(HaveOccurred())
		Expect(served.APIResources).To(ContainElements(HaveField("Name", "elasticquotas"), HaveField("Name", "podgroups")))
		d, err := cp.Client.AppsV1().Deployments("berth-system").Get(ctx, "berth-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Labels).NotTo(HaveKey("app.kubernetes.io/managed-by"), "the kustomize base's, not the uninstalled release's")
		_, err = cp.Client.CoreV1().ResourceQuotas("berth-system").Get(ctx, "berth-critical-pods", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cp.Client.RbacV1().ClusterRoles().Get(ctx, "berth:kube-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})
