package deploy

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-scheduler/berth/test/integration/framework"
)

var _ = Describe("the gang-scheduling profile", func() {
	It("binds none of a group of three while only two fit, and all three once they do", func(ctx SpecContext) {
		cfg, err := framework.PrepareConfig(env.Dir, "gang.yaml", env.Kubeconfig, false, filepath.Join(root, "manifests", "examples", "gang-scheduling.yaml"))
		Expect(err).NotTo(HaveOccurred())
		logPath := filepath.Join(env.Dir, "gang.log")
		p, err := framework.StartSchedulerProcess(schedulerBin, cfg, logPath, "--feature-gates=GenericWorkload=true", "--v=2")
		Expect(err).NotTo(HaveOccurred())
		defer p.Stop()

		// Room for two one-CPU pods.
		_, err = framework.CreateNode(ctx, env.Client, framework.NodeSpec{Name: "gang-1", CPU: "2", Memory: "8Gi"})
		Expect(err).NotTo(HaveOccurred())
		// The worked example: a PodGroup with minCount 3 and its three pods.
		objs, err := framework.ReadObjects(filepath.Join(root, "manifests", "examples", "gang-podgroup.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Apply(ctx, objs, false)).To(Succeed())
		pods := []string{"trainer-0", "trainer-1", "trainer-2"}
		for _, name := range pods {
			Consistently(framework.NodeNameOf(ctx, env.Client, "default", name), "5s").Should(BeEmpty(), "scheduler log: %s", logPath)
		}

		// Room for the third: the whole group is bound.
		_, err = framework.CreateNode(ctx, env.Client, framework.NodeSpec{Name: "gang-2", CPU: "2", Memory: "8Gi"})
		Expect(err).NotTo(HaveOccurred())
		for _, name := range pods {
			Eventually(framework.NodeNameOf(ctx, env.Client, "default", name)).ShouldNot(BeEmpty(), "scheduler log: %s", logPath)
		}
	})
})
