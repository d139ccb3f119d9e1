package deploy

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

var _ = Describe("AdmissionFeedback across a scheduler restart", func() {
	It("keeps avoiding the node that refused a controller's pod: the restarted scheduler rebuilds the refusals from the Failed pods", func(ctx SpecContext) {
		cfg, err := sandbox.PrepareConfig(env.Dir, "admissionfeedback.yaml", env.Kubeconfig, false, filepath.Join(root, "manifests", "examples", "admissionfeedback.yaml"))
		Expect(err).NotTo(HaveOccurred())
		const ns, profile = "default", "berth-admissionfeedback"
		rc, err := sandbox.StartRefusalCluster(ctx, kwok, "restart")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rc.Close)

		first := filepath.Join(env.Dir, "af-restart-1.log")
		p1, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, first, "--v=2")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p1.Stop)
		r, err := sandbox.CreateReplicaSet(ctx, env.Client, rc.PodSpec(ns, "af-restart", profile), 1)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(r.Close)
		Eventually(rc.RefusedCount(ctx), 30*time.Second).Should(Equal(1), "log %s", first)
		Eventually(r.Active(ctx)).Should(HaveLen(1))
		Eventually(func() (string, error) {
			active, err := r.Active(ctx)()
			if err != nil || len(active) != 1 {
				return "", err
			}
			return sandbox.NodeNameOf(ctx, env.Client, ns, active[0])()
		}, 30*time.Second).Should(BeElementOf(rc.Others), "log %s", first)

		By("the scheduler is killed; the controller scales up; another scheduler starts")
		p1.Kill()
		scaled, err := r.ScaleUp(ctx)
		Expect(err).NotTo(HaveOccurred())
		second := filepath.Join(env.Dir, "af-restart-2.log")
		p2, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, second, "--v=2")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p2.Stop)
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, scaled), 30*time.Second).Should(BeElementOf(rc.Others), "log %s", second)
		Expect(rc.RefusedCount(ctx)()).To(Equal(1), "the restarted scheduler sent no pod back to %s", rc.BlackHole)
		Expect(logContains(second, `AdmissionFeedback: rebuilt refusals from Failed pods" refusals=1`)).To(BeTrue(), "log %s", second)
	})
})
