package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

var _ = Describe("Coscheduling across a scheduler restart", func() {
	It("never half binds a gang held at Permit when the scheduler is killed: the next scheduler completes it as a whole", func(ctx SpecContext) {
		cfg, err := sandbox.PrepareConfig(env.Dir, "coscheduling.yaml", env.Kubeconfig, false, filepath.Join(root, "manifests", "examples", "coscheduling.yaml"))
		Expect(err).NotTo(HaveOccurred())
		const ns, node, profile = "default", "cs-restart", "scheduler-plugins-scheduler"
		_, err = sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: node, CPU: "3", Memory: "8Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})).To(Succeed())
		})
		_, err = env.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "cs-restart-high"}, Value: 1000,
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.SchedulingV1().PriorityClasses().Delete(ctx, "cs-restart-high", metav1.DeleteOptions{})).To(Succeed())
		})
		// A low-priority pod takes one of the node's three CPUs.
		victim := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: "cs-restart-victim", CPU: "1"})
		victim.Spec.NodeName = node
		_, err = env.Client.CoreV1().Pods(ns).Create(ctx, victim, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = env.Client.CoreV1().Pods(ns).Delete(ctx, "cs-restart-victim", *metav1.NewDeleteOptions(0))
		})

		// A gang of three: two fit and wait at Permit; the last one needs
		// the victim's CPU, so it preempts (the victim is deleted
		// gracefully and, with no kubelet, stays Terminating): the gang is
		// held half placed for as long as that takes.
		pgc, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		_, err = pgc.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cs-restart"},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: ptr.To[int32](600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(pgc.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "cs-restart", metav1.DeleteOptions{})).To(Succeed())
		})
		var members []string
		for i := range 3 {
			name := fmt.Sprintf("cs-restart-%d", i)
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: profile, CPU: "1",
				PriorityClassName: "cs-restart-high", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "cs-restart"}})
			Expect(err).NotTo(HaveOccurred())
			members = append(members, name)
			DeferCleanup(func(ctx SpecContext) {
				Expect(env.Client.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0))).To(Succeed())
			})
		}
		bound := func() (int, error) {
			n := 0
			for _, m := range members {
				node, err := sandbox.NodeNameOf(ctx, env.Client, ns, m)()
				if err != nil {
					return 0, err
				}
				if node != "" {
					n++
				}
			}
			return n, nil
		}
		terminating := func() (bool, error) {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "cs-restart-victim", metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil, err
		}

		first := filepath.Join(env.Dir, "cs-restart-1.log")
		p1, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, first, "--v=4")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p1.Stop)
		Eventually(terminating, "30s").Should(BeTrue(), "the last member preempted the victim; log %s", first)
		Eventually(func() (bool, error) { return logContains(first, "Pod waiting on permit") }, "10s").Should(BeTrue())
		Consistently(bound, "2s").Should(BeZero(), "two members are held, none bound")

		By("the scheduler is killed while the gang is half held; another starts")
		p1.Kill()
		second := filepath.Join(env.Dir, "cs-restart-2.log")
		p2, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, second, "--v=4")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p2.Stop)
		// The held members' assumptions died with the first scheduler; the
		// API still names the node as their nominated node (1.37 nominates
		// pods waiting at Permit), so the new scheduler counts all three there
		// and holds none until the victim's CPU is free.
		Eventually(func() (bool, error) { return logContains(second, `pod="default/cs-restart-0"`) }, "30s").Should(BeTrue(), "the new scheduler tried the gang; log %s", second)
		Consistently(bound, "3s").Should(BeZero(), "nothing is bound while the victim's CPU is not free")

		By("the victim's kubelet finishes it: the whole gang is bound")
		Expect(env.Client.CoreV1().Pods(ns).Delete(ctx, "cs-restart-victim", *metav1.NewDeleteOptions(0))).To(Succeed())
		Eventually(bound, 30*time.Second).Should(Equal(3), "log %s", second)
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: schedv1alpha1.PodGroupLabel + "=cs-restart"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(v1.PodPending), "no kubelet: bound, not running")
		}
	})
})

func logContains(path, s string) (bool, error) {
	b, err := os.ReadFile(path)
	return strings.Contains(string(b), s), err
}
