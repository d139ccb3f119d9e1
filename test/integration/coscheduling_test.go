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
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// csProfile is manifests/examples/coscheduling.yaml's gang profile, named as
// scheduler-plugins' scheduler was.
const csProfile = "scheduler-plugins-scheduler"

// gang is a PodGroup and its member pods as a job operator writes them.
type gang struct {
	ns, name string
	pods     []string
	// addWorker creates the pod of an mpiJob's worker i; the caller adds
	// its name to pods.
	addWorker func(i int)
}

// mpiJob creates what mpi-operator creates for an MPIJob with one launcher
// and workers workers of cpu each: a PodGroup named after the job
// (minMember = workers + 1, minResources = the pods' requests summed,
// scheduleTimeoutSeconds 0, controller reference to the MPIJob) and the pods,
// labelled with the group, owned by the job (the launcher by its Job).
// Only the first created workers' pods are created (an operator is not
// atomic either); addWorker creates the others.
func mpiJob(ctx SpecContext, c versioned.Interface, ns, name string, workers, created int, cpu string) gang {
	GinkgoHelper()
	jobUID := "mpijob-" + name
	q := resource.MustParse(cpu)
	total := q.DeepCopy()
	total.Mul(int64(workers + 1))
	_, err := c.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: name, UID: types.UID("uid-" + jobUID), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              int32(workers + 1),
			ScheduleTimeoutSeconds: ptr.To[int32](0),
			MinResources:           v1.ResourceList{v1.ResourceCPU: total},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	owner := metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: name, UID: types.UID("uid-" + jobUID), Controller: ptr.To(true)}
	launcherOwner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name + "-launcher", UID: types.UID("uid-" + jobUID + "-launcher"), Controller: ptr.To(true)}
	g := &gang{ns: ns, name: name}
	mk := func(podName, role string, index int, ref metav1.OwnerReference) {
		labels := map[string]string{
			schedv1alpha1.PodGroupLabel:           name,
			"training.kubeflow.org/job-name":      name,
			"training.kubeflow.org/job-role":      role,
			"training.kubeflow.org/operator-name": "mpijob-controller",
		}
		if index >= 0 {
			labels["training.kubeflow.org/replica-index"] = fmt.Sprint(index)
		}
		p := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: podName, SchedulerName: csProfile, CPU: cpu, Labels: labels})
		p.OwnerReferences = []metav1.OwnerReference{ref}
		_, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		g.pods = append(g.pods, podName)
	}
	mk(name+"-launcher-x7k2p", "launcher", -1, launcherOwner)
	for i := range created {
		mk(fmt.Sprintf("%s-worker-%d", name, i), "worker", i, owner)
	}
	g.addWorker = func(i int) { mk(fmt.Sprintf("%s-worker-%d", name, i), "worker", i, owner) }
	return *g
}

// trainJob creates what Kubeflow Trainer v2 creates for a TrainJob with one
// replicated job of nodes pods (a JobSet): a PodGroup named after the
// TrainJob (minMember = nodes, minResources summed, scheduleTimeoutSeconds
// from the runtime's coscheduling policy) and pods named as the JobSet's Jobs
// name them, labelled with the group.
func trainJob(ctx SpecContext, c versioned.Interface, ns, name string, nodes int, cpu string, timeout int32) gang {
	GinkgoHelper()
	q := resource.MustParse(cpu)
	total := q.DeepCopy()
	total.Mul(int64(nodes))
	_, err := c.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: name, UID: types.UID("uid-trainjob-" + name), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}},
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              int32(nodes),
			ScheduleTimeoutSeconds: ptr.To(timeout),
			MinResources:           v1.ResourceList{v1.ResourceCPU: total},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	g := gang{ns: ns, name: name}
	for i := range nodes {
		podName := fmt.Sprintf("%s-node-0-%d-%05d", name, i, 10000+i)
		p := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: podName, SchedulerName: csProfile, CPU: cpu, Labels: map[string]string{
			schedv1alpha1.PodGroupLabel:                   name,
			"jobset.sigs.k8s.io/jobset-name":              name,
			"jobset.sigs.k8s.io/replicatedjob-name":       "node",
			"batch.kubernetes.io/job-completion-index":    fmt.Sprint(i),
			"trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
		}})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name + "-node-0", UID: types.UID("uid-job-" + name), Controller: ptr.To(true)}}
		_, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		g.pods = append(g.pods, podName)
	}
	return g
}

// bound counts the gang's pods with a node.
func (g gang) bound(ctx SpecContext) func() (int, error) {
	return func() (int, error) {
		n := 0
		for _, p := range g.pods {
			node, err := sandbox.NodeNameOf(ctx, env.Client, g.ns, p)()
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

func (g gang) phase(ctx SpecContext, c versioned.Interface) func() (schedv1alpha1.PodGroupPhase, error) {
	return func() (schedv1alpha1.PodGroupPhase, error) {
		pg, err := c.SchedulingV1alpha1().PodGroups(g.ns).Get(ctx, g.name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return pg.Status.Phase, nil
	}
}

// unschedulableAttempts reads scheduler_schedule_attempts_total{result="unschedulable",profile} from this process's registry.
func unschedulableAttempts(profile string) float64 {
	v, err := framework.Counter("scheduler_schedule_attempts_total", map[string]string{"result": "unschedulable", "profile": profile})
	Expect(err).NotTo(HaveOccurred())
	return v
}

// podGroupEvents returns a poller for the messages of the events with
// reason regarding the PodGroup (the plugin's reasons are its only).
func podGroupEvents(ctx SpecContext, ns, name, reason string) func() ([]string, error) {
	events := sandbox.EventsFor(ctx, env.Client, ns, name, reason)
	return func() ([]string, error) {
		evs, err := events()
		return sandbox.EventMessages(evs), err
	}
}

func (g gang) deletePods(ctx SpecContext) {
	GinkgoHelper()
	for _, p := range g.pods {
		Expect(env.Client.CoreV1().Pods(g.ns).Delete(ctx, p, *metav1.NewDeleteOptions(0))).To(Succeed())
	}
}

var _ = Describe("Coscheduling", Serial, func() {
	var pgClient versioned.Interface
	BeforeEach(func() {
		var err error
		pgClient, err = versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
	})
	// No namespace controller runs in envtest: delete each spec's PodGroups.
	cleanupGroups := func(ns string) {
		DeferCleanup(func(ctx SpecContext) {
			Expect(pgClient.SchedulingV1alpha1().PodGroups(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
		})
	}

	It("binds nothing of an MPIJob's gang below quorum, says why on the PodGroup, and binds all of it within seconds at quorum", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cs-mpi")
		cleanupGroups(ns)
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-mpi-1", CPU: "4", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-mpi-2", CPU: "4", Memory: "8Gi"})
		// The operator creates the PodGroup and the launcher, and a worker
		// is late (its pod is created last): quorum is 4, 3 exist.
		g := mpiJob(ctx, pgClient, ns, "pi", 3, 2, "1")
		Eventually(podGroupEvents(ctx, ns, "pi", "GangWaiting")).Should(ContainElement(MatchRegexp(`^[0-3]/4 members, waiting for quorum$`)))
		Eventually(g.phase(ctx, pgClient)).Should(Equal(schedv1alpha1.PodGroupPending))
		Consistently(g.bound(ctx), "2s").Should(BeZero(), "a gang below quorum binds nothing")

		By("the last worker appears: the whole gang is bound")
		g.addWorker(2)
		g.pods = append(g.pods, "pi-worker-2")
		Eventually(g.bound(ctx), 10*time.Second).Should(Equal(4))
		Eventually(g.phase(ctx, pgClient)).Should(Equal(schedv1alpha1.PodGroupScheduling), "bound, not yet running: no kubelet")
		Eventually(podGroupEvents(ctx, ns, "pi", "GangScheduled")).Should(ContainElement(ContainSubstring("4 members bound in")))
		pg, err := pgClient.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "pi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pg.Status.OccupiedBy).To(Equal(ns + "/pi," + ns + "/pi-launcher"))
		Expect(pg.Status.ScheduleStartTime.IsZero()).To(BeFalse())
	})

	It("binds none of a TrainJob's gang bigger than the cluster, says why, and binds it whole when a node is added", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cs-train")
		cleanupGroups(ns)
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-train-1", CPU: "3", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-train-2", CPU: "3", Memory: "8Gi"})
		g := trainJob(ctx, pgClient, ns, "llama", 8, "1", 60)
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, g.pods[0], "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("pod group %s/llama: minResources do not fit the cluster's free capacity: needs cpu 8 (free 6)", ns))))
		Consistently(g.bound(ctx), "3s").Should(BeZero(), "nothing of a gang that cannot fit is bound")
		Expect(g.phase(ctx, pgClient)()).To(Equal(schedv1alpha1.PodGroupScheduling), "quorum exists; the gang waits for room")
		Eventually(podGroupEvents(ctx, ns, "llama", "GangUnschedulable")).Should(ContainElement(ContainSubstring("needs cpu 8 (free 6)")))

		By("a node joins: the gang lands as a whole")
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-train-3", CPU: "3", Memory: "8Gi"})
		Eventually(g.bound(ctx), 30*time.Second).Should(Equal(8))
	})

	It("releases a gang whose members fit the cluster's total but not its nodes, and holds nothing while it waits", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cs-frag")
		cleanupGroups(ns)
		// 4 CPUs free in total, but 1.5 per node: three 1-CPU members fit,
		// the fourth fits nowhere. minResources pass; Permit must let go.
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-frag-1", CPU: "1500m", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-frag-2", CPU: "1500m", Memory: "8Gi"},
			sandbox.NodeSpec{Name: "cs-frag-3", CPU: "1", Memory: "8Gi"})
		g := trainJob(ctx, pgClient, ns, "frag", 4, "1", 600)
		Eventually(podGroupEvents(ctx, ns, "frag", "GangReleased")).Should(ContainElement(And(ContainSubstring("preemption declined: with every lower-priority pod evicted a dry run fits 0 of the 1 more needed"), ContainSubstring("members held at Permit were released"))))
		Consistently(g.bound(ctx), "3s").Should(BeZero())
		// Released, the gang waits for a change in the cluster: the room its
		// own release gave back must not send it round again (it did, about
		// 30 attempts a second, when each release requeued and reactivated
		// the members).
		before := unschedulableAttempts(csProfile)
		Consistently(g.bound(ctx), "5s").Should(BeZero())
		Expect(unschedulableAttempts(csProfile)-before).To(BeNumerically("<=", 4), "scheduling attempts of a waiting gang in 5s")
		By("a fourth node: the whole gang binds")
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-frag-4", CPU: "1", Memory: "8Gi"})
		Eventually(g.bound(ctx), 30*time.Second).Should(Equal(4))
	})

	It("never leaves two competing gangs both half bound: one completes, the other waits, then completes when the first is deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cs-two")
		cleanupGroups(ns)
		// Room for 6 one-CPU pods; each gang needs 4. Members are created
		// interleaved, so both gangs start at once.
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-two-1", CPU: "3", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-two-2", CPU: "3", Memory: "8Gi"})
		a := gang{ns: ns, name: "a"}
		b := gang{ns: ns, name: "b"}
		for _, g := range []*gang{&a, &b} {
			_, err := pgClient.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: g.name},
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: 4, ScheduleTimeoutSeconds: ptr.To[int32](300)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for i := range 4 {
			for _, g := range []*gang{&a, &b} {
				name := fmt.Sprintf("%s-%d", g.name, i)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: csProfile, CPU: "1",
					Labels: map[string]string{schedv1alpha1.PodGroupLabel: g.name}})
				Expect(err).NotTo(HaveOccurred())
				g.pods = append(g.pods, name)
			}
		}
		both := func() ([]int, error) {
			na, err := a.bound(ctx)()
			if err != nil {
				return nil, err
			}
			nb, err := b.bound(ctx)()
			return []int{na, nb}, err
		}
		Eventually(both, 20*time.Second).Should(Or(Equal([]int{4, 0}), Equal([]int{0, 4})))
		Consistently(both, "3s").Should(Or(Equal([]int{4, 0}), Equal([]int{0, 4})))
		first, second := a, b
		if n, _ := b.bound(ctx)(); n == 4 {
			first, second = b, a
		}
		By("the first gang finishes: the second completes")
		first.deletePods(ctx)
		Eventually(second.bound(ctx), 30*time.Second).Should(Equal(4))
	})

	It("stress: 6 gangs on a cluster that fits 2 at a time are each fully bound or fully pending, and all complete as earlier ones are deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cs-stress")
		cleanupGroups(ns)
		createNodes(ctx, sandbox.NodeSpec{Name: "cs-stress-1", CPU: "4", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-stress-2", CPU: "4", Memory: "8Gi"})
		const gangs, size = 6, 3
		all := make([]gang, gangs)
		for i := range gangs {
			all[i] = gang{ns: ns, name: fmt.Sprintf("s%d", i)}
			_, err := pgClient.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: all[i].name},
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: size, ScheduleTimeoutSeconds: ptr.To[int32](300)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for j := range size { // interleaved
			for i := range gangs {
				name := fmt.Sprintf("%s-%d", all[i].name, j)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: csProfile, CPU: "1",
					Labels: map[string]string{schedv1alpha1.PodGroupLabel: all[i].name}})
				Expect(err).NotTo(HaveOccurred())
				all[i].pods = append(all[i].pods, name)
			}
		}
		// A gang's members bind one API call after another once released,
		// so a gang may be seen partly bound for an instant, never for long.
		partialSince := map[string]time.Time{}
		done := map[string]bool{}
		check := func() (int, error) {
			complete := 0
			for _, g := range all {
				if done[g.name] {
					continue
				}
				n, err := g.bound(ctx)()
				if err != nil {
					return 0, err
				}
				switch n {
				case size:
					complete++
					delete(partialSince, g.name)
				case 0:
					delete(partialSince, g.name)
				default:
					if t, ok := partialSince[g.name]; !ok {
						partialSince[g.name] = time.Now()
					} else if time.Since(t) > 5*time.Second {
						return 0, StopTrying(fmt.Sprintf("gang %s has %d/%d members bound for more than 5s", g.name, n, size))
					}
				}
			}
			return complete, nil
		}
		for round := 0; len(done) < gangs; round++ {
			Expect(round).To(BeNumerically("<", gangs), "no progress")
			Eventually(check, time.Minute).Should(BeNumerically(">=", 1))
			Consistently(check, "1s").Should(BeNumerically("<=", 2), "at most two gangs fit at a time")
			// Delete the complete gangs, as their jobs finish.
			for _, g := range all {
				if n, _ := g.bound(ctx)(); n == size && !done[g.name] {
					done[g.name] = true
					g.deletePods(ctx)
				}
			}
		}
	})

	Context("beside ElasticQuota and ConfirmBinder in one profile", func() {
		const profile = "coscheduling-quota-confirm"
		createGang := func(ctx SpecContext, ns, name string, n int, labels map[string]string) gang {
			_, err := pgClient.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(n), ScheduleTimeoutSeconds: ptr.To[int32](300)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			g := gang{ns: ns, name: name}
			for i := range n {
				l := map[string]string{schedv1alpha1.PodGroupLabel: name}
				for k, v := range labels {
					l[k] = v
				}
				podName := fmt.Sprintf("%s-%d", name, i)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: podName, SchedulerName: profile, CPU: "1", Labels: l})
				Expect(err).NotTo(HaveOccurred())
				g.pods = append(g.pods, podName)
			}
			return g
		}

		It("admits a gang only if all its members fit the namespace's quota together", func(ctx SpecContext) {
			ns := newNamespace(ctx, "cs-quota")
			cleanupGroups(ns)
			eqClient := pgClient // one clientset serves both kinds
			createQuota(ctx, eqClient, ns, "2")
			eq, err := eqClient.SchedulingV1alpha1().ElasticQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			eq.Spec.Max = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
			_, err = eqClient.SchedulingV1alpha1().ElasticQuotas(ns).Update(ctx, eq, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			createNodes(ctx, sandbox.NodeSpec{Name: "cs-quota-1", CPU: "8", Memory: "8Gi"})
			// Pod by pod, two of the three fit the quota: they would be held
			// at Permit for a third the quota refuses.
			g := createGang(ctx, ns, "q", 3, nil)
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, g.pods[0], "FailedScheduling")).Should(ContainElement(
				HaveField("Message", ContainSubstring("pod group %s/q needs 3 more members placed, and together they do not fit: cpu request 3 exceeds the max 2 of ElasticQuota %s/quota", ns, ns))))
			Consistently(g.bound(ctx), "2s").Should(BeZero())

			By("the quota grows to 3: the gang is admitted and bound whole")
			eq, err = eqClient.SchedulingV1alpha1().ElasticQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			eq.Spec.Min = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
			eq.Spec.Max = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
			_, err = eqClient.SchedulingV1alpha1().ElasticQuotas(ns).Update(ctx, eq, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(g.bound(ctx), 30*time.Second).Should(Equal(3))
		})

		It("retries at once a member that ConfirmBinder refuses after the gang's release, and keeps the members already bound", func(ctx SpecContext) {
			ns := newNamespace(ctx, "cs-confirm")
			cleanupGroups(ns)
			createNodes(ctx, sandbox.NodeSpec{Name: "cs-confirm-1", CPU: "2", Memory: "8Gi"}, sandbox.NodeSpec{Name: "cs-confirm-2", CPU: "2", Memory: "8Gi"})
			g := createGang(ctx, ns, "c", 2, map[string]string{framework.HoldLabel: "true"})
			// Both members are placed (the gang is released) and held before binding.
			Eventually(hold.Waiting).Should(Equal(2))
			taken := hold.NodeOf(ns, g.pods[0])
			Expect(taken).NotTo(BeEmpty())
			// Another writer binds a pod that fills the node the first member
			// was given: ConfirmBinder refuses that member's binding.
			intruder := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: "intruder", CPU: "2"})
			intruder.Spec.NodeName = taken
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, intruder, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			hold.ReleaseAll()
			Eventually(g.bound(ctx), 30*time.Second).Should(Equal(2), "the refused member is retried, still counted in its gang, and lands on the other node")
			for _, p := range g.pods {
				Expect(sandbox.NodeNameOf(ctx, env.Client, ns, p)()).NotTo(Equal(taken))
			}
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, g.pods[0], "BindConflict")).ShouldNot(BeEmpty(), "ConfirmBinder refused the first binding")
			Eventually(podGroupEvents(ctx, ns, "c", "GangMemberBindFailed")).Should(ContainElement(ContainSubstring("its binding failed; it is retried at once")))
		})
	})
})
