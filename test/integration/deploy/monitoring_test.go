package deploy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The monitoring bundle: ServiceMonitor, PrometheusRule and the Grafana
// dashboard the chart renders are accepted by the API server with
// prometheus-operator's CRDs; Prometheus' ServiceAccount, bound by the chart's
// RBAC, may scrape a Berth scheduler's secure /metrics (and nobody else
// may); every metric name the alerts and the panels read is on that live
// /metrics of a scheduler running every Berth plugin.
var _ = Describe("the chart's monitoring bundle", Ordered, func() {
	const (
		ns         = "berth-mon"
		promNS     = "monitoring"
		promSA     = "prometheus-k8s"
		release    = "berth-mon"
		profile    = "berth-mon"
		monitoring = "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,dashboards.enabled=true,schedulerName=" + profile
	)
	var objs []*unstructured.Unstructured
	var rendered string

	BeforeAll(func(ctx SpecContext) {
		dir := os.Getenv("BERTH_MONITORING_CRDS")
		Expect(dir).NotTo(BeEmpty(), "BERTH_MONITORING_CRDS is not set: run `make test-integration`")
		for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
			crds, err := sandbox.ReadObjects(filepath.Join(dir, f))
			Expect(err).NotTo(HaveOccurred())
			Expect(env.Apply(ctx, crds, false)).To(Succeed())
		}
		for _, n := range []string{ns, promNS} {
			Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace(n)}, false)).To(Succeed())
		}
		out, err := helm("template", release, filepath.Join(root, "charts", "berth"), "--namespace", ns, "--set", monitoring)
		Expect(err).NotTo(HaveOccurred())
		rendered = filepath.Join(env.Dir, "monitoring-rendered.yaml")
		Expect(os.WriteFile(rendered, []byte(out), 0o600)).To(Succeed())
		objs, err = sandbox.DecodeObjects([]byte(out))
		Expect(err).NotTo(HaveOccurred())
	})

	It("renders a ServiceMonitor, a PrometheusRule and a dashboard the API server accepts", func(ctx SpecContext) {
		kinds := map[string]bool{}
		for _, o := range objs {
			kinds[o.GetKind()] = true
		}
		Expect(kinds).To(HaveKey("ServiceMonitor"))
		Expect(kinds).To(HaveKey("PrometheusRule"))
		// The CRDs' schemas are served once established: retry the dry-run.
		Eventually(func() error { return env.Apply(ctx, objs, true) }, "20s").Should(Succeed())
	})

	It("lets Prometheus' ServiceAccount scrape /metrics, and only it; every name the alerts and panels read is on that live /metrics", func(ctx SpecContext) {
		applyRendered(ctx, objs, rbacKinds...)
		for _, name := range []string{promSA, "someone-else"} {
			_, err := env.Client.CoreV1().ServiceAccounts(promNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		token := func(name string) string {
			tr, err := env.Client.CoreV1().ServiceAccounts(promNS).CreateToken(ctx, name,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}

		// The scheduler as the chart runs it: its config, its ServiceAccount,
		// leader election on, serving its secure port with delegated
		// authentication and authorization through the API server.
		_, err := sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "mon-node", CPU: "64", Memory: "128Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "mon-node", metav1.DeleteOptions{})).To(Succeed())
		})
		sa := "system:serviceaccount:" + ns + ":" + release
		kubeconfig, err := env.KubeconfigAs(sa, "berth-mon-authn.kubeconfig")
		Expect(err).NotTo(HaveOccurred())
		port := freePort()
		p, logPath := startRendered(objs, sa, "berth-mon",
			"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--cert-dir="+filepath.Join(env.Dir, "berth-mon-certs"),
			"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
		defer p.Stop()

		url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
		scrape := func(bearer string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, "", err
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the scheduler's self-signed serving certificate, as the ServiceMonitor's tlsConfig
			resp, err := c.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), err
		}
		promToken := token(promSA)
		Eventually(func() (int, error) { code, _, err := scrape(promToken); return code, err }, "60s").Should(Equal(http.StatusOK), "scheduler log: %s", logPath)
		code, _, err := scrape(token("someone-else"))
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount the chart did not bind")
		code, _, err = scrape("")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "anonymous")

		// Drive the paths the panels read: pods through every plugin until
		// the sampled per-plugin durations are on /metrics too.
		i := 0
		Eventually(func(g Gomega) {
			name := fmt.Sprintf("mon-%d", i)
			i++
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: name, SchedulerName: profile, CPU: "10m",
				Annotations: map[string]string{"explain.berth.dev/request": "true"}})
			g.Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = env.Client.CoreV1().Pods("default").Delete(ctx, name, *metav1.NewDeleteOptions(0))
			})
			_, text, err := scrape(promToken)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(text).To(ContainSubstring("scheduler_plugin_execution_duration_seconds_bucket"))
			g.Expect(text).To(ContainSubstring(`scheduler_schedule_attempts_total{profile="` + profile + `",result="scheduled"}`))
		}, "90s", "500ms").Should(Succeed(), "scheduler log: %s", logPath)

		_, text, err := scrape(promToken)
		Expect(err).NotTo(HaveOccurred())
		names := metricNames(text)
		namesFile := filepath.Join(env.Dir, "live-metric-names.txt")
		Expect(os.WriteFile(namesFile, []byte(strings.Join(names, "\n")+"\n"), 0o600)).To(Succeed())
		out, err := exec.Command(os.Getenv("PROMCHECK"), "-rendered", rendered, "-names", namesFile,
			"-external", "up,kube_node_status_allocatable,kube_pod_container_resource_requests").CombinedOutput()
		GinkgoWriter.Printf("%s", out)
		Expect(err).NotTo(HaveOccurred(), "promcheck:\n%s", out)
	})
})

// metricNames parses a /metrics page with Prometheus' parser and returns the
// names a query can select: each family's, and a histogram's or summary's
// _bucket, _sum and _count series.
func metricNames(text string) []string {
	GinkgoHelper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for name, f := range families {
		names = append(names, name)
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = append(names, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, name+"_sum", name+"_count")
		}
	}
	sort.Strings(names)
	return names
}

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
