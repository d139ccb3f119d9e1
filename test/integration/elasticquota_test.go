package integration

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

const eqProfile = "berth-elasticquota"

// createQuota gives ns an ElasticQuota of minCPU guaranteed and 8 CPUs max.
func createQuota(ctx SpecContext, c versioned.Interface, ns, minCPU string) {
	createQuotaMax(ctx, c, ns, minCPU, "8")
}

// createQuotaMax gives ns an ElasticQuota of minCPU guaranteed and maxCPU max.
func createQuotaMax(ctx SpecContext, c versioned.Interface, ns, minCPU, maxCPU string) {
	_, err := c.SchedulingV1alpha1().ElasticQuotas(ns).Create(ctx, &schedv1alpha1.ElasticQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
		Spec: schedv1alpha1.ElasticQuotaSpec{
			Min: v1.ResourceList{v1.ResourceCPU: resource.MustParse(minCPU)},
			Max: v1.ResourceList{v1.ResourceCPU: resource.MustParse(maxCPU)},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	// No namespace controller runs in envtest: a deleted namespace keeps its
	// quota, and its min would count in later specs' totals.
	DeferCleanup(func(ctx SpecContext) {
		Expect(c.SchedulingV1alpha1().ElasticQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})).To(Succeed())
	})
}

// createPods creates n pods of 1 CPU for the ElasticQuota profile.
func createPods(ctx SpecContext, ns, prefix string, n int) []string {
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: names[i], SchedulerName: eqProfile, CPU: "1"})
		Expect(err).NotTo(HaveOccurred())
	}
	return names
}

// boundCPU sums the CPU of a namespace's bound pods that are not being deleted.
func boundCPU(ctx SpecContext, ns string) func() (int64, error) {
	return func() (int64, error) {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		var total int64
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				total += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			}
		}
		return total, nil
	}
}

// playKubelet plays the kubelet for the namespaces until the spec ends
// (preemption deletes victims gracefully).
func playKubelet(namespaces ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go sandbox.PlayKubelet(ctx, env.Client, namespaces...)
}

func statusUsedCPU(ctx SpecContext, c versioned.Interface, ns string) func() (string, error) {
	return func() (string, error) {
		eq, err := c.SchedulingV1alpha1().ElasticQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		q, ok := eq.Status.Used[v1.ResourceCPU]
		if !ok {
			return "<unset>", nil
		}
		return q.String(), nil
	}
}

var _ = Describe("ElasticQuota", Serial, func() {
	var eqClient versioned.Interface
	BeforeEach(func() {
		var err error
		eqClient, err = versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
	})

	It("lets a namespace borrow up to max, enforces max, and takes borrowed CPU back by preemption when another namespace needs its min", func(ctx SpecContext) {
		a, b := newNamespace(ctx, "eq-a"), newNamespace(ctx, "eq-b")
		createQuota(ctx, eqClient, a, "4")
		createQuota(ctx, eqClient, b, "4")
		createNodes(ctx, sandbox.NodeSpec{Name: "eq-1", CPU: "4", Memory: "16Gi"}, sandbox.NodeSpec{Name: "eq-2", CPU: "4", Memory: "16Gi"})
		playKubelet(a, b)

		By("a fills the cluster's 8 CPUs: 4 of its min, 4 borrowed from b's unused min")
		for _, p := range createPods(ctx, a, "a", 8) {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, a, p)).ShouldNot(BeEmpty())
		}
		Eventually(statusUsedCPU(ctx, eqClient, a)).Should(Equal("8"), "status.used written by the scheduler")

		By("a's ninth CPU is above its max: refused, with the numbers")
		createPods(ctx, a, "a-over", 1)
		Eventually(sandbox.EventsFor(ctx, env.Client, a, "a-over-0", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("ElasticQuota %s/quota: cpu used 8 + request 1 exceeds max 8", a))))
		Expect(env.Client.CoreV1().Pods(a).Delete(ctx, "a-over-0", *metav1.NewDeleteOptions(0))).To(Succeed())

		By("b asks for its min although all used + request exceeds all min (#683): a's borrowed pods are preempted")
		bPods := createPods(ctx, b, "b", 4)
		for _, p := range bPods {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, b, p), time.Minute).ShouldNot(BeEmpty())
		}
		Expect(boundCPU(ctx, b)()).To(Equal(int64(4000)))
		Eventually(boundCPU(ctx, a)).Should(Equal(int64(4000)), "a keeps its min")
		Consistently(boundCPU(ctx, a), "2s").Should(Equal(int64(4000)))
		Eventually(statusUsedCPU(ctx, eqClient, a)).Should(Equal("4"))
		Eventually(statusUsedCPU(ctx, eqClient, b)).Should(Equal("4"))
	})

	It("refuses borrowing what other namespaces use, and admits the pod once a quota lends more", func(ctx SpecContext) {
		a, b := newNamespace(ctx, "eq-borrow-a"), newNamespace(ctx, "eq-borrow-b")
		createQuota(ctx, eqClient, a, "2")
		createQuota(ctx, eqClient, b, "2")
		createNodes(ctx, sandbox.NodeSpec{Name: "eq-b-1", CPU: "16", Memory: "16Gi"})
		for _, p := range createPods(ctx, b, "b", 2) {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, b, p)).ShouldNot(BeEmpty())
		}
		for _, p := range createPods(ctx, a, "a", 2) {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, a, p)).ShouldNot(BeEmpty())
		}
		createPods(ctx, a, "a-borrow", 1)
		Eventually(sandbox.EventsFor(ctx, env.Client, a, "a-borrow-0", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("not enough unused min to borrow"))))
		Consistently(sandbox.NodeNameOf(ctx, env.Client, a, "a-borrow-0"), "2s").Should(BeEmpty(), "the node has room: only the quota holds it")

		By("b's min grows: there is something to borrow, and the quota event requeues the pod")
		eq, err := eqClient.SchedulingV1alpha1().ElasticQuotas(b).Get(ctx, "quota", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		eq.Spec.Min[v1.ResourceCPU] = resource.MustParse("4")
		_, err = eqClient.SchedulingV1alpha1().ElasticQuotas(b).Update(ctx, eq, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, a, "a-borrow-0"), 15*time.Second).Should(Equal("eq-b-1"))
	})

	It("leaves pods of a namespace without a quota alone, while it holds back a quota'd namespace on the same node", func(ctx SpecContext) {
		// The quota'd namespace proves ElasticQuota is on in this profile: a
		// spec that passes with the plugin switched off proves nothing.
		ns, quotaed := newNamespace(ctx, "eq-none"), newNamespace(ctx, "eq-none-q")
		createQuota(ctx, eqClient, quotaed, "1")
		createNodes(ctx, sandbox.NodeSpec{Name: "eq-n-1", CPU: "8", Memory: "16Gi"})
		createPods(ctx, quotaed, "q", 2)
		Eventually(sandbox.NodeNameOf(ctx, env.Client, quotaed, "q-0")).Should(Equal("eq-n-1"))
		Eventually(sandbox.EventsFor(ctx, env.Client, quotaed, "q-1", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("not enough unused min to borrow"))))
		createPods(ctx, ns, "free", 3)
		for _, p := range []string{"free-0", "free-1", "free-2"} {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, p)).Should(Equal("eq-n-1"))
		}
		Expect(sandbox.NodeNameOf(ctx, env.Client, quotaed, "q-1")()).To(BeEmpty(), "the quota'd pod is still held although the node has room")
	})

	It("counts a reserved pod once when its NominatedNodeName is written before PreBind (a pod asking Explain), so a quota fills to max exactly", func(ctx SpecContext) {
		// make demo found it (min 2, max 4 there): with Explain's PreBind on, the scheduler writes
		// NominatedNodeName before binding; ElasticQuota counted such a pod as
		// reserved and as nominated, and refused the next with "cpu used 6 +
		// request 1 exceeds max 4" while four CPUs were in use or reserved.
		ns := newNamespace(ctx, "eq-nnn")
		createQuotaMax(ctx, eqClient, ns, "4", "4")
		nodes := map[string]string{"berth.io/spec": "eq-nnn"}
		createNodes(ctx, sandbox.NodeSpec{Name: "eq-nnn-1", CPU: "8", Memory: "16Gi", Labels: nodes})
		names := make([]string, 5)
		for i := range names {
			names[i] = fmt.Sprintf("p-%d", i)
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: names[i], SchedulerName: "quota-explain", CPU: "1",
				NodeSelector: nodes, Annotations: map[string]string{explain.AnnotationRequest: "true"}})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(boundCPU(ctx, ns), 30*time.Second).Should(Equal(int64(4000)), "the quota's max, 4 CPU, filled")
		var refused []string
		Eventually(func(g Gomega) {
			refused = refused[:0]
			for _, name := range names {
				if n, err := sandbox.NodeNameOf(ctx, env.Client, ns, name)(); err == nil && n == "" {
					refused = append(refused, name)
				}
			}
			g.Expect(refused).To(HaveLen(1))
			g.Expect(sandbox.EventsFor(ctx, env.Client, ns, refused[0], "FailedScheduling")()).To(ContainElement(
				HaveField("Message", ContainSubstring("ElasticQuota %s/quota: cpu used 4 + request 1 exceeds max 4", ns))))
		}, 30*time.Second).Should(Succeed())
		// Explain's PreBind had work for each bound pod (its placement
		// written before the bind): so the scheduler wrote NominatedNodeName
		// first, which the API server clears at binding.
		for _, name := range names {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if p.Spec.NodeName != "" {
				Expect(p.Annotations).To(HaveKeyWithValue(explain.AnnotationResult, ContainSubstring(`"placed"`)), "%s was bound without Explain's PreBind", name)
			}
		}
		events, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		Expect(err).NotTo(HaveOccurred())
		for _, e := range events.Items {
			Expect(e.Message).NotTo(MatchRegexp(`cpu used [5-9]`), "%s was refused on usage counted twice", e.InvolvedObject.Name)
		}
	})
})
