package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// refusalCluster starts a sandbox.RefusalCluster for the spec.
func refusalCluster(ctx SpecContext, id string) *sandbox.RefusalCluster {
	rc, err := sandbox.StartRefusalCluster(ctx, env.Client, id)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rc.Close)
	return rc
}

// replicaSet starts a stand-in ReplicaSet controller of one replica for
// profile on rc's nodes; it stops and its pods go when the spec ends.
func replicaSet(ctx SpecContext, rc *sandbox.RefusalCluster, ns, name, profile string) *sandbox.Replacer {
	r, err := sandbox.StartReplacer(ctx, env.Client, rc.PodSpec(ns, name, profile), 1)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(r.Close)
	return r
}

var _ = Describe("AdmissionFeedback", func() {
	const ns = "default"

	It("reproduces the refusal loop with the default profile: every replacement goes back to the node that refused it", func(ctx SpecContext) {
		rc := refusalCluster(ctx, "loop")
		start := time.Now()
		replicaSet(ctx, rc, ns, "loop-web", "default-scheduler")
		// Until 30 s or 50 refusals: the loop is as fast as the API server.
		Eventually(rc.Kubelet.Refused).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 50))
		GinkgoWriter.Printf("default profile: %d refusals of one ReplicaSet's pods by %s in %s\n",
			rc.Kubelet.Refused(), rc.BlackHole, time.Since(start).Round(time.Millisecond))
	})

	It("lets the node refuse a controller's pod once: the replacement lands on another node, with an event saying why", func(ctx SpecContext) {
		rc := refusalCluster(ctx, "once")
		before, err := framework.Counter("berth_admissionfeedback_refusals_total", map[string]string{"reason": sandbox.RefusalReason})
		Expect(err).NotTo(HaveOccurred())
		r := replicaSet(ctx, rc, ns, "once-web", "berth-admissionfeedback")
		Eventually(rc.Kubelet.Refused).Should(Equal(1))
		Eventually(func() int { return len(r.Pods()) }).Should(Equal(2))
		replacement := r.Latest()
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, replacement)).Should(BeElementOf(rc.Others))
		Consistently(rc.Kubelet.Refused).WithTimeout(3 * time.Second).Should(Equal(1))
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, replacement, "NodeRefusedSibling")).Should(ContainElement(
			WithTransform(func(e v1.Event) string { return e.Message }, And(
				HavePrefix(fmt.Sprintf("Skipping node %s refused pod %s/%s of ReplicaSet %s/once-web", rc.BlackHole, ns, r.Pods()[0], ns)),
				ContainSubstring(sandbox.RefusalReason+" ("+sandbox.RefusalMessage+")")))))
		Expect(framework.Counter("berth_admissionfeedback_refusals_total", map[string]string{"reason": sandbox.RefusalReason})).To(Equal(before + 1))

		By("a new pod of the controller still avoids the node")
		name, err := r.Create(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(BeElementOf(rc.Others))
		Expect(rc.Kubelet.Refused()).To(Equal(1))

		By("the device plugin recovers: the node's allocatable changes, and the controller's next pod may go there again")
		rc.Kubelet.SetRefusing(false)
		node, err := env.Client.CoreV1().Nodes().Get(ctx, rc.BlackHole, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		node.Status.Allocatable["example.com/gpu"] = resource.MustParse("8")
		node.Status.Capacity["example.com/gpu"] = resource.MustParse("8")
		_, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			name, err := r.Create(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).ShouldNot(BeEmpty())
			g.Expect(sandbox.NodeNameOf(ctx, env.Client, ns, name)()).To(Equal(rc.BlackHole))
		}).Should(Succeed())
	})
})
