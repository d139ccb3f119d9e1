package deploy

import (
	"errors"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// burstRates are the chart's clientConnection settings the burst is
// measured at: upstream's default, the chart's candidates, and one the
// API client never waits at (the scheduler's own speed on this machine).
var burstRates = []struct{ qps, burst int }{{50, 100}, {100, 200}, {200, 400}, {500, 1000}, {5000, 10000}}

// A measurement, not a test of speed: make measure-burst runs it (the
// label keeps it out of make test), and it prints what it measured. The
// chart's default profile (every plugin, ConfirmBinder confirm: Always) as
// the chart runs it, against the deploy suite's API server, schedules 1,000
// pending pods onto 100 nodes at each rate; the time counts from the first
// binding to the last, so that start-up and leader election are left out.
var _ = Describe("a 1,000-pod burst through the chart's default profile", Label("measure"), Serial, func() {
	It("is scheduled at each clientConnection rate, and the rate is printed", func(ctx SpecContext) {
		const nodes, pods = 100, 1000
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = 1000, 2000 // the pods are created before the scheduler starts
		c, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		for i := range nodes {
			name := fmt.Sprintf("burst-node-%03d", i)
			_, err := sandbox.CreateNode(ctx, c, sandbox.NodeSpec{Name: name, CPU: "64", Memory: "256Gi"})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				Expect(c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			})
		}
		// The CRDs ElasticQuota and Coscheduling read, once (applyRendered
		// would delete them when the spec ends, once per rate).
		var crds []*unstructured.Unstructured
		for _, o := range renderChart("burst-crds", "default", "") {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			}
		}
		Expect(crds).To(HaveLen(2))
		Expect(env.Apply(ctx, crds, false)).To(Succeed())
		var report []string
		for _, r := range burstRates {
			release := fmt.Sprintf("berth-burst-%d", r.qps) // holds "berth": the chart names its objects after it
			objs := renderChart(release, release, "", "--set",
				fmt.Sprintf("clientConnection.qps=%d,clientConnection.burst=%d,schedulerName=%s", r.qps, r.burst, release))
			Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace(release)}, false)).To(Succeed())
			applyRendered(ctx, objs, rbacKinds...)
			errs := make([]error, pods)
			workqueue.ParallelizeUntil(ctx, 20, pods, func(i int) {
				_, errs[i] = sandbox.CreatePod(ctx, c, sandbox.PodSpec{Namespace: release, Name: fmt.Sprintf("p-%04d", i), SchedulerName: release, CPU: "10m", Memory: "16Mi"})
			})
			Expect(errors.Join(errs...)).To(Succeed())

			p, logPath := startRendered(objs, "system:serviceaccount:"+release+":"+release, release)
			var first, last time.Time
			Eventually(func(g Gomega) {
				bound, err := c.CoreV1().Pods(release).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
				g.Expect(err).NotTo(HaveOccurred())
				if p.Exited() {
					StopTrying("the scheduler exited").Now()
				}
				n := len(bound.Items)
				if n > 0 && first.IsZero() {
					first = time.Now()
				}
				g.Expect(n).To(Equal(pods))
				last = time.Now()
			}, "15m", "200ms").Should(Succeed(), "scheduler log: %s", logPath)
			p.Stop()
			span := last.Sub(first).Seconds()
			line := fmt.Sprintf("qps %5d burst %5d: %d pods bound in %.1f s from the first binding (%.0f pods/s)", r.qps, r.burst, pods, span, float64(pods-1)/span)
			report = append(report, line)
			GinkgoWriter.Println(line)
			Expect(c.CoreV1().Namespaces().Delete(ctx, release, metav1.DeleteOptions{})).To(Succeed())
		}
		AddReportEntry("burst", report, ReportEntryVisibilityAlways)
	})
})
