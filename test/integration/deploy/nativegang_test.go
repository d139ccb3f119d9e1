package deploy

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// Kubernetes' own gangs (scheduling.k8s.io/v1beta1 PodGroups, the PodGroup
// scheduling cycle) under manifests/examples/native-gangs.yaml: bin/scheduler
// with the GenericWorkload gate, on the suite's API server that serves the
// API. Pods and groups are created as a Job controller would create them:
// the PodGroup, then its pods naming it in spec.schedulingGroup.
var _ = Describe("the native-gangs profile", func() {
	var ns string
	var eq versioned.Interface

	// gang creates a PodGroup of minCount and its pods of cpu each; extra
	// changes each pod before it is created.
	gang := func(ctx SpecContext, name string, minCount int32, pods int, cpu string, extra func(*v1.Pod)) []string {
		GinkgoHelper()
		_, err := env.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for i := range pods {
			p := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), SchedulerName: "berth-native-gangs", CPU: cpu, Memory: "64Mi"})
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
			if extra != nil {
				extra(p)
			}
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			names = append(names, p.Name)
		}
		return names
	}
	bound := func(ctx SpecContext, names []string) func() (int, error) {
		return func() (int, error) {
			n := 0
			for _, name := range names {
				p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return 0, err
				}
				if p.Spec.NodeName != "" {
					n++
				}
			}
			return n, nil
		}
	}
	// pendingMessage is a pod's PodScheduled=False message ("" while it has
	// none).
	pendingMessage := func(ctx SpecContext, name string) func() (string, error) {
		return func() (string, error) {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					return c.Message, nil
				}
			}
			return "", nil
		}
	}
	// groupScheduled is the PodGroup's PodGroupInitiallyScheduled condition,
	// as the pod group cycle writes it: "True", "False" or "" (none yet).
	groupScheduled := func(ctx SpecContext, name string) func() (string, error) {
		return func() (string, error) {
			pg, err := env.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			for _, c := range pg.Status.Conditions {
				if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled {
					return string(c.Status), nil
				}
			}
			return "", nil
		}
	}
	usedCPU := func(ctx SpecContext) func() (string, error) {
		return func() (string, error) {
			q, err := eq.SchedulingV1alpha1().ElasticQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			u := q.Status.Used[v1.ResourceCPU]
			return u.String(), nil
		}
	}

	// startScheduler runs bin/scheduler on the example, with the gate, until
	// the spec ends (after the spec's nodes exist: LoadAware lists their
	// metrics when it starts).
	startScheduler := func() {
		GinkgoHelper()
		cfg, err := sandbox.PrepareConfig(env.Dir, "native-gangs.yaml", env.Kubeconfig, false, filepath.Join(root, "manifests", "examples", "native-gangs.yaml"))
		Expect(err).NotTo(HaveOccurred())
		logPath := filepath.Join(env.Dir, "native-gangs.log")
		p, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, logPath, "--feature-gates=GenericWorkload=true", "--v=2")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.Stop)
		GinkgoWriter.Printf("scheduler log: %s\n", logPath)
	}

	BeforeEach(func(ctx SpecContext) {
		n, err := env.Client.CoreV1().Namespaces().Create(ctx, sandbox.Namespace("native-gangs"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ns = n.Name
		DeferCleanup(func(ctx SpecContext) {
			_ = env.Client.CoreV1().Pods(ns).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})
			_ = env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		for _, s := range []sandbox.NodeSpec{
			{Name: "native-1", CPU: "4", Memory: "8Gi"},
			{Name: "native-gpu", CPU: "8", Memory: "8Gi", Labels: map[string]string{"nvidia.com/gpu.present": "true"}},
		} {
			_, err := sandbox.CreateNode(ctx, env.Client, s)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = env.Client.CoreV1().Nodes().Delete(ctx, s.Name, metav1.DeleteOptions{})
			})
		}
		eq, err = versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		_, err = eq.SchedulingV1alpha1().ElasticQuotas(ns).Create(ctx, &schedv1alpha1.ElasticQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
			Spec: schedv1alpha1.ElasticQuotaSpec{
				Min: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
				Max: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("admits a gang whole through its quota: one that does not fit binds nothing and leaves used as it was, one that fits binds whole", func(ctx SpecContext) {
		startScheduler()
		// A gang of one: the quota's used is 500m.
		single := gang(ctx, "single", 1, 1, "500m", nil)
		Eventually(bound(ctx, single)).Should(Equal(1))
		Eventually(usedCPU(ctx)).Should(Equal("500m"))

		// Three members of 1 CPU: 3.5 CPU against a max of 2. The cycle
		// reserves the first member (counted: used 1500m), refuses the
		// second for the quota and reverts the first: the group fails whole.
		tooBig := gang(ctx, "too-big", 3, 3, "1", nil)
		Eventually(groupScheduled(ctx, "too-big")).Should(Equal("False"))
		Eventually(func() ([]string, error) {
			var msgs []string
			for _, name := range tooBig {
				m, err := pendingMessage(ctx, name)()
				if err != nil {
					return nil, err
				}
				msgs = append(msgs, m)
			}
			return msgs, nil
		}).Should(ContainElement(ContainSubstring("cpu used 1500m + request 1 exceeds max 2")),
			"a member refused for the quota with the first member counted: the group is admitted whole")
		Consistently(bound(ctx, tooBig), "5s").Should(Equal(0))
		// The simulated member is never published in status.used.
		Consistently(usedCPU(ctx), "3s").Should(Equal("500m"), "a reverted gang leaves the quota's used as it was")

		// Two members of 500m: 1.5 CPU in all, within max. Bound whole.
		Expect(env.Client.CoreV1().Pods(ns).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})).To(Succeed())
		Eventually(usedCPU(ctx)).Should(Equal("0"))
		fits := gang(ctx, "fits", 2, 2, "500m", nil)
		Eventually(bound(ctx, fits)).Should(Equal(2))
		Eventually(groupScheduled(ctx, "fits")).Should(Equal("True"))
		Eventually(usedCPU(ctx)).Should(Equal("1"))
	})

	It("fails a gang whose member a CELPolicy rule rejects, with the rule in the member's status", func(ctx SpecContext) {
		startScheduler()
		// The second member may run only on the GPU node, and asks for no
		// GPU: rule gpu-nodes-for-gpu-pods keeps it off. The first fits.
		members := gang(ctx, "trainer", 2, 2, "500m", func(p *v1.Pod) {
			if p.Name == "trainer-1" {
				p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.present": "true"}
			}
		})
		Eventually(pendingMessage(ctx, members[1])).Should(ContainSubstring("GPU nodes are reserved for pods that request GPUs"))
		Eventually(groupScheduled(ctx, "trainer")).Should(Equal("False"))
		Consistently(bound(ctx, members), "5s").Should(Equal(0), "no member of a gang that does not fit is bound")
		Consistently(usedCPU(ctx), "2s").Should(Equal("0"))
	})

	It("schedules a scheduler-plugins PodGroup and a native gang side by side, each whole, with Coscheduling's queue sort", func(ctx SpecContext) {
		startScheduler()
		// Two members of each kind, 500m each: 2 CPUs on native-1 (the
		// GPU node is CELPolicy's), the namespace's quota max.
		_, err := eq.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp"},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: 2},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var spMembers []string
		for i := range 2 {
			p := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("sp-%d", i), SchedulerName: "berth-native-gangs", CPU: "500m", Memory: "64Mi",
				Labels: map[string]string{schedv1alpha1.PodGroupLabel: "sp"}})
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			spMembers = append(spMembers, p.Name)
		}
		native := gang(ctx, "native", 2, 2, "500m", nil)
		Eventually(bound(ctx, spMembers)).Should(Equal(2))
		Eventually(bound(ctx, native)).Should(Equal(2))
		Eventually(groupScheduled(ctx, "native")).Should(Equal("True"))
		Eventually(func() (schedv1alpha1.PodGroupPhase, error) {
			pg, err := eq.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "sp", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return pg.Status.Phase, nil
		}).Should(Equal(schedv1alpha1.PodGroupScheduling), "Coscheduling writes the SP PodGroup's status (Scheduling: both members there, none running without a kubelet)")
		Eventually(usedCPU(ctx)).Should(Equal("2"))
	})

	It("keeps a refused gang's replacement members off the node that refused them (AdmissionFeedback)", func(ctx SpecContext) {
		// Three KWOK nodes; the roomiest, which every plugin prefers,
		// refuses every pod at admission (its kubelet ends them Failed).
		rc, err := sandbox.StartRefusalCluster(ctx, kwok, "native")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rc.Close)
		startScheduler()
		// The members' controller: AdmissionFeedback remembers a refusal per
		// node and controller (an owner reference with controller: true),
		// as a Job controller's pods carry.
		owner, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ownedBy := func(p *v1.Pod) {
			s := rc.PodSpec(ns, p.Name, "berth-native-gangs")
			p.Spec.NodeSelector, p.Spec.Tolerations = s.NodeSelector, s.Tolerations
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		}
		gang(ctx, "refused", 2, 2, "1", ownedBy)
		Eventually(rc.RefusedCount(ctx), 30*time.Second).Should(Equal(2), "both members go to the roomiest node, which refuses them")

		By("the controller's replacements, in a new group of the same controller, go to the other nodes")
		replacements := gang(ctx, "replacement", 2, 2, "1", ownedBy)
		Eventually(bound(ctx, replacements), 30*time.Second).Should(Equal(2))
		for _, name := range replacements {
			Expect(sandbox.NodeNameOf(ctx, env.Client, ns, name)()).To(BeElementOf(rc.Others))
		}
		Consistently(rc.RefusedCount(ctx), "3s").Should(Equal(2), "no replacement sent back to %s", rc.BlackHole)
	})

	// team creates a namespace with a CPU quota of min and max, deleted with
	// its pods when the spec ends.
	team := func(ctx SpecContext, prefix, min, max string) string {
		GinkgoHelper()
		n, err := env.Client.CoreV1().Namespaces().Create(ctx, sandbox.Namespace(prefix), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = env.Client.AppsV1().Deployments(n.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = env.Client.AppsV1().ReplicaSets(n.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = env.Client.CoreV1().Pods(n.Name).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})
			_ = env.Client.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{})
		})
		_, err = eq.SchedulingV1alpha1().ElasticQuotas(n.Name).Create(ctx, &schedv1alpha1.ElasticQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: n.Name, Name: "quota"},
			Spec: schedv1alpha1.ElasticQuotaSpec{
				Min: v1.ResourceList{v1.ResourceCPU: resource.MustParse(min)},
				Max: v1.ResourceList{v1.ResourceCPU: resource.MustParse(max)},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return n.Name
	}

	// reclaimFor runs the reclaim with b's gang of the given kind:
	// "native" (a scheduling.k8s.io PodGroup, the PodGroup cycle and
	// ElasticQuota's PodGroupPostFilter) or "sp" (a scheduler-plugins
	// PodGroup, Coscheduling and ElasticQuota's per-pod PostFilter).
	reclaimFor := func(ctx SpecContext, kind string) {
		GinkgoHelper()
		// The cluster: one node with room for six 1-CPU pods; team
		// a (min 2, max 6) runs six, borrowing team b's idle min of 4; b's
		// gang of four 1-CPU members asks for its min back. Same priority:
		// only the quota's reclaim rule may take a's pods. KWOK plays the
		// node's kubelet (a preempted pod goes away). Its room is six pod
		// slots rather than six CPUs: the profile's LoadAware counts a pod
		// bound in the last minute at its request and keeps a node under 80%
		// of its CPU, which would keep the last member off a node full of
		// fresh pods whatever the quota does.
		sel := map[string]string{"berth.dev/reclaim": kind}
		s := sandbox.NodeSpec{Name: "reclaim-" + kind, CPU: "16", Memory: "48Gi", Pods: "6", Labels: sel}
		_, err := kwok.CreateNode(ctx, s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(kwok.DeleteNode(ctx, s.Name)).To(Succeed()) })
		Expect(kwok.WaitReady(ctx, time.Minute, s.Name)).To(Succeed())
		// Only the two teams' quotas: the shared namespace's min would be
		// more room to borrow.
		Expect(eq.SchedulingV1alpha1().ElasticQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})).To(Succeed())
		startScheduler()

		a, b := team(ctx, "reclaim-"+kind+"-a", "2", "6"), team(ctx, "reclaim-"+kind+"-b", "4", "6")

		By("a runs six 1-CPU pods: 4 CPU borrowed from b's min")
		var borrowers []string
		for i := range 6 {
			p := sandbox.MakePod(sandbox.PodSpec{Namespace: a, Name: fmt.Sprintf("a-%d", i), SchedulerName: "berth-native-gangs", CPU: "1", Memory: "64Mi", NodeSelector: sel})
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) // a preempted pod stops at once
			_, err := env.Client.CoreV1().Pods(a).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			borrowers = append(borrowers, p.Name)
		}
		ns = a
		Eventually(bound(ctx, borrowers)).Should(Equal(6))

		By("b's gang of four 1-CPU members: bound whole, four of a's pods preempted, a back at its min")
		ns = b
		var members []string
		if kind == "native" {
			members = gang(ctx, "reclaim", 4, 4, "1", func(p *v1.Pod) { p.Spec.NodeSelector = sel })
		} else {
			_, err := eq.SchedulingV1alpha1().PodGroups(b).Create(ctx, &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "reclaim"},
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: 4},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			for i := range 4 {
				p := sandbox.MakePod(sandbox.PodSpec{Namespace: b, Name: fmt.Sprintf("reclaim-%d", i), SchedulerName: "berth-native-gangs", CPU: "1", Memory: "64Mi",
					NodeSelector: sel, Labels: map[string]string{schedv1alpha1.PodGroupLabel: "reclaim"}})
				_, err := env.Client.CoreV1().Pods(b).Create(ctx, p, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
				members = append(members, p.Name)
			}
		}
		Eventually(bound(ctx, members), time.Minute).Should(Equal(4))
		if kind == "native" {
			Eventually(groupScheduled(ctx, "reclaim")).Should(Equal("True"))
		} else {
			Eventually(func() (schedv1alpha1.PodGroupPhase, error) {
				pg, err := eq.SchedulingV1alpha1().PodGroups(b).Get(ctx, "reclaim", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				return pg.Status.Phase, nil
			}).Should(BeElementOf(schedv1alpha1.PodGroupScheduling, schedv1alpha1.PodGroupRunning), "Coscheduling writes the SP gang's status (Running once KWOK runs all four)")
		}
		ns = a
		// a's pods still there, all bound (a preempted pod is deleted).
		left := func() (int, error) {
			l, err := env.Client.CoreV1().Pods(a).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			n := 0
			for _, p := range l.Items {
				if p.Spec.NodeName != "" {
					n++
				}
			}
			return n, nil
		}
		Eventually(left).Should(Equal(2), "four of a's pods preempted")
		Consistently(left, "3s").Should(Equal(2), "and no more: a runs its min")
	}

	It("reclaims for a native gang on the nodes it can use (issue 51, item 2): the borrower's Deployment keeps its min on the other node", func(ctx SpecContext) {
		// a (min 2) runs two pods on y, older, then two on x; b's gang of
		// 2 x 1 CPU may go to y only. Capped at a's min before the gang was
		// placed, the two least important (x's, younger) were taken: of no
		// use, so nothing was preempted and the gang waited for ever. Each
		// node has two pod slots, the quota is in CPU (the profile's
		// LoadAware keeps a node under 80% of its CPU, see reclaimFor).
		nodes := map[string]map[string]string{"native-y": {"berth.dev/pool": "y"}, "native-x": {"berth.dev/pool": "x"}}
		for name, labels := range nodes {
			_, err := kwok.CreateNode(ctx, sandbox.NodeSpec{Name: name, CPU: "16", Memory: "48Gi", Pods: "2", Labels: labels})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { Expect(kwok.DeleteNode(ctx, name)).To(Succeed()) })
		}
		Expect(kwok.WaitReady(ctx, time.Minute, "native-y", "native-x")).To(Succeed())
		Expect(eq.SchedulingV1alpha1().ElasticQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})).To(Succeed())
		startScheduler()
		a, b := team(ctx, "pool-a", "2", "6"), team(ctx, "pool-b", "2", "2")

		running := func(deployment string) func() ([]v1.Pod, error) {
			return func() ([]v1.Pod, error) {
				l, err := env.Client.CoreV1().Pods(a).List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
				if err != nil {
					return nil, err
				}
				var out []v1.Pod
				for _, p := range l.Items {
					if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.StartTime != nil {
						out = append(out, p)
					}
				}
				return out, nil
			}
		}
		By("a's Deployment on y starts first, its Deployment on x later: y's pods are the more important victims")
		_, err := sandbox.CreateDeployment(ctx, env.Client, sandbox.PodSpec{Namespace: a, Name: "on-y", SchedulerName: "berth-native-gangs", CPU: "1", Memory: "64Mi",
			NodeSelector: nodes["native-y"]}, 2)
		Expect(err).NotTo(HaveOccurred())
		Eventually(running("on-y")).Should(HaveLen(2))
		ys, err := running("on-y")()
		Expect(err).NotTo(HaveOccurred())
		// Start times have a second's resolution: x's must be later.
		Eventually(func() bool {
			return time.Since(ys[1].Status.StartTime.Time) > 1100*time.Millisecond && time.Since(ys[0].Status.StartTime.Time) > 1100*time.Millisecond
		}).Should(BeTrue())
		_, err = sandbox.CreateDeployment(ctx, env.Client, sandbox.PodSpec{Namespace: a, Name: "on-x", SchedulerName: "berth-native-gangs", CPU: "1", Memory: "64Mi",
			NodeSelector: nodes["native-x"]}, 2)
		Expect(err).NotTo(HaveOccurred())
		Eventually(running("on-x")).Should(HaveLen(2))

		By("b's native gang of 2 x 1 CPU for y: a's pods on y are preempted, a keeps its min on x")
		ns = b
		members := gang(ctx, "on-y", 2, 2, "1", func(p *v1.Pod) { p.Spec.NodeSelector = nodes["native-y"] })
		Eventually(bound(ctx, members), time.Minute).Should(Equal(2))
		for _, m := range members {
			Expect(sandbox.NodeNameOf(ctx, env.Client, b, m)()).To(Equal("native-y"))
		}
		Eventually(running("on-y")).Should(BeEmpty())
		Consistently(running("on-x"), "3s").Should(HaveLen(2), "a keeps its min, on x")
		preempted, err := env.Client.CoreV1().Events(a).List(ctx, metav1.ListOptions{FieldSelector: "reason=Preempted"})
		Expect(err).NotTo(HaveOccurred())
		Expect(preempted.Items).To(HaveLen(2), "two evictions: y's pods")
	})

	It("reclaims borrowed CPU for a native gang whose namespace is within its min: the borrower's pods are preempted until the whole gang fits, and no more", func(ctx SpecContext) {
		reclaimFor(ctx, "native")
	})

	It("reclaims borrowed CPU for a scheduler-plugins gang in the same profile, to the same end", func(ctx SpecContext) {
		reclaimFor(ctx, "sp")
	})

	It("estimates a gang's members as the cycle places them: they do not all go to the node that looked idle", func(ctx SpecContext) {
		// Two nodes KWOK plays the kubelet of, with the usage metrics-server
		// reports for them: 1 of 8 CPUs on the idle node, 4 of 8 on the
		// other. LoadAware (weight 3) prefers the idle one by its usage plus
		// the estimates of the pods placed since the sample: were a member
		// not counted as the cycle places the next, all six would go there.
		sel := map[string]string{"berth.dev/native-load": "true"}
		for _, s := range []sandbox.NodeSpec{
			{Name: "native-idle", CPU: "8", Memory: "16Gi", Labels: sel},
			{Name: "native-busy", CPU: "8", Memory: "16Gi", Labels: sel},
		} {
			_, err := kwok.CreateNode(ctx, s)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { Expect(kwok.DeleteNode(ctx, s.Name)).To(Succeed()) })
		}
		Expect(kwok.WaitReady(ctx, time.Minute, "native-idle", "native-busy")).To(Succeed())
		Expect(kwok.SetUsage(ctx, "native-idle", "1", "1Gi")).To(Succeed())
		Expect(kwok.SetUsage(ctx, "native-busy", "4", "1Gi")).To(Succeed())
		for node, atLeast := range map[string]float64{"native-idle": 0.9, "native-busy": 3.9} {
			Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, node) }, "45s", "500ms").
				Should(BeNumerically(">", atLeast), "metrics-server log: %s", metricsServer.LogPath())
		}
		startScheduler()

		// A namespace of its own: the shared one's quota (max 2 CPUs) would
		// refuse the gang.
		n, err := env.Client.CoreV1().Namespaces().Create(ctx, sandbox.Namespace("native-load"), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ns = n.Name
		DeferCleanup(func(ctx SpecContext) {
			_ = env.Client.CoreV1().Pods(n.Name).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{})
			_ = env.Client.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{})
		})
		members := gang(ctx, "spread", 6, 6, "1", func(p *v1.Pod) { p.Spec.NodeSelector = sel })
		Eventually(bound(ctx, members)).Should(Equal(6))
		on := map[string]int{}
		for _, name := range members {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			on[p.Spec.NodeName]++
		}
		GinkgoWriter.Printf("gang members per node: %v\n", on)
		Expect(on).To(HaveKey("native-busy"), "members per node: %v", on)
		Expect(on).To(HaveKey("native-idle"), "members per node: %v", on)
	})
})
