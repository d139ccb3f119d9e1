package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/berth-scheduler/berth/test/integration/framework"
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
		objs, err := framework.ReadObjects(filepath.Join(dir, f))
		Expect(err).NotTo(HaveOccurred())
		setup = append(setup, objs...)
	}
	cms, err := framework.ReadObjects(filepath.Join(dir, "config.yaml"))
	Expect(err).NotTo(HaveOccurred())
	config, ok, err := unstructured.NestedString(cms[0].Object, "data", schedulerConfigKey)
	Expect(err).NotTo(HaveOccurred())
	Expect(ok).To(BeTrue())
	return setup, config
}

// startAsServiceAccount runs bin/scheduler with the ConfigMap's config, leader
// election on, and a client that impersonates the ServiceAccount.
func startAsServiceAccount(config, name string) (*framework.SchedulerProcess, string) {
	kubeconfig, err := env.KubeconfigAs(serviceAccount, name+".kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	raw := filepath.Join(env.Dir, name+"-raw.yaml")
	Expect(os.WriteFile(raw, []byte(config), 0o600)).To(Succeed())
	cfg, err := framework.PrepareConfig(env.Dir, name+".yaml", kubeconfig, true, raw)
	Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(env.Dir, name+".log")
	p, err := framework.StartSchedulerProcess(schedulerBin, cfg, logPath, "--v=2")
	Expect(err).NotTo(HaveOccurred())
	return p, logPath
}

var _ = Describe("the second-scheduler RBAC", Ordered, func() {
	var setup []*unstructured.Unstructured
	var config string

	BeforeAll(func(ctx SpecContext) {
		setup, config = secondSchedulerObjects()
		Expect(env.Apply(ctx, setup, false)).To(Succeed())
		_, err := framework.CreateNode(ctx, env.Client, framework.NodeSpec{Name: "rbac-node", CPU: "8", Memory: "16Gi"})
		Expect(err).NotTo(HaveOccurred())
		// Other specs share this control plane: leave no node behind.
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "rbac-node", metav1.DeleteOptions{})).To(Succeed())
		})
	})

	It("is enough to schedule with every Berth plugin, as the ServiceAccount, with leader election on", func(ctx SpecContext) {
		p, logPath := startAsServiceAccount(config, "rbac-ok")
		defer p.Stop()
		for i := range 3 {
			name := fmt.Sprintf("rbac-ok-%d", i)
			_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: "default", Name: name, SchedulerName: "berth-scheduler", CPU: "100m"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(framework.NodeNameOf(ctx, env.Client, "default", name)).Should(Equal("rbac-node"), "scheduler log: %s", logPath)
		}
		lease, err := env.Client.CoordinationV1().Leases(berthNamespace).Get(ctx, "berth-scheduler", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		log, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		// Nothing the scheduler did was denied: LoadAware's NodeMetrics list
		// included (without its rule it would be forbidden, not "not found").
		Expect(forbidden.Match(log)).To(BeFalse(), "scheduler log %s has a denied request", logPath)
	})

	It("is needed: without Berth's leader-election Role the scheduler cannot lead and schedules nothing", func(ctx SpecContext) {
		Expect(env.Client.RbacV1().Roles(berthNamespace).Delete(ctx, "berth-scheduler:leader-election", metav1.DeleteOptions{})).To(Succeed())
		p, logPath := startAsServiceAccount(config, "rbac-missing")
		defer p.Stop()
		_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: "default", Name: "rbac-denied", SchedulerName: "berth-scheduler", CPU: "100m"})
		Expect(err).NotTo(HaveOccurred())
		leaseDenied := regexp.MustCompile(`leases.coordination.k8s.io \\?"berth-scheduler\\?" is forbidden`)
		Eventually(func() (bool, error) {
			b, err := os.ReadFile(logPath)
			return leaseDenied.Match(b), err
		}).Should(BeTrue(), "scheduler log %s does not show the lease denied", logPath)
		Consistently(framework.NodeNameOf(ctx, env.Client, "default", "rbac-denied"), "5s").Should(BeEmpty())
	})
})
