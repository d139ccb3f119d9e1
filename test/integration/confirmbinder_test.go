package integration

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// bindElsewhere creates a pod that this scheduler ignores and binds it to node
// through the API, as another scheduler would.
func bindElsewhere(ctx SpecContext, ns, name, node, cpu string, hostPort int32) {
	_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "other-scheduler", CPU: cpu, HostPort: hostPort})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.Client.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})).To(Succeed())
}

// createHeld creates n pods of profile that wait at Permit until hold.ReleaseAll.
func createHeld(ctx SpecContext, ns, profile string, n int, cpu string, hostPort int32) []string {
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("held-%d", i)
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: names[i], SchedulerName: profile, CPU: cpu,
			HostPort: hostPort, Labels: map[string]string{framework.HoldLabel: "true"}})
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(hold.Waiting).Should(Equal(n))
	return names
}

// cpuOnNode sums the CPU requests of the non-terminal pods bound to node.
func cpuOnNode(ctx SpecContext, node string) func() (int64, error) {
	return func() (int64, error) {
		pods, err := env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return 0, err
		}
		var total resource.Quantity
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
				req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
				total.Add(*req.Cpu())
			}
		}
		return total.MilliValue(), nil
	}
}

// confirmations reads berth_confirmbinder_confirmations_total{result} from this process's registry.
func confirmations(result string) float64 {
	v, err := framework.Counter("berth_confirmbinder_confirmations_total", map[string]string{"result": result})
	Expect(err).NotTo(HaveOccurred())
	return v
}

var _ = Describe("ConfirmBinder", Serial, func() {
	It("reproduces the race with DefaultBinder alone: the node ends overcommitted", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cb-default")
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-d-1", CPU: "4", Memory: "8Gi"})
		held := createHeld(ctx, ns, "bind-default-held", 3, "1", 0)
		bindElsewhere(ctx, ns, "intruder-0", "cb-d-1", "1", 0)
		bindElsewhere(ctx, ns, "intruder-1", "cb-d-1", "1", 0)
		hold.ReleaseAll()
		for _, p := range held {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, p)).Should(Equal("cb-d-1"))
		}
		Expect(cpuOnNode(ctx, "cb-d-1")()).To(BeNumerically(">", 4000), "5 CPU bound to a 4-CPU node: the race reproduced")
	})

	It("never overcommits: pods that no longer fit go to another node, with a BindConflict event", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cb-some")
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-c-1", CPU: "4", Memory: "8Gi"})
		fits, conflicts := confirmations("fit"), confirmations("conflict")
		held := createHeld(ctx, ns, "bind-confirm-held", 3, "1", 0)
		bindElsewhere(ctx, ns, "intruder-0", "cb-c-1", "1", 0)
		bindElsewhere(ctx, ns, "intruder-1", "cb-c-1", "1", 0)
		// A node appears after the scheduling decision: where the loser can go.
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-c-2", CPU: "4", Memory: "8Gi"})
		hold.ReleaseAll()

		Eventually(func(g Gomega) map[string]int {
			perNode := map[string]int{}
			for _, p := range held {
				n, err := sandbox.NodeNameOf(ctx, env.Client, ns, p)()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n).NotTo(BeEmpty())
				perNode[n]++
			}
			return perNode
		}).Should(Equal(map[string]int{"cb-c-1": 2, "cb-c-2": 1}))
		Expect(cpuOnNode(ctx, "cb-c-1")()).To(BeNumerically("<=", 4000))

		var events []v1.Event
		for _, p := range held {
			e, err := sandbox.EventsFor(ctx, env.Client, ns, p, "BindConflict")()
			Expect(err).NotTo(HaveOccurred())
			events = append(events, e...)
		}
		Expect(events).To(ContainElement(HaveField("Message", ContainSubstring("node cb-c-1 no longer fits the pod: insufficient cpu: requested 1, used 4, allocatable 4"))))
		// ConfirmBinder is the plugin that bound: it counted two fits and a conflict.
		Expect(confirmations("fit") - fits).To(BeNumerically(">=", 2))
		Expect(confirmations("conflict") - conflicts).To(BeNumerically(">=", 1))
	})

	It("binds none of the held pods when the node filled up, and leaves them Pending", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cb-none")
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-n-1", CPU: "2", Memory: "8Gi"})
		held := createHeld(ctx, ns, "bind-confirm-held", 2, "1", 0)
		bindElsewhere(ctx, ns, "intruder-0", "cb-n-1", "2", 0)
		hold.ReleaseAll()
		for _, p := range held {
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, p, "BindConflict")).Should(Not(BeEmpty()))
			Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, p), "3s").Should(BeEmpty())
		}
		Expect(cpuOnNode(ctx, "cb-n-1")()).To(BeNumerically("==", 2000))
	})

	It("catches a host port taken since the scheduling decision", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cb-port")
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-p-1", CPU: "8", Memory: "8Gi"})
		held := createHeld(ctx, ns, "bind-confirm-held", 1, "100m", 8080)
		bindElsewhere(ctx, ns, "intruder", "cb-p-1", "100m", 8080)
		hold.ReleaseAll()
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, held[0], "BindConflict")).
			Should(ContainElement(HaveField("Message", ContainSubstring("host port TCP/8080 is in use"))))
		Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, held[0]), "3s").Should(BeEmpty())
	})
	It("never refuses what NodeResourcesFit and the kubelet accept: a cluster-level resource Fit ignores and no node advertises", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cb-ignored")
		createNodes(ctx, sandbox.NodeSpec{Name: "cb-i-1", CPU: "4", Memory: "8Gi"})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "licensed", SchedulerName: "confirm-ignored-resources", CPU: "1",
			Extended: map[string]string{"example.com/licence": "1"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "licensed")).Should(Equal("cb-i-1"))
		Expect(sandbox.EventsFor(ctx, env.Client, ns, "licensed", "BindConflict")()).To(BeEmpty())
	})
})
