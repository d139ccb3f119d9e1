package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

// The faults of issue #26 as a user meets them, through the real scheduler.

// priorityClass creates a PriorityClass for the spec.
func priorityClass(ctx SpecContext, name string, value int32) {
	GinkgoHelper()
	_, err := env.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.Client.SchedulingV1().PriorityClasses().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
	})
}

// createQuotaOf gives ns an ElasticQuota of the given min and max.
func createQuotaOf(ctx SpecContext, c versioned.Interface, ns string, min, max v1.ResourceList) {
	GinkgoHelper()
	_, err := c.SchedulingV1alpha1().ElasticQuotas(ns).Create(ctx, &schedv1alpha1.ElasticQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
		Spec:       schedv1alpha1.ElasticQuotaSpec{Min: min, Max: max},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(c.SchedulingV1alpha1().ElasticQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})).To(Succeed())
	})
}

func cpuMem(cpu, mem string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
}

var _ = Describe("Issue #26's faults, through the real scheduler", Serial, func() {
	It("ElasticQuota takes borrowed CPU back from a team that uses less than its memory min, down to its min and no further, each preemptor bound within seconds of its victims leaving", func(ctx SpecContext) {
		eqClient, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		a, b := newNamespace(ctx, "eq-reclaim-a"), newNamespace(ctx, "eq-reclaim-b")
		createQuotaOf(ctx, eqClient, a, cpuMem("2", "12Gi"), cpuMem("6", "24Gi"))
		createQuotaOf(ctx, eqClient, b, cpuMem("4", "12Gi"), cpuMem("6", "24Gi"))
		priorityClass(ctx, "berth-reclaim-low", 100)
		priorityClass(ctx, "berth-reclaim-high", 1000)
		createNodes(ctx, sandbox.NodeSpec{Name: "eq-r-1", CPU: "6", Memory: "48Gi"})
		playKubelet(a, b)

		By("a runs six pods of 1 CPU / 1Gi: 4 CPU borrowed, 6Gi of its 12Gi memory min unused")
		for i := range 6 {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: a, Name: fmt.Sprintf("a-%d", i), SchedulerName: eqProfile,
				CPU: "1", Memory: "1Gi", PriorityClassName: "berth-reclaim-low"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, a, fmt.Sprintf("a-%d", i))).Should(Equal("eq-r-1"))
		}

		By("b asks for its min, four pods at once: each is bound, a keeps exactly its 2 CPU")
		for i := range 4 {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: b, Name: fmt.Sprintf("b-%d", i), SchedulerName: eqProfile,
				CPU: "1", Memory: "1Gi", PriorityClassName: "berth-reclaim-high"})
			Expect(err).NotTo(HaveOccurred())
		}
		// The scheduler's longest backoff is 10 s: a preemptor whose victims
		// are gone must not wait for the unschedulable pods' flush (minutes).
		for i := range 4 {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, b, fmt.Sprintf("b-%d", i)), 45*time.Second).Should(Equal("eq-r-1"))
		}
		Eventually(boundCPU(ctx, a)).Should(Equal(int64(2000)), "a is back at its CPU min")
		Consistently(boundCPU(ctx, a), "3s").Should(Equal(int64(2000)), "and no lower: concurrent preemptions stop at min")
	})

	It("Coscheduling lets DefaultPreemption make room for a high-priority gang that needs it for every member", func(ctx SpecContext) {
		pgClient, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace(ctx, "cs-preempt")
		priorityClass(ctx, "berth-gang-urgent", 1000)
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-p-1", CPU: "4", Memory: "16Gi"}, sandbox.NodeSpec{Name: "cs-p-2", CPU: "4", Memory: "16Gi"})
		playKubelet(ns)

		By("two nodes full of priority-0 batch pods")
		for i := range 8 {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("batch-%d", i), SchedulerName: csProfile, CPU: "1"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, fmt.Sprintf("batch-%d", i))).ShouldNot(BeEmpty())
		}

		By("a gang of two 2-CPU members of priority 1000 (minMember 2): both are placed, on room preemption made")
		_, err = pgClient.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-urgent"},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: 2},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for i := range 2 {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("pg-urgent-worker-%d", i), SchedulerName: csProfile,
				CPU: "2", PriorityClassName: "berth-gang-urgent", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "pg-urgent"}})
			Expect(err).NotTo(HaveOccurred())
		}
		for i := range 2 {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, fmt.Sprintf("pg-urgent-worker-%d", i)), time.Minute).ShouldNot(BeEmpty())
		}
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "pg-urgent-worker-0", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("preemption may make room"))), "the member's event says preemption was let run")
	})

	It("Explain explains a pod rejected in PreFilter by a plugin before it (a missing claim)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "explain-claim")
		createNodes(ctx, sandbox.NodeSpec{Name: "ex-c-1", CPU: "4", Memory: "8Gi", Labels: map[string]string{"berth.dev/explain": "true"}})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "claims", SchedulerName: "berth-explain", CPU: "100m",
			Annotations: map[string]string{explain.AnnotationRequest: "true"}, Claim: "missing"})
		Expect(err).NotTo(HaveOccurred())
		var res *explain.Result
		Eventually(func(g Gomega) { res = explanation(ctx, ns, "claims")(g) }, 30*time.Second).Should(Succeed())
		Expect(res.Outcome).To(Equal(explain.OutcomePending))
		Expect(res.Rejections).To(ContainElement(And(HaveField("Plugin", BeElementOf("VolumeRestrictions", "VolumeBinding")),
			HaveField("Reasons", ContainElement(HaveField("Reason", ContainSubstring(`"missing" not found`)))))))
	})

	It("kubectl berth explain's advice works: a pending pod annotated to ask is explained within seconds", func(ctx SpecContext) {
		ns := newNamespace(ctx, "explain-ask")
		nodes := map[string]string{"berth.dev/explain": "true"}
		createNodes(ctx, sandbox.NodeSpec{Name: "ex-a-1", CPU: "2", Memory: "8Gi", Labels: nodes})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "big", SchedulerName: "berth-explain", CPU: "3", NodeSelector: nodes})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "big", "FailedScheduling")).ShouldNot(BeEmpty())

		By("kubectl berth explain says how to ask")
		cmd := exec.CommandContext(ctx, kubectlBerthBin(), "explain", "big", "-n", ns, "--kubeconfig", env.Kubeconfig)
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred(), "no explanation yet: %s", out)
		advice := ""
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "kubectl annotate pod") {
				advice = strings.TrimSpace(line)
			}
		}
		Expect(advice).To(Equal(fmt.Sprintf("kubectl annotate pod -n %s big %s=true", ns, explain.AnnotationRequest)))

		By("doing as it says: the pod is tried again at once and explained")
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "big", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		p.Annotations = map[string]string{explain.AnnotationRequest: "true"}
		_, err = env.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Well inside the unschedulable pods' flush (5 min).
		Eventually(func() string {
			out, _ := exec.CommandContext(ctx, kubectlBerthBin(), "explain", "big", "-n", ns, "--kubeconfig", env.Kubeconfig).Output()
			return string(out)
		}, 20*time.Second).Should(ContainSubstring("Pod " + ns + "/big fits none of"))
	})
})
