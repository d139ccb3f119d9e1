package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// Profile berth-celpolicy comes from manifests/examples/celpolicy.yaml.
const celProfile = "berth-celpolicy"

var _ = Describe("CELPolicy", Serial, func() {
	It("keeps pods that request no GPU off GPU nodes and lets GPU pods on", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-gpu")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "cel-gpu-1", CPU: "32", Memory: "64Gi", Labels: map[string]string{"nvidia.com/gpu.present": "true"}, Extended: map[string]string{"nvidia.com/gpu": "1"}},
			sandbox.NodeSpec{Name: "cel-cpu-1", CPU: "4", Memory: "8Gi"},
		)
		// The GPU node is far roomier: without the rule it would win.
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "web", SchedulerName: celProfile, CPU: "1", Memory: "1Gi"})
		Expect(err).NotTo(HaveOccurred())
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "trainer", SchedulerName: celProfile, CPU: "1", Extended: map[string]string{"nvidia.com/gpu": "1"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "web")).Should(Equal("cel-cpu-1"))
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "trainer")).Should(Equal("cel-gpu-1"))

		// Nothing but the GPU node has room: the rule's message explains the Pending pod.
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "big", SchedulerName: celProfile, CPU: "8"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "big", "FailedScheduling")).
			Should(ContainElement(HaveField("Message", ContainSubstring("1 GPU nodes are reserved for pods that request GPUs"))))
		Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, "big"), "2s").Should(BeEmpty())
	})

	It("steers batch pods to spot nodes when both fit", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-spot")
		// The on-demand node is roomier, so spreading alone would pick it.
		createNodes(ctx,
			sandbox.NodeSpec{Name: "cel-ondemand", CPU: "16", Memory: "32Gi", Labels: map[string]string{"lifecycle": "on-demand"}},
			sandbox.NodeSpec{Name: "cel-spot", CPU: "4", Memory: "8Gi", Labels: map[string]string{"lifecycle": "spot"}},
		)
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch", SchedulerName: celProfile, CPU: "1", Memory: "1Gi", Labels: map[string]string{"tier": "batch"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "service", SchedulerName: celProfile, CPU: "1", Memory: "1Gi"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "batch")).Should(Equal("cel-spot"))
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "service")).Should(Equal("cel-ondemand"))
	})

	It("places a pod that matches no rule exactly as the default profile does", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-nomatch")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "cel-nm-a", CPU: "4", Memory: "16Gi"},
			sandbox.NodeSpec{Name: "cel-nm-b", CPU: "8", Memory: "4Gi"},
			sandbox.NodeSpec{Name: "cel-nm-c", CPU: "2", Memory: "2Gi"},
		)
		place := func(name, profile string) string {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: profile, CPU: "1500m", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).ShouldNot(BeEmpty())
			node, err := sandbox.NodeNameOf(ctx, env.Client, ns, name)()
			Expect(err).NotTo(HaveOccurred())
			Expect(env.Client.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0))).To(Succeed())
			return node
		}
		byDefault := place("by-default", "default-scheduler")
		Expect(place("by-celpolicy", celProfile)).To(Equal(byDefault))
	})

	It("schedules a pending pod as soon as the node it needs is relabelled", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-hint")
		createNodes(ctx, sandbox.NodeSpec{Name: "cel-hint-1", CPU: "4", Memory: "8Gi", Labels: map[string]string{"nvidia.com/gpu.present": "true"}})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "waiting", SchedulerName: celProfile, CPU: "1"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "waiting", "FailedScheduling")).Should(Not(BeEmpty()))

		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"nvidia.com/gpu.present": nil}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.CoreV1().Nodes().Patch(ctx, "cel-hint-1", types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Well inside the backoff ceiling (10s) and far from the periodic flush
		// of unschedulable pods (5 min): only the queueing hint can do this.
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "waiting"), "10s").Should(Equal("cel-hint-1"))
	})

	It("refuses to start with a rule that does not compile, naming profile, rule, field and position", func(ctx SpecContext) {
		cfg, err := sandbox.PrepareConfig(env.Dir, "bad-rule.yaml", env.Kubeconfig, false, filepath.Join("testdata", "bad-celpolicy-rule.yaml"))
		Expect(err).NotTo(HaveOccurred())
		err = framework.SetupScheduler(ctx, cfg)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(SatisfyAll(
			ContainSubstring("berth-bad-rule"),
			ContainSubstring(`"CELPolicy"`),
			ContainSubstring(`rules[1] ("typo").filter`),
			ContainSubstring("undefined field 'lables'"),
			ContainSubstring("line 1, column 14"),
		))
	})
	It("answers a label-only rule from its label index: the one matching node among many, and a node relabelled to match at once", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-index")
		// Roomier nodes without the label: by resources alone they would win.
		var specs []sandbox.NodeSpec
		for i := range 6 {
			specs = append(specs, sandbox.NodeSpec{Name: fmt.Sprintf("cel-index-web-%d", i), CPU: "16", Memory: "32Gi", Labels: map[string]string{"pool": "web"}})
		}
		createNodes(ctx, specs...)
		narrowed := func() (float64, error) {
			return framework.Counter("berth_celpolicy_label_index_cycles_total", map[string]string{"result": "narrowed"})
		}
		before, err := narrowed()
		Expect(err).NotTo(HaveOccurred())

		// No node has the label: PreFilter rejects the pod with the rule's message.
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch-1", SchedulerName: "celpolicy-batch-pool", CPU: "1",
			Labels: map[string]string{"tier": "batch"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "batch-1", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("batch pods run on the batch pool"))))

		// One node relabelled: the next cycle's snapshot has the new object and
		// the index re-reads it; the pod lands there well inside the backoff.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"pool": "batch"}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.CoreV1().Nodes().Patch(ctx, "cel-index-web-3", types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "batch-1"), "10s").Should(Equal("cel-index-web-3"))

		// Further batch pods go to that node too, and the index answered.
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch-2", SchedulerName: "celpolicy-batch-pool", CPU: "1",
			Labels: map[string]string{"tier": "batch"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "batch-2")).Should(Equal("cel-index-web-3"))
		Eventually(narrowed).Should(BeNumerically(">=", before+2))
	})

	It("schedules a rejected pod as soon as the pod itself is relabelled so that no rule holds it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cel-relabel")
		createNodes(ctx, sandbox.NodeSpec{Name: "cel-relabel-1", CPU: "4", Memory: "8Gi", Labels: map[string]string{"pool": "web"}})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch", SchedulerName: "celpolicy-batch-pool", CPU: "1",
			Labels: map[string]string{"tier": "batch"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "batch", "FailedScheduling")).Should(ContainElement(
			HaveField("Message", ContainSubstring("batch pods run on the batch pool"))))

		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "web"}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.CoreV1().Pods(ns).Patch(ctx, "batch", types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Only the pod's own update can requeue it here (no node changes).
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "batch"), "10s").Should(Equal("cel-relabel-1"))
	})
})
