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

// runGuide runs every shell block of page (a path under the repository)
// in order, as an operator follows it, with the kubectl and helm built
// here, against an API server of its own (the suite's holds the kustomize
// base's objects already, which a helm install would refuse to adopt);
// setup runs first. The image and the release's URLs point at this
// checkout. A block marked "not run by make test" (a kubelet's or a node's
// work) is skipped and says why. It returns the control plane.
func runGuide(ctx SpecContext, page string, wantRun, wantSkipped int, setup func(*sandbox.ControlPlane)) *sandbox.ControlPlane {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(root, page))
	Expect(err).NotTo(HaveOccurred())
	blocks, skipped := shellBlocks(string(raw))
	Expect(blocks).To(HaveLen(wantRun), "%s's blocks changed: check this spec still checks what they install", page)
	Expect(skipped).To(Equal(wantSkipped))
	Expect(strings.Count(string(raw), "<!-- not run")).To(Equal(skipped), "a not-run marker away from its block, or without a reason")

	cp, err := sandbox.StartControlPlane()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cp.Stop)
	if setup != nil {
		setup(cp)
	}
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
		GinkgoWriter.Printf("%s block %d:\n%s\n%s\n", page, i+1, b, out)
		Expect(err).NotTo(HaveOccurred(), "%s block %d:\n%s\n%s", page, i+1, b, out)
	}
	return cp
}

// Every install, upgrade and uninstall command the docs show, run as shown.
var _ = Describe("the install guide", func() {
	It("runs every install, upgrade and uninstall command docs/install.md shows", func(ctx SpecContext) {
		cp := runGuide(ctx, "docs/install.md", 8, 3, nil)
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

	It("runs the README's install commands", func(ctx SpecContext) {
		cp := runGuide(ctx, "README.md", 1, 1, nil)
		d, err := cp.Client.AppsV1().Deployments("berth-system").Get(ctx, "berth-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/berth:v0.1.0-test"))
	})

	It("runs docs/monitoring.md's install commands, with prometheus-operator's CRDs the page says the chart needs", func(ctx SpecContext) {
		cp := runGuide(ctx, "docs/monitoring.md", 2, 0, func(cp *sandbox.ControlPlane) {
			for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
				crds, err := sandbox.ReadObjects(filepath.Join(os.Getenv("BERTH_MONITORING_CRDS"), f))
				Expect(err).NotTo(HaveOccurred())
				Expect(cp.Apply(ctx, crds, false)).To(Succeed())
			}
			Eventually(func(g Gomega) {
				served, err := cp.Client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(served.APIResources).To(ContainElements(HaveField("Name", "servicemonitors"), HaveField("Name", "prometheusrules")))
			}, "30s").Should(Succeed())
		})
		crb, err := cp.Client.RbacV1().ClusterRoleBindings().Get(ctx, "berth-scheduler:berth-system:metrics-reader", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(crb.Subjects).To(ConsistOf(And(HaveField("Name", "prometheus-k8s"), HaveField("Namespace", "monitoring"))), "the scrape class's upgrade binds Prometheus' own ServiceAccount")
	})
})
