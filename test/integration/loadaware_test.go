package integration

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
				framework.NodeSpec{Name: "la-hot", CPU: "16", Memory: "32Gi"},
				framework.NodeSpec{Name: "la-cool", CPU: "4", Memory: "8Gi"},
			)
			annotateNode(ctx, "la-hot", usageAnnotation("15", "4Gi")) // 94% CPU used, nothing requested
			annotateNode(ctx, "la-cool", usageAnnotation("500m", "1Gi"))
			for i := range 3 {
				name := fmt.Sprintf("web-%d", i)
				_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: ns, Name: name, SchedulerName: "berth-loadaware-annotations", CPU: "200m", Memory: "256Mi"})
				Expect(err).NotTo(HaveOccurred())
				Eventually(framework.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal("la-cool"))
			}
		})

		It("spreads a burst over idle nodes by counting the pods placed since the sample", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-burst")
			nodes := []string{"la-burst-1", "la-burst-2", "la-burst-3"}
			for _, n := range nodes {
				createNodes(ctx, framework.NodeSpec{Name: n, CPU: "4", Memory: "16Gi"})
				// 1000m used: 80% of 4000m leaves 2200m, eleven 200m pods.
				annotateNode(ctx, n, usageAnnotation("1", "1Gi"))
			}
			for i := range 30 {
				_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: ns, Name: fmt.Sprintf("burst-%02d", i), SchedulerName: "loadaware-packing", CPU: "200m", Memory: "64Mi"})
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
			createNodes(ctx, framework.NodeSpec{Name: "la-cooling", CPU: "4", Memory: "8Gi"})
			annotateNode(ctx, "la-cooling", usageAnnotation("3900m", "1Gi"))
			_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: ns, Name: "waiting", SchedulerName: "berth-loadaware-annotations", CPU: "500m"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(framework.EventsFor(ctx, env.Client, ns, "waiting", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))))

			annotateNode(ctx, "la-cooling", usageAnnotation("500m", "1Gi"))
			// Inside the 10s backoff ceiling, far from the 5 min flush: the hint did it.
			Eventually(framework.NodeNameOf(ctx, env.Client, ns, "waiting"), "10s").Should(Equal("la-cooling"))
		})
	})

	Context("with the MetricsAPI source", func() {
		It("avoids a node metrics-server reports as hot, and keeps scheduling when the metrics API goes away", func(ctx SpecContext) {
			ns := newNamespace(ctx, "la-metrics")
			createNodes(ctx,
				framework.NodeSpec{Name: "la-m-hot", CPU: "16", Memory: "32Gi"},
				framework.NodeSpec{Name: "la-m-cool", CPU: "4", Memory: "8Gi"},
			)
			metricsServer.SetNodeUsage("la-m-hot", "15", "2Gi")
			metricsServer.SetNodeUsage("la-m-cool", "200m", "1Gi")
			// Wait for a refresh after the usage was set (every 5s in this
			// profile) to be installed: the server counts a list when it
			// serves it, before the plugin stores the snapshot, so wait for
			// the next list (the plugin lists again only after storing).
			listed := metricsServer.Lists()
			Eventually(metricsServer.Lists, "20s").Should(BeNumerically(">", listed+1))

			for i := range 3 {
				name := fmt.Sprintf("api-%d", i)
				_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: ns, Name: name, SchedulerName: "loadaware-metrics-fast", CPU: "200m", Memory: "128Mi"})
				Expect(err).NotTo(HaveOccurred())
				Eventually(framework.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal("la-m-cool"))
			}

			// A pod that only the hot node has room for waits...
			_, err := framework.CreatePod(ctx, env.Client, framework.PodSpec{Namespace: ns, Name: "big", SchedulerName: "loadaware-metrics-fast", CPU: "8", Memory: "1Gi"})
			Expect(err).NotTo(HaveOccurred())
			Eventually(framework.EventsFor(ctx, env.Client, ns, "big", "FailedScheduling")).
				Should(ContainElement(HaveField("Message", ContainSubstring("CPU usage over the LoadAware threshold"))))

			// ...until metrics-server goes away: once the last snapshot is older
			// than metricsExpiration (20s), LoadAware fails open
			// (onMissingMetrics: Allow) and re-activates the pods it rejected.
			metricsServer.Close()
			Eventually(framework.NodeNameOf(ctx, env.Client, ns, "big"), "45s").Should(Equal("la-m-hot"))
		})
	})
})
