package deploy

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

var _ = Describe("the gang-scheduling profile", func() {
	It("binds none of a group of three while only two fit, and all three once they do", func(ctx SpecContext) {
		cfg, err := sandbox.PrepareConfig(env.Dir, "gang.yaml", env.Kubeconfig, false, filepath.Join(root, "manifests", "examples", "gang-scheduling.yaml"))
		Expect(err).NotTo(HaveOccurred())
		logPath := filepath.Join(env.Dir, "gang.log")
		p, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, logPath, "--feature-gates=GenericWorkload=true", "--v=2")
		Expect(err).NotTo(HaveOccurred())
		defer p.Stop()

		// The cluster is this spec's nodes only: room for two one-CPU pods.
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(BeEmpty(), "another spec left nodes behind")
		_, err = sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "gang-1", CPU: "2", Memory: "8Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			for _, n := range []string{"gang-1", "gang-2"} {
				_ = env.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
			}
		})
		// The worked example: a PodGroup with minCount 3 and its three pods.
		objs, err := sandbox.ReadObjects(filepath.Join(root, "manifests", "examples", "gang-podgroup.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Apply(ctx, objs, false)).To(Succeed())
		pods := []string{"trainer-0", "trainer-1", "trainer-2"}
		for _, name := range pods {
			Consistently(sandbox.NodeNameOf(ctx, env.Client, "default", name), "5s").Should(BeEmpty(), "scheduler log: %s", logPath)
		}

		// Room for the third: the whole group is bound.
		_, err = sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "gang-2", CPU: "2", Memory: "8Gi"})
		Expect(err).NotTo(HaveOccurred())
		for _, name := range pods {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, "default", name)).ShouldNot(BeEmpty(), "scheduler log: %s", logPath)
		}
	})
})
