package deploy

import (
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

var _ = Describe("kustomize build manifests/second-scheduler", func() {
	It("renders objects the API server accepts", func(ctx SpecContext) {
		kustomize := os.Getenv("KUSTOMIZE")
		Expect(kustomize).NotTo(BeEmpty(), "KUSTOMIZE is not set: run `make test-integration`, which installs the pinned kustomize")
		out, err := exec.CommandContext(ctx, kustomize, "build", filepath.Join(root, "manifests", "second-scheduler")).Output()
		Expect(err).NotTo(HaveOccurred())
		rendered := filepath.Join(env.Dir, "second-scheduler.rendered.yaml")
		Expect(os.WriteFile(rendered, out, 0o600)).To(Succeed())
		objs, err := sandbox.ReadObjects(rendered)
		Expect(err).NotTo(HaveOccurred())
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
		Expect(kinds).To(HaveKeyWithValue("Deployment", 1))
		Expect(kinds).To(HaveKeyWithValue("ConfigMap", 1))
		Expect(kinds).To(HaveKeyWithValue("ServiceAccount", 1))
		dryRun(ctx, objs) // kustomize puts the Namespace first
	})
})
