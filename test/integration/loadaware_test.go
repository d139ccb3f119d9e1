package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// usageAnnotation is the NodeAnnotations source's value for cpu/memory usage measured now.
func usageAnnotation(cpu, memory string) map[string]string {
	v, err := json.Marshal(map[string]string{"cpu": cpu, "memory": memory, "timestamp": time.Now().UTC().Format(time.RFC3339)})
	Expect(err).NotTo(HaveOccurred())
	return map[string]string{"berth.io/node-usage": string(v)}
}

func annotateNode(ctx SpecContext, name string, annotations map[string]string) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	Expect(err).NotTo(HaveOccurred())
	_, err = env.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("LoadAware", Serial, func() {
	Context("with the NodeAnnotations source", func() {
		It("keeps pods off a node annotated as hot although its requests are low", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-hot")
			createNodes(ctx,
				sandbox.NodeSpec{Name: "la-hot", CPU: "16", Memory: "32Gi"},
				sandbox.NodeSpec{Name: "la-cool", CPU: "4", Memory: "8Gi"},
			)
			annotateNode(ctx, "la-hot", usageAnnotation("15", "4Gi")) // 94% CPU used, nothing requested
			annotateNode(ctx, "la-cool", usageAnnotation("500m", "1Gi"))
			for i := range 3 {
				name := fmt.Sprintf("web-%d", i)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "berth-loadaware-annotations", CPU: "200m", Memory: "256Mi"})
				Expect(err).NotTo(HaveOccurred())
				Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal("la-cool"))
			}
		})

		It("spreads a burst over idle nodes by counting the pods placed since the sample", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-burst")
			nodes := []string{"la-burst-1", "la-burst-2", "la-burst-3"}
			for _, n := range nodes {
				createNodes(ctx, sandbox.NodeSpec{Name: n, CPU: "4", Memory: "16Gi"})
				// 1000m used: 80% of 4000m leaves 2200m, eleven 200m pods.
				annotateNode(ctx, n, usageAnnotation("1", "1Gi"))
			}
			for i := range 30 {
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("burst-%02d", i), SchedulerName: "loadaware-packing", CPU: "200m", Memory: "64Mi"})
				Expect(err).NotTo(HaveOccurred())
			}
			// The profile packs (MostAllocated): by requests alone 20 pods would fit on the first node.
			Eventually(func(g Gomega) map[string]int {
				pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				perNode := map[string]int{}
				for _, p := range pods.Items {
					g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s not scheduled yet", p.Name)
					perNode[p.Spec.NodeName]++
				}
				return perNode
			}).Should(And(HaveLen(3), HaveEach(BeNumerically("<=", 11))))
		})

		It("schedules a pending pod as soon as the node's usage annotation drops below the threshold", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-cools")
			createNodes(ctx, sandbox.NodeSpec{Name: "la-cooling", CPU: "4", Memory: "8Gi"})
			annotateNode(ctx, "la-cooling", usageAnnotation("3900m", "1Gi"))
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "waiting", SchedulerName: "berth-loadaware-annotations", CPU: "500m"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "waiting", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))))

			annotateNode(ctx, "la-cooling", usageAnnotation("500m", "1Gi"))
			// Inside the 10s backoff ceiling, far from the 5 min flush: the hint did it.
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "waiting"), "10s").Should(Equal("la-cooling"))
		})
	})

	Context("with the MetricsAPI source: the real metrics-server through kube-apiserver's aggregation layer", func() {
		// Issue 55: no root. metrics-server listens on loopback and the
		// aggregator (routing off, as kubeadm leaves it) reaches it through
		// an ExternalName Service naming localhost; an EndpointSlice refuses
		// a loopback address, and an address of its own needed a network
		// namespace. This spec is what shows it works with this
		// kube-apiserver: the APIService is Available and serves NodeMetrics.
		It("is reached through an ExternalName Service naming localhost, with no privilege", func(ctx SpecContext) {
			svc, err := env.Client.CoreV1().Services("kube-system").Get(ctx, "metrics-server", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(svc.Spec.Type).To(Equal(v1.ServiceTypeExternalName))
			Expect(svc.Spec.ExternalName).To(Equal("localhost"))
			dyn, err := dynamic.NewForConfig(env.Config)
			Expect(err).NotTo(HaveOccurred())
			apiService := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
			Eventually(func(g Gomega) {
				u, err := dyn.Resource(apiService).Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Available"), HaveKeyWithValue("status", "True"))))
			}, "30s", "500ms").Should(Succeed())
			createKWOKNodes(ctx, sandbox.NodeSpec{Name: "la-m-user", CPU: "4", Memory: "8Gi"})
			Expect(kwok.SetUsage(ctx, "la-m-user", "2", "1Gi")).To(Succeed())
			waitForMetrics(ctx, "la-m-user", 1.5)
			GinkgoWriter.Printf("metrics.k8s.io served through %s to a suite running as uid %d\n", metricsServer.Endpoint(), os.Geteuid())
		})

		It("avoids a node metrics-server reports as hot, fails open while metrics-server is down, and avoids the node again once it is back", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-metrics")
			createKWOKNodes(ctx,
				sandbox.NodeSpec{Name: "la-m-hot", CPU: "16", Memory: "32Gi"},
				sandbox.NodeSpec{Name: "la-m-cool", CPU: "4", Memory: "8Gi"},
			)
			// KWOK's kubelets report their pods' usage: a pod on each that
			// requests nothing and burns 15 CPU on the hot node, 200m on the
			// cool one. metrics-server scrapes them every 10s and serves a
			// node from its second scrape on.
			Expect(kwok.SetUsage(ctx, "la-m-hot", "15", "2Gi")).To(Succeed())
			Expect(kwok.SetUsage(ctx, "la-m-cool", "200m", "1Gi")).To(Succeed())
			waitForMetrics(ctx, "la-m-hot", 14)
			waitForMetrics(ctx, "la-m-cool", 0)

			for i := range 3 {
				name := fmt.Sprintf("api-%d", i)
				_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "loadaware-metrics-fast", CPU: "200m", Memory: "128Mi"})
				Expect(err).NotTo(HaveOccurred())
				Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal("la-m-cool"))
			}

			// A pod that only the hot node has room for waits...
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "big", SchedulerName: "loadaware-metrics-fast", CPU: "8", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "big", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))))

			// ...until metrics-server goes down: the aggregator answers 503,
			// and once the last snapshot is older than metricsExpiration
			// (20s), LoadAware fails open (onMissingMetrics: Allow) and
			// re-activates the pods it rejected.
			failures, err := framework.Counter("berth_loadaware_refresh_errors_total", nil)
			Expect(err).NotTo(HaveOccurred())
			metricsServer.Stop()
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "big"), "45s").Should(Equal("la-m-hot"))
			Expect(framework.Counter("berth_loadaware_refresh_errors_total", nil)).To(BeNumerically(">", failures))

			// metrics-server back: the hot node is avoided again.
			Expect(metricsServer.Start(ctx)).To(Succeed())
			waitForMetrics(ctx, "la-m-hot", 14)
			_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "after", SchedulerName: "loadaware-metrics-fast", CPU: "6", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(sandbox.EventsFor(ctx, env.Client, ns, "after", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))))
		})

		It("reports no usage for a pod that ended, though it stays on its node", func(ctx SpecContext) {
			createKWOKNodes(ctx, sandbox.NodeSpec{Name: "la-m-ended", CPU: "4", Memory: "8Gi"})
			Expect(kwok.SetUsage(ctx, "la-m-ended", "3", "1Gi")).To(Succeed())
			Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, "la-m-ended") }, "45s", "500ms").
				Should(BeNumerically(">", 2.5), metricsTrail(ctx, "la-m-ended"))
			// Its container exits (a crash, a refusal, a finished Job): KWOK
			// still lists the pod on the node, the kubelet reports nothing
			// for it, and the node's usage drops from the next window on.
			Expect(kwok.EndUsage(ctx, "la-m-ended")).To(Succeed())
			Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, "la-m-ended") }, "45s", "500ms").
				Should(BeNumerically("<", 0.1), metricsTrail(ctx, "la-m-ended"))
			pods, err := env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=la-m-ended"})
			Expect(err).NotTo(HaveOccurred())
			Expect(pods.Items).To(ConsistOf(HaveField("Status.Phase", v1.PodFailed)), "the ended pod is still on its node")
			// Set again, the usage is a new pod's.
			Expect(kwok.SetUsage(ctx, "la-m-ended", "2", "1Gi")).To(Succeed())
			Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, "la-m-ended") }, "45s", "500ms").
				Should(BeNumerically(">", 1.5), metricsTrail(ctx, "la-m-ended"))
		})
	})
})

// waitForMetrics waits until the API server serves node's NodeMetrics with
// more than minCPU cores, then until the scheduler's fastest MetricsAPI
// profile (loadaware-metrics-fast, every 5s) has listed them: the refresh
// gauge is shared by the suite's MetricsAPI profiles, so wait for one
// completed more than an interval after the metrics became visible, which
// leaves the fast profile a full interval to list them.
func waitForMetrics(ctx SpecContext, node string, minCPU float64) {
	Eventually(func() (float64, error) { return metricsServer.NodeCPU(ctx, node) }, "45s", "500ms").
		Should(BeNumerically(">", minCPU), metricsTrail(ctx, node))
	visible := float64(time.Now().UnixNano()) / 1e9
	Eventually(func() (float64, error) {
		return framework.Gauge("berth_loadaware_last_refresh_timestamp_seconds", nil)
	}, "20s", "200ms").Should(BeNumerically(">", visible+6))
}

// metricsTrail says, when a wait on node's metrics fails, what KWOK serves
// for the node now, which pods it runs, and how metrics-server's log ends:
// CI keeps a failing spec's message, not the sandbox's files.
func metricsTrail(ctx SpecContext, node string) func() string {
	return func() string {
		var on []string
		pods, err := env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			on = append(on, err.Error())
		} else {
			for _, p := range pods.Items {
				on = append(on, fmt.Sprintf("%s/%s %s (uid %s, created %s)", p.Namespace, p.Name, p.Status.Phase, p.UID, p.CreationTimestamp.Format(time.RFC3339)))
			}
		}
		return fmt.Sprintf("KWOK serves for %s: %s\npods on it: %s\nmetrics-server's log (%s) ends:\n%s",
			node, kwok.NodeSeries(ctx, node), strings.Join(on, ", "), metricsServer.LogPath(), metricsServer.LogTail())
	}
}
