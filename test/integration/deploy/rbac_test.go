package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/ptr"

	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

// forbidden matches a request denied to the ServiceAccount in a klog line
// (structured logs escape the quotes).
var forbidden = regexp.MustCompile(`is forbidden: User \\?"system:serviceaccount:berth-system:berth-scheduler`)

const (
	berthNamespace = "berth-system"
	serviceAccount = "system:serviceaccount:berth-system:berth-scheduler"
)

// secondSchedulerObjects reads manifests/second-scheduler, split into the RBAC
// setup (namespace, ServiceAccount, RBAC) and the scheduler config of the ConfigMap.
func secondSchedulerObjects() (setup []*unstructured.Unstructured, config string) {
	dir := filepath.Join(root, "manifests", "second-scheduler")
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		objs, err := sandbox.ReadObjects(filepath.Join(dir, f))
		Expect(err).NotTo(HaveOccurred())
		setup = append(setup, objs...)
	}
	cms, err := sandbox.ReadObjects(filepath.Join(dir, "config.yaml"))
	Expect(err).NotTo(HaveOccurred())
	config, ok, err := unstructured.NestedString(cms[0].Object, "data", schedulerConfigKey)
	Expect(err).NotTo(HaveOccurred())
	Expect(ok).To(BeTrue())
	return setup, config
}

// createGang creates a PodGroup of n members and its n pods of 100m, for
// profile, and waits until all are bound; it returns the PodGroup's name.
func createGang(ctx SpecContext, ns, name, profile string, n int) string {
	GinkgoHelper()
	c, err := versioned.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	_, err = c.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(n)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(c.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
	})
	for i := range n {
		pod := fmt.Sprintf("%s-%d", name, i)
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: pod, SchedulerName: profile, CPU: "100m",
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: name}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Pods(ns).Delete(ctx, pod, *metav1.NewDeleteOptions(0))).To(Succeed())
		})
	}
	for i := range n {
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, fmt.Sprintf("%s-%d", name, i)), "20s").ShouldNot(BeEmpty())
	}
	return name
}

// podGroupPhase polls the phase of PodGroup default/name.
func podGroupPhase(ctx SpecContext, name string) func() (schedv1alpha1.PodGroupPhase, error) {
	GinkgoHelper()
	c, err := versioned.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	return func() (schedv1alpha1.PodGroupPhase, error) {
		pg, err := c.SchedulingV1alpha1().PodGroups("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return pg.Status.Phase, nil
	}
}

// hotNode is tainted for loadAwareProbe's pods only; its kubelet (KWOK's)
// reports 7900m of its 8 CPU in use.
const hotNode = "metrics-hot"

var hotTaint = v1.Taint{Key: "berth.io/test", Value: "metrics-hot", Effect: v1.TaintEffectNoSchedule}

// createHotNode creates hotNode (deleted when the calling node ends) and
// waits until the API server serves its NodeMetrics (metrics-server scrapes
// every 10s and serves a node from its second scrape on), so that a
// scheduler started afterwards lists them in its first refresh.
func createHotNode(ctx SpecContext) {
	GinkgoHelper()
	_, err := kwok.CreateNode(ctx, sandbox.NodeSpec{Name: hotNode, CPU: "8", Memory: "16Gi", Taints: []v1.Taint{hotTaint}})
	Expect(err).NotTo(HaveOccurred())
	// Other specs share this control plane: leave no node behind.
	DeferCleanup(func(ctx SpecContext) {
		Expect(kwok.DeleteNode(ctx, hotNode)).To(Succeed())
	})
	Expect(kwok.WaitReady(ctx, time.Minute, hotNode)).To(Succeed())
	Expect(kwok.SetUsage(ctx, hotNode, "7900m", "2Gi")).To(Succeed())
	Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, hotNode) }, "45s", "500ms").
		Should(BeNumerically(">", 7), "metrics-server log: %s", metricsServer.LogPath())
}

// expectLoadAwareReadsMetrics creates a pod of profile that only hotNode
// admits and expects LoadAware to reject it for its CPU usage: the
// scheduler listed NodeMetrics through the aggregation layer (kube-apiserver
// authorizes the list, metrics-server authorizes it again for the user the
// aggregator names) with its own credentials.
func expectLoadAwareReadsMetrics(ctx SpecContext, name, profile, logPath string) {
	GinkgoHelper()
	_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: name, SchedulerName: profile, CPU: "100m",
		NodeSelector: map[string]string{v1.LabelHostname: hotNode}, Tolerations: []v1.Toleration{{Key: hotTaint.Key, Operator: v1.TolerationOpExists}}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.Client.CoreV1().Pods("default").Delete(ctx, name, *metav1.NewDeleteOptions(0))).To(Succeed())
	})
	Eventually(sandbox.EventsFor(ctx, env.Client, "default", name, "FailedScheduling"), "30s").
		Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))), "scheduler log: %s", logPath)
}

// canI asks the API server whether the ServiceAccount may do attrs.
func canI(ctx SpecContext, attrs authorizationv1.ResourceAttributes) bool {
	GinkgoHelper()
	return canUser(ctx, serviceAccount, berthNamespace, attrs)
}

// startAsServiceAccount runs bin/scheduler with the ConfigMap's config, leader
// election on, and a client that impersonates the ServiceAccount.
func startAsServiceAccount(config, name string) (*sandbox.Process, string) {
	kubeconfig, err := env.KubeconfigAs(serviceAccount, name+".kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	raw := filepath.Join(env.Dir, name+"-raw.yaml")
	Expect(os.WriteFile(raw, []byte(config), 0o600)).To(Succeed())
	cfg, err := sandbox.PrepareConfig(env.Dir, name+".yaml", kubeconfig, true, raw)
	Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(env.Dir, name+".log")
	p, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, logPath, "--v=2")
	Expect(err).NotTo(HaveOccurred())
	return p, logPath
}

// explained polls a default-namespace pod's explain.berth.dev/result.
func explained(ctx SpecContext, name string) func() (string, error) {
	return func() (string, error) {
		p, err := env.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Annotations[explain.AnnotationResult], nil
	}
}

var _ = Describe("the second-scheduler RBAC", Ordered, func() {
	var setup []*unstructured.Unstructured
	var config string

	BeforeAll(func(ctx SpecContext) {
		setup, config = secondSchedulerObjects()
		Expect(env.Apply(ctx, setup, false)).To(Succeed())
		_, err := sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "rbac-node", CPU: "8", Memory: "16Gi"})
		Expect(err).NotTo(HaveOccurred())
		// Other specs share this control plane: leave no node behind.
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "rbac-node", metav1.DeleteOptions{})).To(Succeed())
		})
		createHotNode(ctx)
	})

	It("is enough to schedule with every Berth plugin, as the ServiceAccount, with leader election on", func(ctx SpecContext) {
		p, logPath := startAsServiceAccount(config, "rbac-ok")
		defer p.Stop()
		for i := range 3 {
			name := fmt.Sprintf("rbac-ok-%d", i)
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: name, SchedulerName: "berth-scheduler", CPU: "100m",
				Annotations: map[string]string{explain.AnnotationRequest: "true"}})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, "default", name)).Should(Equal("rbac-node"), "scheduler log: %s", logPath)
		}
		// Explain wrote its result through pods/status.
		Eventually(explained(ctx, "rbac-ok-0"), "20s").Should(ContainSubstring(`"node":"rbac-node"`), "scheduler log: %s", logPath)
		// A gang of two: Coscheduling reads the PodGroup and writes its status.
		pgName := createGang(ctx, "default", "rbac-gang", "berth-scheduler", 2)
		Eventually(podGroupPhase(ctx, pgName), "20s").Should(Equal(schedv1alpha1.PodGroupScheduling),
			"the scheduler wrote the PodGroup's status; log: %s", logPath)
		lease, err := env.Client.CoordinationV1().Leases(berthNamespace).Get(ctx, "berth-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		log, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		// Nothing the scheduler did was denied.
		Expect(forbidden.Match(log)).To(BeFalse(), "scheduler log %s has a denied request", logPath)
		// LoadAware read metrics-server's NodeMetrics as the ServiceAccount.
		expectLoadAwareReadsMetrics(ctx, "rbac-ok-hot", "berth-scheduler", logPath)
	})

	It("cannot read or renew the control plane scheduler's lease, nor its LeaseCandidates; its own lease it can", func(ctx SpecContext) {
		for _, tc := range []struct {
			namespace, resource, name, verb string
			allowed                         bool
		}{
			{"kube-system", "leases", "kube-scheduler", "update", false},
			{"kube-system", "leases", "kube-scheduler", "get", false},
			{"kube-system", "leases", "", "create", false},
			{"kube-system", "leasecandidates", "kube-scheduler", "update", false},
			{"kube-system", "leasecandidates", "", "create", false},
			{"default", "leases", "kube-scheduler", "update", false},
			{berthNamespace, "leases", "berth-scheduler", "update", true},
			{berthNamespace, "leases", "berth-scheduler", "get", true},
			{berthNamespace, "leases", "", "create", true},
		} {
			Expect(canI(ctx, authorizationv1.ResourceAttributes{
				Namespace: tc.namespace, Verb: tc.verb, Group: "coordination.k8s.io", Resource: tc.resource, Name: tc.name,
			})).To(Equal(tc.allowed), "%s %s %s/%s", tc.verb, tc.resource, tc.namespace, tc.name)
		}
	})

	It("grants everything the API server's system:kube-scheduler grants, but its Lease and LeaseCandidate rules", func(ctx SpecContext) {
		role, err := env.Client.RbacV1().ClusterRoles().Get(ctx, "system:kube-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		checked := 0
		for _, rule := range role.Rules {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					if group == "coordination.k8s.io" && (resource == "leases" || resource == "leasecandidates") {
						continue // Berth's own lease only (above)
					}
					res, sub, _ := strings.Cut(resource, "/")
					names := rule.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, verb := range rule.Verbs {
						for _, name := range names {
							Expect(canI(ctx, authorizationv1.ResourceAttributes{
								Verb: verb, Group: group, Resource: res, Subresource: sub, Name: name,
							})).To(BeTrue(), "upstream's system:kube-scheduler may %s %s.%s %q; Berth's ClusterRole may not", verb, resource, group, name)
							checked++
						}
					}
				}
			}
		}
		Expect(checked).To(BeNumerically(">", 20))
	})

	It("keeps CoordinatedLeaderElection off: the shipped flags set it false, and the config cannot set gates", func() {
		objs, err := sandbox.ReadObjects(filepath.Join(root, "manifests", "second-scheduler", "deployment.yaml"))
		Expect(err).NotTo(HaveOccurred())
		dep := &appsv1.Deployment{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, dep)).To(Succeed())
		var gates []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, a := range append(append([]string{}, c.Command...), c.Args...) {
				if v, ok := strings.CutPrefix(a, "--feature-gates="); ok {
					gates = append(gates, strings.Split(v, ",")...)
				}
			}
		}
		Expect(gates).To(ContainElement("CoordinatedLeaderElection=false"))
		Expect(gates).NotTo(ContainElement("CoordinatedLeaderElection=true"))
		// Parsed by the gate the binary uses: accepted, and off.
		fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
		for _, g := range gates {
			Expect(fg.Set(g)).To(Succeed())
		}
		Expect(fg.Enabled(genericfeatures.CoordinatedLeaderElection)).To(BeFalse())
	})

	It("writes PodGroup status only while it holds the lease", func(ctx SpecContext) {
		// Another replica holds the lease: this one waits, schedules nothing
		// and must write nothing.
		now := metav1.NewMicroTime(time.Now())
		_, err := env.Client.CoordinationV1().Leases(berthNamespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: berthNamespace, Name: "berth-scheduler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // left by the spec before: take it over for another replica
			lease, gerr := env.Client.CoordinationV1().Leases(berthNamespace).Get(ctx, "berth-scheduler", metav1.GetOptions{})
			Expect(gerr).NotTo(HaveOccurred())
			lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = ptr.To("another-replica"), ptr.To[int32](3600), &now
			_, err = env.Client.CoordinationV1().Leases(berthNamespace).Update(ctx, lease, metav1.UpdateOptions{})
		}
		Expect(err).NotTo(HaveOccurred())
		p, logPath := startAsServiceAccount(config, "status-follower")
		defer p.Stop()
		c, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		_, err = c.SchedulingV1alpha1().PodGroups("default").Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "follower-gang"},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: 2},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(c.SchedulingV1alpha1().PodGroups("default").Delete(ctx, "follower-gang", metav1.DeleteOptions{})).To(Succeed())
		})
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: "follower-gang-0", SchedulerName: "berth-scheduler", CPU: "100m",
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: "follower-gang"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Pods("default").Delete(ctx, "follower-gang-0", *metav1.NewDeleteOptions(0))).To(Succeed())
		})
		Eventually(func() (bool, error) { return logContains(logPath, "Attempting to acquire leader lease") }, "20s").Should(BeTrue(), "log %s", logPath)
		Consistently(podGroupPhase(ctx, "follower-gang"), "8s").Should(BeEmpty(), "a replica waiting for the lease wrote status; log %s", logPath)

		By("the other replica's lease goes: this one leads and writes")
		Expect(env.Client.CoordinationV1().Leases(berthNamespace).Delete(ctx, "berth-scheduler", metav1.DeleteOptions{})).To(Succeed())
		Eventually(podGroupPhase(ctx, "follower-gang"), "60s").Should(Equal(schedv1alpha1.PodGroupPending), "log %s", logPath)
	})

	It("is needed: without Berth's leader-election Role the scheduler cannot lead and schedules nothing", func(ctx SpecContext) {
		Expect(env.Client.RbacV1().Roles(berthNamespace).Delete(ctx, "berth-scheduler:leader-election", metav1.DeleteOptions{})).To(Succeed())
		p, logPath := startAsServiceAccount(config, "rbac-missing")
		defer p.Stop()
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: "rbac-denied", SchedulerName: "berth-scheduler", CPU: "100m"})
		Expect(err).NotTo(HaveOccurred())
		leaseDenied := regexp.MustCompile(`leases.coordination.k8s.io \\?"berth-scheduler\\?" is forbidden`)
		Eventually(func() (bool, error) {
			b, err := os.ReadFile(logPath)
			return leaseDenied.Match(b), err
		}).Should(BeTrue(), "scheduler log %s does not show the lease denied", logPath)
		Consistently(sandbox.NodeNameOf(ctx, env.Client, "default", "rbac-denied"), "5s").Should(BeEmpty())
	})
})

// The control plane's scheduler authenticates as system:kube-scheduler:
// upstream's ClusterRole plus manifests/control-plane/rbac.yaml must let it
// run every Berth plugin.
var _ = Describe("the control-plane RBAC", func() {
	It("is enough to schedule with every Berth plugin as system:kube-scheduler", func(ctx SpecContext) {
		objs, err := sandbox.ReadObjects(filepath.Join(root, "manifests", "control-plane", "rbac.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Apply(ctx, objs, false)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "berth:kube-scheduler", metav1.DeleteOptions{})).To(Succeed())
			Expect(env.Client.RbacV1().ClusterRoles().Delete(ctx, "berth:kube-scheduler", metav1.DeleteOptions{})).To(Succeed())
		})
		_, err = sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "cp-rbac-node", CPU: "8", Memory: "16Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "cp-rbac-node", metav1.DeleteOptions{})).To(Succeed())
		})
		createHotNode(ctx)
		kubeconfig, err := env.KubeconfigAs("system:kube-scheduler", "cp-rbac.kubeconfig")
		Expect(err).NotTo(HaveOccurred())
		cfg, err := sandbox.PrepareConfig(env.Dir, "cp-rbac.yaml", kubeconfig, false, filepath.Join(root, "manifests", "examples", "all-plugins.yaml"))
		Expect(err).NotTo(HaveOccurred())
		logPath := filepath.Join(env.Dir, "cp-rbac.log")
		p, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, logPath, "--v=2")
		Expect(err).NotTo(HaveOccurred())
		defer p.Stop()
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: "cp-rbac-pod", SchedulerName: "berth-all", CPU: "100m",
			Annotations: map[string]string{explain.AnnotationRequest: "true"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Pods("default").Delete(ctx, "cp-rbac-pod", *metav1.NewDeleteOptions(0))).To(Succeed())
		})
		Eventually(sandbox.NodeNameOf(ctx, env.Client, "default", "cp-rbac-pod"), "20s").Should(Equal("cp-rbac-node"), "scheduler log: %s", logPath)
		Eventually(explained(ctx, "cp-rbac-pod"), "20s").Should(ContainSubstring(`"node":"cp-rbac-node"`), "scheduler log: %s", logPath)
		pgName := createGang(ctx, "default", "cp-rbac-gang", "berth-all", 2)
		Eventually(podGroupPhase(ctx, pgName), "20s").Should(Equal(schedv1alpha1.PodGroupScheduling), "log: %s", logPath)
		log, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(regexp.MustCompile(`is forbidden: User \\?"system:kube-scheduler`).Match(log)).To(BeFalse(), "scheduler log %s has a denied request", logPath)
		expectLoadAwareReadsMetrics(ctx, "cp-rbac-hot", "berth-all", logPath)
	})
})
