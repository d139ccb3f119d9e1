package integration

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// newNamespace gives a spec a namespace of its own and removes it afterwards.
func newNamespace(ctx SpecContext, prefix string) string {
	ns, err := env.Client.CoreV1().Namespaces().Create(ctx, sandbox.Namespace(prefix), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		// No kubelet runs: delete pods at once, or they stay Terminating.
		Expect(env.Client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})).To(Succeed())
		Expect(env.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})).To(Succeed())
	})
	return ns.Name
}

// createNodes creates nodes and deletes them when the spec ends, so specs do
// not see each other's nodes.
func createNodes(ctx SpecContext, specs ...sandbox.NodeSpec) {
	GinkgoHelper()
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		_, err := sandbox.CreateNode(ctx, env.Client, s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, s.Name, metav1.DeleteOptions{})).To(Succeed())
		})
		names = append(names, s.Name)
	}
	// A pod created next must be scheduled over these nodes: wait until the
	// scheduler's cache holds them all (CI at 212e177 saw CELPolicy's spot
	// spec's pod placed before its spot node reached the cache).
	Eventually(func() bool { return scheduler.HasNodes(names...) }).Should(BeTrue())
}

// createKWOKNodes creates nodes KWOK plays the kubelet of (their pods run,
// their kubelet endpoint serves resource metrics to metrics-server), waits
// until they are Ready and deletes them (and their usage pods) when the
// spec ends.
func createKWOKNodes(ctx SpecContext, specs ...sandbox.NodeSpec) {
	GinkgoHelper()
	var names []string
	for _, s := range specs {
		_, err := kwok.CreateNode(ctx, s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(kwok.DeleteNode(ctx, s.Name)).To(Succeed())
		})
		names = append(names, s.Name)
	}
	Expect(kwok.WaitReady(ctx, time.Minute, names...)).To(Succeed())
}

var _ = Describe("Berth's scheduler", Serial, func() {
	Context("with the plain default profile", func() {
		It("respects requests and leaves a pod that fits nowhere Pending with a FailedScheduling event", func(ctx SpecContext) {
			ns := newNamespace(ctx, "default-profile")
			createNodes(ctx,
				sandbox.NodeSpec{Name: "dp-small", CPU: "2", Memory: "4Gi"},
				sandbox.NodeSpec{Name: "dp-large", CPU: "4", Memory: "8Gi"},
			)

			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "needs-3-cpu", CPU: "3", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "needs-3-cpu")).Should(Equal("dp-large"))

			_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "needs-8-cpu", CPU: "8", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "needs-8-cpu", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("Insufficient cpu"))))
			Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, "needs-8-cpu"), "2s").Should(BeEmpty())
		})
	})

	Context("with two profiles in one process", func() {
		It("schedules each pod with the profile its schedulerName names", func(ctx SpecContext) {
			ns := newNamespace(ctx, "two-profiles")
			createNodes(ctx,
				sandbox.NodeSpec{Name: "tp-a", CPU: "4", Memory: "8Gi"},
				sandbox.NodeSpec{Name: "tp-b", CPU: "4", Memory: "8Gi"},
			)
			// Load tp-a so that the profiles disagree: the default profile
			// (LeastAllocated) prefers tp-b, berth-packing (MostAllocated) tp-a.
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "anchor", CPU: "2", Memory: "2Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "anchor")).ShouldNot(BeEmpty())
			anchorNode, err := sandbox.NodeNameOf(ctx, env.Client, ns, "anchor")()
			Expect(err).NotTo(HaveOccurred())
			otherNode := map[string]string{"tp-a": "tp-b", "tp-b": "tp-a"}[anchorNode]

			_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "spread", CPU: "1", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "packed", SchedulerName: "berth-packing", CPU: "1", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())

			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "spread")).Should(Equal(otherNode))
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "packed")).Should(Equal(anchorNode))
			// The Scheduled event is reported by the profile that placed the pod.
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "packed", "Scheduled")).
				Should(ContainElement(HaveField("ReportingController", "berth-packing")))
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "spread", "Scheduled")).
				Should(ContainElement(HaveField("ReportingController", "default-scheduler")))

			// A pod naming no profile of this scheduler is left alone.
			_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "someone-else", SchedulerName: "other-scheduler", CPU: "1"})
			Expect(err).NotTo(HaveOccurred())
			Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, "someone-else"), "2s").Should(BeEmpty())
		})
	})

	Context("with an invalid Berth plugin arg", func() {
		It("fails setup with an error naming the profile, the plugin and the field", func(ctx SpecContext) {
			cfg, err := sandbox.PrepareConfig(env.Dir, "invalid-args.yaml", env.Kubeconfig, false, filepath.Join("testdata", "invalid-args.yaml"))
			Expect(err).NotTo(HaveOccurred())
			err = framework.SetupScheduler(ctx, cfg)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(SatisfyAll(
				ContainSubstring(`berth-invalid`),
				ContainSubstring(`"CELPolicy"`),
				ContainSubstring(`rules[0] ("too-heavy").weight`),
				ContainSubstring(`must be in the range 1-100`),
			))
		})
	})
})
