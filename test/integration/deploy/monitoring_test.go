package deploy

import (
	"crypto/tls"
	"crypto/x509"
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
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The monitoring bundle: ServiceMonitor, PrometheusRule and the Grafana
// dashboard the chart renders are accepted by the API server with
// prometheus-operator's CRDs; the token the ServiceMonitor names (the
// chart's metrics ServiceAccount's, in a token Secret the real
// kube-controller-manager fills), bound by the chart's RBAC, may scrape a
// Berth scheduler's secure /metrics (and nobody else may); every metric name
// the alerts and the panels read is on that live /metrics of a scheduler
// running every Berth plugin; and on a scheduler with one plugin only, every
// dashboard variable and panel returns series (but the panels of plugins it
// does not run).
var _ = Describe("the chart's monitoring bundle", Ordered, func() {
	const (
		ns         = "berth-mon"
		otherNS    = "monitoring"
		release    = "berth-mon"
		profile    = "berth-mon"
		monitoring = "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,dashboards.enabled=true"
		external   = "up,kube_node_status_allocatable,kube_pod_container_resource_requests,kube_pod_status_phase"
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
		for _, n := range []string{ns, otherNS} {
			Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace(n)}, false)).To(Succeed())
		}
		rendered, objs = renderMonitoring(release, ns, "--set", monitoring+",schedulerName="+profile)
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

	It("lets the ServiceMonitor's token scrape /metrics, and no other; every name the alerts and panels read is on that live /metrics", func(ctx SpecContext) {
		applyRendered(ctx, objs, append(rbacKinds, "Secret")...)
		_, err := env.Client.CoreV1().ServiceAccounts(otherNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := env.Client.CoreV1().ServiceAccounts(otherNS).CreateToken(ctx, "someone-else",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		otherToken := tr.Status.Token
		promToken := serviceMonitorToken(ctx, objs)

		_, err = sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "mon-node", CPU: "64", Memory: "128Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "mon-node", metav1.DeleteOptions{})).To(Succeed())
		})
		scrape, logPath := startScraped(ctx, objs, ns, release)
		Eventually(func() (int, error) { code, _, err := scrape(promToken); return code, err }, "60s").Should(Equal(http.StatusOK), "scheduler log: %s", logPath)
		code, _, err := scrape(otherToken)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount the chart did not bind")
		code, _, err = scrape("")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "anonymous")

		// Drive the paths the panels read: pods through every plugin until
		// the sampled per-plugin durations are on /metrics too.
		driveUntil(ctx, scrape, promToken, profile, "mon", logPath)

		_, text, err := scrape(promToken)
		Expect(err).NotTo(HaveOccurred())
		// The build's versions, from the Makefile's ldflags.
		Expect(text).To(MatchRegexp(`(?m)^berth_build_info\{kubernetes="v1\.[0-9]+\.[0-9]+",version="v[0-9][^"]*"\} 1$`))
		Expect(text).NotTo(ContainSubstring(`version="v0.0.0-unset"`))
		namesFile := writeNames(text, "live-metric-names.txt")
		out, err := exec.Command(os.Getenv("PROMCHECK"), "-rendered", rendered, "-names", namesFile, "-external", external).CombinedOutput()
		GinkgoWriter.Printf("%s", out)
		Expect(err).NotTo(HaveOccurred(), "promcheck:\n%s", out)

		// Berth's own metrics pass component-base's promlint, as upstream's
		// do (names, units, counters ending in _total, help).
		problems, err := testutil.NewPromLinter(strings.NewReader(familiesWithPrefix(parsePage(text), "berth_"))).Lint()
		Expect(err).NotTo(HaveOccurred())
		Expect(problems).To(BeEmpty())
	})

	It("with a scrape class, lets Prometheus' own ServiceAccount token scrape /metrics, stores no token, and verifies the scheduler's serving certificate", func(ctx SpecContext) {
		const (
			rel        = "berth-mon-sc"
			prometheus = "prometheus"
			serverName = rel + "-metrics." + ns + ".svc"
		)
		values := filepath.Join(env.Dir, rel+"-values.yaml")
		Expect(os.WriteFile(values, []byte(`schedulerName: `+profile+`-sc
metrics:
  serviceMonitor:
    enabled: true
    scrapeClass: serviceaccount
    prometheusServiceAccount: {name: `+prometheus+`, namespace: `+otherNS+`}
    tlsConfig:
      insecureSkipVerify: null
      ca: {secret: {name: `+rel+`-serving-cert, key: ca.crt}}
      serverName: `+serverName+`
`), 0o600)).To(Succeed())
		_, scObjs := renderMonitoring(rel, ns, "--values", values)
		var sm *unstructured.Unstructured
		for _, o := range scObjs {
			Expect(o.GetKind()).NotTo(Equal("Secret"), "a token Secret %s", o.GetName())
			if o.GetKind() == "ServiceAccount" {
				Expect(o.GetName()).NotTo(Equal(rel+"-metrics"), "the chart's own scrape ServiceAccount")
			}
			if o.GetKind() == "ServiceMonitor" {
				sm = o
			}
		}
		Expect(sm).NotTo(BeNil())
		class, _, _ := unstructured.NestedString(sm.Object, "spec", "scrapeClass")
		Expect(class).To(Equal("serviceaccount"))
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(endpoints).To(HaveLen(1))
		ep := endpoints[0].(map[string]any)
		Expect(ep).NotTo(HaveKey("authorization"), "the scrape class' authorization applies only where the ServiceMonitor sets none")
		Expect(ep).To(HaveKeyWithValue("tlsConfig", And(HaveKeyWithValue("serverName", serverName), HaveKey("ca"), Not(HaveKey("insecureSkipVerify")))))
		Eventually(func() error { return env.Apply(ctx, scObjs, true) }, "20s").Should(Succeed())

		// The scrape as the scrape class makes it: Prometheus' ServiceAccount
		// token (the kubelet projects one made by the TokenRequest API), over
		// TLS verified against the serving certificate's issuer.
		applyRendered(ctx, scObjs, rbacKinds...)
		_, err := env.Client.CoreV1().ServiceAccounts(otherNS).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: prometheus}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := env.Client.CoreV1().ServiceAccounts(otherNS).CreateToken(ctx, prometheus,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(serverName, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		certFile, keyFile := filepath.Join(env.Dir, rel+"-tls.crt"), filepath.Join(env.Dir, rel+"-tls.key")
		Expect(certutil.WriteCert(certFile, certPEM)).To(Succeed())
		Expect(keyutil.WriteKey(keyFile, keyPEM)).To(Succeed())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(certPEM)).To(BeTrue())
		scrape, logPath := startScrapedTLS(ctx, scObjs, ns, rel, &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
			"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile)
		Eventually(func() (int, error) { code, _, err := scrape(tr.Status.Token); return code, err }, "60s").Should(Equal(http.StatusOK), "scheduler log: %s", logPath)
		code, _, err := scrape("")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "anonymous")
	})

	It("shows every dashboard variable and panel of a scheduler running one plugin (Explain) only, but the panels of the plugins it does not run", func(ctx SpecContext) {
		const (
			one        = "berth-one"
			oneProfile = "berth-one"
		)
		oneRendered, oneObjs := renderMonitoring(one, ns, "--set", monitoring+",schedulerName="+oneProfile,
			"--set-json", `profiles=[{"plugins":{"multiPoint":{"enabled":[{"name":"Explain"}]}}}]`)
		applyRendered(ctx, oneObjs, append(rbacKinds, "Secret")...)
		token := serviceMonitorToken(ctx, oneObjs)
		_, err := sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "mon-one-node", CPU: "64", Memory: "128Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "mon-one-node", metav1.DeleteOptions{})).To(Succeed())
		})
		scrape, logPath := startScraped(ctx, oneObjs, ns, one)
		Eventually(func() (int, error) { code, _, err := scrape(token); return code, err }, "60s").Should(Equal(http.StatusOK), "scheduler log: %s", logPath)
		driveUntil(ctx, scrape, token, oneProfile, "one", logPath)

		// Two scrapes, as Prometheus takes them, so that rate() has two
		// samples, with pods scheduled between them until the sampled
		// per-plugin durations also have a new observation (so that every
		// rate and latency quantile has something to show).
		var pages []string
		for i := range 2 {
			_, text, err := scrape(token)
			Expect(err).NotTo(HaveOccurred())
			page := filepath.Join(env.Dir, fmt.Sprintf("one-scrape-%d.txt", i))
			Expect(os.WriteFile(page, []byte(text), 0o600)).To(Succeed())
			pages = append(pages, page)
			if i == 0 {
				families := parsePage(text)
				scheduled := counted(families, "scheduler_schedule_attempts_total", map[string]string{"profile": oneProfile, "result": "scheduled"})
				sampled := counted(families, "scheduler_plugin_execution_duration_seconds", nil)
				n := 0
				Eventually(func(g Gomega) {
					name := fmt.Sprintf("one-more-%d", n)
					n++
					_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: name, SchedulerName: oneProfile, CPU: "10m"})
					g.Expect(err).NotTo(HaveOccurred())
					DeferCleanup(func(ctx SpecContext) {
						_ = env.Client.CoreV1().Pods("default").Delete(ctx, name, *metav1.NewDeleteOptions(0))
					})
					_, text, err := scrape(token)
					g.Expect(err).NotTo(HaveOccurred())
					families := parsePage(text)
					g.Expect(counted(families, "scheduler_schedule_attempts_total", map[string]string{"profile": oneProfile, "result": "scheduled"})).To(BeNumerically(">", scheduled))
					g.Expect(counted(families, "scheduler_plugin_execution_duration_seconds", nil)).To(BeNumerically(">", sampled))
				}, "90s", "500ms").Should(Succeed(), "scheduler log: %s", logPath)
			}
		}
		_, text, err := scrape(token)
		Expect(err).NotTo(HaveOccurred())
		namesFile := writeNames(text, "one-metric-names.txt")
		// The scrape target's labels as the ServiceMonitor gives them: job is
		// the Service's name, namespace the Service's.
		target := fmt.Sprintf("job=%s-metrics,namespace=%s,pod=%s-0,instance=127.0.0.1:10259", one, ns, one)
		out, err := exec.Command(os.Getenv("PROMCHECK"), "-rendered", oneRendered, "-names", namesFile, "-external", external,
			"-scrapes", strings.Join(pages, ","), "-target", target, "-plugins", "explain").CombinedOutput()
		GinkgoWriter.Printf("%s", out)
		Expect(err).NotTo(HaveOccurred(), "promcheck:\n%s", out)
		Expect(string(out)).To(ContainSubstring(`variable job = "` + one + `-metrics"`))
		Expect(string(out)).To(MatchRegexp(`panel "Explain[^"]*": [1-9][0-9]* series`), "the enabled plugin's panel has series")
	})
})

// renderMonitoring renders the chart as release in ns with args and returns
// the file it wrote and its objects.
func renderMonitoring(release, ns string, args ...string) (string, []*unstructured.Unstructured) {
	GinkgoHelper()
	out, err := helm(append([]string{"template", release, filepath.Join(root, "charts", "berth"), "--namespace", ns}, args...)...)
	Expect(err).NotTo(HaveOccurred())
	rendered := filepath.Join(env.Dir, release+"-monitoring-rendered.yaml")
	Expect(os.WriteFile(rendered, []byte(out), 0o600)).To(Succeed())
	objs, err := sandbox.DecodeObjects([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	return rendered, objs
}

// serviceMonitorToken reads the token the rendered ServiceMonitor scrapes
// with: its authorization names a Secret (applied) that the controller
// manager's token controller fills.
func serviceMonitorToken(ctx SpecContext, objs []*unstructured.Unstructured) string {
	GinkgoHelper()
	var sm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ServiceMonitor" {
			sm = o
		}
	}
	Expect(sm).NotTo(BeNil(), "no ServiceMonitor rendered")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	Expect(endpoints).To(HaveLen(1))
	ep := endpoints[0].(map[string]any)
	Expect(ep).NotTo(HaveKey("bearerTokenFile"), "deprecated in prometheus-operator")
	typ, _, _ := unstructured.NestedString(ep, "authorization", "type")
	Expect(typ).To(Equal("Bearer"))
	name, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
	var token string
	Eventually(func(g Gomega) {
		sec, err := env.Client.CoreV1().Secrets(sm.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sec.Data).To(HaveKey(key), "the token controller fills the Secret")
		token = string(sec.Data[key])
	}, "60s").Should(Succeed())
	return token
}

// startScraped runs the chart's scheduler of release as the chart runs it:
// its config, its ServiceAccount, leader election on, serving its secure
// port with delegated authentication and authorization through the API
// server. It returns a scrape of its /metrics with a bearer token and its
// log's path; the scheduler is stopped when the spec ends.
func startScraped(ctx SpecContext, objs []*unstructured.Unstructured, ns, release string) (func(bearer string) (int, string, error), string) {
	GinkgoHelper()
	return startScrapedTLS(ctx, objs, ns, release, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the scheduler's self-signed serving certificate, as the ServiceMonitor's default tlsConfig
}

// startScrapedTLS is startScraped with the scrape's TLS settings and more
// scheduler flags (a serving certificate's).
func startScrapedTLS(ctx SpecContext, objs []*unstructured.Unstructured, ns, release string, tlsConf *tls.Config, extra ...string) (func(bearer string) (int, string, error), string) {
	GinkgoHelper()
	sa := "system:serviceaccount:" + ns + ":" + release
	kubeconfig, err := env.KubeconfigAs(sa, release+"-authn.kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	port := freePort()
	p, logPath := startRendered(objs, sa, release, append([]string{
		"--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--cert-dir=" + filepath.Join(env.Dir, release+"-certs"),
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig}, extra...)...)
	DeferCleanup(p.Stop)
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	return func(bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}, logPath
}

// driveUntil creates pods (named prefix-N, asking Explain) for profile until
// one is scheduled and the sampled per-plugin durations are on /metrics.
func driveUntil(ctx SpecContext, scrape func(string) (int, string, error), token, profile, prefix, logPath string) {
	GinkgoHelper()
	i := 0
	Eventually(func(g Gomega) {
		name := fmt.Sprintf("%s-%d", prefix, i)
		i++
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: name, SchedulerName: profile, CPU: "10m",
			Annotations: map[string]string{"explain.berth.dev/request": "true"}})
		g.Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = env.Client.CoreV1().Pods("default").Delete(ctx, name, *metav1.NewDeleteOptions(0))
		})
		_, text, err := scrape(token)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(text).To(ContainSubstring("scheduler_plugin_execution_duration_seconds_bucket"))
		g.Expect(text).To(ContainSubstring(`scheduler_schedule_attempts_total{profile="` + profile + `",result="scheduled"}`))
	}, "90s", "500ms").Should(Succeed(), "scheduler log: %s", logPath)
}

// parsePage parses a /metrics page with Prometheus' text parser.
func parsePage(text string) map[string]*dto.MetricFamily {
	GinkgoHelper()
	textParser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := textParser.TextToMetricFamilies(strings.NewReader(text))
	Expect(err).NotTo(HaveOccurred())
	return families
}

// counted sums, over the series of family on a parsed /metrics page whose
// labels include match, a counter's value or a histogram's observation
// count (0 when there is none).
func counted(families map[string]*dto.MetricFamily, family string, match map[string]string) float64 {
	sum := 0.0
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matched := true
		for k, v := range match {
			matched = matched && labels[k] == v
		}
		if matched {
			sum += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// writeNames writes the metric names of a /metrics page to file (in the
// suite's directory) for promcheck -names and returns its path.
func writeNames(text, file string) string {
	GinkgoHelper()
	path := filepath.Join(env.Dir, file)
	Expect(os.WriteFile(path, []byte(strings.Join(metricNames(parsePage(text)), "\n")+"\n"), 0o600)).To(Succeed())
	return path
}

// metricNames returns the names a query can select on a parsed /metrics
// page: each family's, and a histogram's or summary's _bucket, _sum and
// _count series.
func metricNames(families map[string]*dto.MetricFamily) []string {
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

// familiesWithPrefix re-encodes the families of a parsed page whose name
// starts with prefix, in the text format.
func familiesWithPrefix(families map[string]*dto.MetricFamily, prefix string) string {
	GinkgoHelper()
	names := make([]string, 0, len(families))
	for name := range families {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	Expect(names).NotTo(BeEmpty(), "no %s metrics on the page", prefix)
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		_, err := expfmt.MetricFamilyToText(&b, families[name])
		Expect(err).NotTo(HaveOccurred())
	}
	return b.String()
}

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
