package integration

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// gangQuotaProfile has Coscheduling and ElasticQuota in one profile, as the
// all-plugins example orders them: Coscheduling's queue sort,
// DefaultPreemption off, Coscheduling's PostFilter before ElasticQuota's.
const gangQuotaProfile = "coscheduling-quota-confirm"

// preemptedIn counts the pods of ns that a preemption evicted (a Preempted
// event names each; a victim two concurrent preemptions chose has two).
func preemptedIn(ctx SpecContext, ns string) func() (int, error) {
	return func() (int, error) {
		l, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "Preempted").String()})
		if err != nil {
			return 0, err
		}
		victims := sets.New[string]()
		for _, e := range l.Items {
			victims.Insert(e.InvolvedObject.Name)
		}
		return victims.Len(), nil
	}
}

// preemptions lists ns's Preempted events (victim: message), for a failure's message.
func preemptions(ctx SpecContext, ns string) []string {
	l, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "Preempted").String()})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.EventTime.Format("15:04:05.000"), e.InvolvedObject.Name, e.Message))
	}
	return out
}

// spGang creates a scheduler-plugins PodGroup of minMember and its pods.
func spGang(ctx SpecContext, c versioned.Interface, ns, name string, minMember int32, pod sandbox.PodSpec) []string {
	GinkgoHelper()
	_, err := c.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(c.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
	})
	var names []string
	for i := range minMember {
		s := pod
		s.Namespace, s.Name = ns, fmt.Sprintf("%s-%d", name, i)
		s.Labels = map[string]string{schedv1alpha1.PodGroupLabel: name}
		_, err := sandbox.CreatePod(ctx, env.Client, s)
		Expect(err).NotTo(HaveOccurred())
		names = append(names, s.Name)
	}
	return names
}

// createDeployment creates a Deployment (sandbox.CreateDeployment) and
// deletes it and its ReplicaSets when the spec ends, before the namespace's
// pods: no garbage collector runs, and a ReplicaSet left behind would
// recreate pods that later specs' nodes would take.
func createDeployment(ctx SpecContext, s sandbox.PodSpec, replicas int32) {
	GinkgoHelper()
	_, err := sandbox.CreateDeployment(ctx, env.Client, s, replicas)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if err := env.Client.AppsV1().Deployments(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(env.Client.AppsV1().ReplicaSets(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=" + s.Name})).To(Succeed())
	})
}

// boundOf counts the pods of names in ns that are bound.
func boundOf(ctx SpecContext, ns string, names []string) func() (int, error) {
	return func() (int, error) {
		n := 0
		for _, name := range names {
			node, err := sandbox.NodeNameOf(ctx, env.Client, ns, name)()
			if err != nil {
				return 0, err
			}
			if node != "" {
				n++
			}
		}
		return n, nil
	}
}

// Issue 51: gang reclaim as users meet it, through the real scheduler with
// kube-controller-manager running the borrower's Deployment (an evicted pod
// comes back and asks for the room again).
var _ = Describe("Reclaim for gangs (issue 51)", Serial, func() {
	var eqClient versioned.Interface
	BeforeEach(func() {
		var err error
		eqClient, err = versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
	})

	It("item 1: a scheduler-plugins gang at its min takes it back from a Deployment: bound whole within a minute of its victims leaving, after exactly four evictions", func(ctx SpecContext) {
		a, b := newNamespace(ctx, "reclaim-dep-a"), newNamespace(ctx, "reclaim-dep-b")
		createQuotaMax(ctx, eqClient, a, "2", "6")
		createQuotaMax(ctx, eqClient, b, "4", "4")
		sel := map[string]string{"berth.dev/spec": "reclaim-dep"}
		createNodes(ctx, sandbox.NodeSpec{Name: "reclaim-dep-1", CPU: "6", Memory: "16Gi", Labels: sel})
		playKubelet(a, b)

		By("a's Deployment of six 1-CPU pods fills the node: 4 CPU borrowed from b's min")
		createDeployment(ctx, sandbox.PodSpec{Namespace: a, Name: "borrower", SchedulerName: gangQuotaProfile, CPU: "1", NodeSelector: sel}, 6)
		Eventually(boundCPU(ctx, a), time.Minute).Should(Equal(int64(6000)))

		By("b's gang of four 1-CPU members (minMember 4, b's min and max 4)")
		members := spGang(ctx, eqClient, b, "train", 4, sandbox.PodSpec{SchedulerName: gangQuotaProfile, CPU: "1", NodeSelector: sel})
		// Once the first members are nominated the next must still be
		// admitted: counted twice it was refused ("used 1 + request 4
		// exceeds max 4"), the nominations were cleared, the Deployment
		// refilled the room and the reclaim started over.
		Eventually(boundOf(ctx, b, members), 90*time.Second).Should(Equal(4), "the gang binds whole")
		Eventually(boundCPU(ctx, a)).Should(Equal(int64(2000)), "a is back at its min")
		Consistently(boundCPU(ctx, a), "3s").Should(Equal(int64(2000)), "and stays there: its Deployment's new pods are refused")
		Expect(preemptedIn(ctx, a)()).To(Equal(4), "four of a's pods evicted, no reclaim started over: %v", preemptions(ctx, a))
	})

	It("item 3: a gang its quota cannot admit whole evicts nothing for node room, and says which quota", func(ctx SpecContext) {
		a, c, free := newNamespace(ctx, "reclaim-over-a"), newNamespace(ctx, "reclaim-over-c"), newNamespace(ctx, "reclaim-over-free")
		createQuotaMax(ctx, eqClient, a, "4", "6")
		createQuotaMax(ctx, eqClient, c, "10", "10") // idle: room to borrow
		priorityClass(ctx, "berth-51-low", 0)
		priorityClass(ctx, "berth-51-mid", 100)
		priorityClass(ctx, "berth-51-high", 1000)
		sel := map[string]string{"berth.dev/spec": "reclaim-over"}
		createNodes(ctx, sandbox.NodeSpec{Name: "reclaim-over-1", CPU: "3", Memory: "16Gi", Labels: map[string]string{"berth.dev/spec": "reclaim-over", "berth.dev/small": "true"}},
			sandbox.NodeSpec{Name: "reclaim-over-2", CPU: "8", Memory: "16Gi", Labels: sel})
		playKubelet(a, c, free)
		for _, p := range []struct {
			ns, name, cpu, prio, node string
		}{
			{free, "no-quota", "1500m", "berth-51-high", "reclaim-over-1"},
			{a, "a-hi", "3500m", "berth-51-high", "reclaim-over-2"},
		} {
			pod := sandbox.MakePod(sandbox.PodSpec{Namespace: p.ns, Name: p.name, SchedulerName: gangQuotaProfile, CPU: p.cpu, PriorityClassName: p.prio})
			pod.Spec.NodeName = p.node
			_, err := env.Client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// a-lo is a Deployment's pod (kube-controller-manager would replace
		// it if it were evicted), scheduled onto the small node's last room.
		createDeployment(ctx, sandbox.PodSpec{Namespace: a, Name: "a-lo", SchedulerName: gangQuotaProfile, CPU: "1", PriorityClassName: "berth-51-low",
			NodeSelector: map[string]string{"berth.dev/small": "true"}}, 1)
		var aLo string
		Eventually(func() (string, error) {
			l, err := env.Client.CoreV1().Pods(a).List(ctx, metav1.ListOptions{LabelSelector: "app=a-lo"})
			if err != nil || len(l.Items) != 1 {
				return "", err
			}
			aLo = l.Items[0].Name
			return l.Items[0].Spec.NodeName, nil
		}).Should(Equal("reclaim-over-1"))
		Eventually(statusUsedCPU(ctx, eqClient, a)).Should(Equal("4500m"))

		By("a's gang of 2 x 1.5 CPU needs 3: 4.5 + 3 exceeds max 6, and would with a-lo gone (3.5 + 3)")
		members := spGang(ctx, eqClient, a, "over", 2, sandbox.PodSpec{SchedulerName: gangQuotaProfile, CPU: "1500m", PriorityClassName: "berth-51-mid", NodeSelector: sel})
		Eventually(sandbox.EventsFor(ctx, env.Client, a, members[0], "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("ElasticQuota %s/quota: cpu used 4500m + request 3 exceeds max 6", a))))
		// Preemption is asynchronous: the victim would be deleted within
		// moments of the refusal.
		Consistently(func() (bool, error) {
			p, err := env.Client.CoreV1().Pods(a).Get(ctx, aLo, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.DeletionTimestamp == nil, nil
		}, "5s").Should(BeTrue(), "a-lo is not evicted for a gang that cannot be admitted")
		Expect(preemptedIn(ctx, a)()).To(BeZero())
		Expect(boundOf(ctx, a, members)()).To(BeZero())
	})
	It("item 4: several preemptors at once are each bound within seconds of their victims leaving, round after round", func(ctx SpecContext) {
		// Four reclaiming pods preempt within one second; a pod whose
		// victims another preemption had already deleted was gated while
		// the deletions reached the queue, found them gone, and waited for
		// the periodic flush of unschedulable pods (two minutes and more).
		a, b := newNamespace(ctx, "reclaim-many-a"), newNamespace(ctx, "reclaim-many-b")
		createQuotaMax(ctx, eqClient, a, "2", "6")
		createQuotaMax(ctx, eqClient, b, "4", "6")
		priorityClass(ctx, "berth-51-many-low", 100)
		priorityClass(ctx, "berth-51-many-high", 1000)
		sel := map[string]string{"berth.dev/spec": "reclaim-many"}
		createNodes(ctx, sandbox.NodeSpec{Name: "reclaim-many-1", CPU: "6", Memory: "16Gi", Labels: sel})
		playKubelet(a, b)
		for round := range 3 {
			By(fmt.Sprintf("round %d: a's Deployment borrows 4 CPU, then b asks for its min with four pods at once", round))
			// A Deployment of its own each round: the race is the
			// preemptors', not the borrower's refill.
			borrower := fmt.Sprintf("borrower-%d", round)
			createDeployment(ctx, sandbox.PodSpec{Namespace: a, Name: borrower, SchedulerName: eqProfile, CPU: "1", NodeSelector: sel, PriorityClassName: "berth-51-many-low"}, 6)
			Eventually(boundCPU(ctx, a), time.Minute).Should(Equal(int64(6000)))
			var names []string
			for i := range 4 {
				name := fmt.Sprintf("b-%d-%d", round, i)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: b, Name: name, SchedulerName: eqProfile, CPU: "1",
					NodeSelector: sel, PriorityClassName: "berth-51-many-high"})
				Expect(err).NotTo(HaveOccurred())
				names = append(names, name)
			}
			Eventually(boundCPU(ctx, a), time.Minute).Should(Equal(int64(2000)), "a's borrowed pods are preempted, down to its min")
			// The victims are gone: the scheduler's longest backoff is 10 s;
			// a lost requeue waited for the unschedulable pods' flush (two
			// minutes). 30 s leaves room for a loaded CI machine.
			Eventually(boundOf(ctx, b, names), 30*time.Second).Should(Equal(4), "each preemptor is bound within seconds of its victims leaving")
			Expect(env.Client.AppsV1().Deployments(a).Delete(ctx, borrower, metav1.DeleteOptions{})).To(Succeed())
			Expect(env.Client.AppsV1().ReplicaSets(a).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=" + borrower})).To(Succeed())
			Expect(env.Client.CoreV1().Pods(a).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})).To(Succeed())
			Expect(env.Client.CoreV1().Pods(b).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})).To(Succeed())
			Eventually(boundCPU(ctx, a)).Should(BeZero())
			Eventually(boundCPU(ctx, b)).Should(BeZero())
		}
	})
})
