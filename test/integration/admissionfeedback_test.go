package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// refusalCluster starts a sandbox.RefusalCluster (KWOK nodes) for the spec.
func refusalCluster(ctx SpecContext, id string) *sandbox.RefusalCluster {
	rc, err := sandbox.StartRefusalCluster(ctx, kwok, id)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rc.Close)
	return rc
}

// replicaSet creates a ReplicaSet of one replica for profile on rc's nodes,
// run by kube-controller-manager's ReplicaSet controller; it and its pods go
// when the spec ends.
func replicaSet(ctx SpecContext, rc *sandbox.RefusalCluster, ns, name, profile string) *sandbox.ReplicaSet {
	r, err := sandbox.CreateReplicaSet(ctx, env.Client, rc.PodSpec(ns, name, profile), 1)
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
		// Until 30 s or 50 refusals: the loop is as fast as the ReplicaSet
		// controller, the scheduler and the kubelet's admission.
		Eventually(rc.RefusedCount(ctx)).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 50))
		n, _ := rc.RefusedCount(ctx)()
		GinkgoWriter.Printf("default profile: %d refusals of one ReplicaSet's pods by %s in %s\n", n, rc.BlackHole, time.Since(start).Round(time.Millisecond))
	})

	It("lets the node refuse a controller's pod once: the replacement lands on another node, with an event saying why", func(ctx SpecContext) {
		rc := refusalCluster(ctx, "once")
		before, err := framework.Counter("berth_admissionfeedback_refusals_total", map[string]string{"reason": sandbox.RefusalReason})
		Expect(err).NotTo(HaveOccurred())
		r := replicaSet(ctx, rc, ns, "once-web", "berth-admissionfeedback")
		Eventually(rc.RefusedCount(ctx)).Should(Equal(1))
		refused, err := rc.Refused(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The controller's replacement, the one pod still active.
		Eventually(r.Active(ctx)).Should(HaveLen(1))
		replacement := must(r.Active(ctx)())[0]
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, replacement)).Should(BeElementOf(rc.Others))
		Consistently(rc.RefusedCount(ctx)).WithTimeout(3 * time.Second).Should(Equal(1))
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, replacement, "NodeRefusedSibling")).Should(ContainElement(
			WithTransform(func(e v1.Event) string { return e.Message }, And(
				HavePrefix(fmt.Sprintf("Skipping node %s refused pod %s of ReplicaSet %s/once-web", rc.BlackHole, refused[0], ns)),
				ContainSubstring(sandbox.RefusalReason+" ("+sandbox.RefusalMessage+")")))))
		Expect(framework.Counter("berth_admissionfeedback_refusals_total", map[string]string{"reason": sandbox.RefusalReason})).To(Equal(before + 1))

		By("a new pod of the controller still avoids the node")
		name, err := r.ScaleUp(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(BeElementOf(rc.Others))
		Expect(rc.RefusedCount(ctx)()).To(Equal(1))

		By("the device plugin recovers: the node's allocatable changes, and the controller's next pod may go there again")
		Expect(rc.StopRefusing(ctx)).To(Succeed())
		// KWOK learns of the end of the refusals through its watch: a pod
		// bound there before it did is refused once more, and AdmissionFeedback
		// then avoids the node again. So each try changes the node's
		// allocatable again (the plugin forgets a node's refusals when it
		// does) and scales up, until a pod runs on the recovered node.
		gpus := int64(8)
		Eventually(func(g Gomega) {
			node, err := env.Client.CoreV1().Nodes().Get(ctx, rc.BlackHole, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			gpus++
			node.Status.Allocatable["example.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
			node.Status.Capacity["example.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
			_, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			g.Expect(err).NotTo(HaveOccurred()) // a conflict with KWOK's heartbeat is tried again
			name, err := r.ScaleUp(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func() (v1.PodPhase, error) {
				p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || p.Spec.NodeName == "" {
					return "", err
				}
				return p.Status.Phase, nil
			}).Should(Or(Equal(v1.PodRunning), Equal(v1.PodFailed)))
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Spec.NodeName).To(Equal(rc.BlackHole))
			g.Expect(p.Status.Phase).To(Equal(v1.PodRunning), "the recovered node admitted the pod")
		}).Should(Succeed())
	})
	It("does not let one namespace make a node avoided by all: refusals of pods no scheduler bound are not counted (issue 51, item 8)", func(ctx SpecContext) {
		tenant, other := newNamespace(ctx, "af-tenant"), newNamespace(ctx, "af-other")
		sel := map[string]string{"berth.dev/spec": "af-tenant"}
		createNodes(ctx, sandbox.NodeSpec{Name: "af-tenant-big", CPU: "16", Memory: "32Gi", Labels: sel},
			sandbox.NodeSpec{Name: "af-tenant-small-1", CPU: "4", Memory: "8Gi", Labels: sel},
			sandbox.NodeSpec{Name: "af-tenant-small-2", CPU: "4", Memory: "8Gi", Labels: sel})
		// A controller's pod (AdmissionFeedback scores only those), as
		// another team's ReplicaSet would create it.
		probe := func(name string) string {
			GinkgoHelper()
			p := sandbox.MakePod(sandbox.PodSpec{Namespace: other, Name: name, SchedulerName: "berth-admissionfeedback", CPU: "500m", NodeSelector: sel})
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID(name + "-rs"), Controller: ptr.To(true)}}
			_, err := env.Client.CoreV1().Pods(other).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, other, name)).ShouldNot(BeEmpty())
			return must(sandbox.NodeNameOf(ctx, env.Client, other, name)())
		}
		Expect(probe("control")).To(Equal("af-tenant-big"), "the roomiest node is preferred")

		By("a tenant creates three ReplicaSets' pods on the big node with spec.nodeName and an affinity it cannot meet; its kubelet refuses them")
		// The kubelet's status write, as the kubelet makes it (field manager kubelet).
		cfg := rest.CopyConfig(env.Config)
		cfg.UserAgent = "kubelet"
		kubelet, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		notScheduled := func() float64 {
			return must(framework.Counter("berth_admissionfeedback_refusals_not_scheduled_total", nil))
		}
		counted := func() float64 {
			return must(framework.Counter("berth_admissionfeedback_refusals_total", map[string]string{"reason": "NodeAffinity"}))
		}
		before := notScheduled() + counted()
		for i := range 3 {
			p := sandbox.MakePod(sandbox.PodSpec{Namespace: tenant, Name: fmt.Sprintf("pinned-%d", i), CPU: "100m", NodeSelector: map[string]string{"berth.dev/never": "true"}})
			p.Spec.NodeName = "af-tenant-big"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("pinned-%d", i), UID: types.UID(fmt.Sprintf("pinned-rs-%d", i)), Controller: ptr.To(true)}}
			created, err := env.Client.CoreV1().Pods(tenant).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			created.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "NodeAffinity", Message: "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
			_, err = kubelet.CoreV1().Pods(tenant).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// AdmissionFeedback has seen the three refusals (counted or not).
		Eventually(func() float64 { return notScheduled() + counted() - before }).Should(BeNumerically("==", 3))

		By("another team's pod still goes to the roomiest node")
		Expect(probe("after")).To(Equal("af-tenant-big"), "the tenant's own pods made the node no black hole")
	})
})

func must[T any](v T, err error) T {
	Expect(err).NotTo(HaveOccurred())
	return v
}
