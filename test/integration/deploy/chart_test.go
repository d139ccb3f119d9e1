package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// helm runs the pinned helm (make test-integration builds it) and returns
// its stdout; stderr is in the error.
func helm(args ...string) (string, error) {
	bin := os.Getenv("HELM")
	Expect(bin).NotTo(BeEmpty(), "HELM is not set: run `make test-integration`, which builds helm")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %v: %w: %s", args, err, stderr.String())
	}
	return stdout.String(), nil
}

// chartValues are the install styles the chart is tested with (charts/berth/ci).
var chartValues = []string{"", "single-replica-values.yaml", "ha-values.yaml", "all-plugins-values.yaml"}

// renderChart renders the chart as release name in namespace ns with a
// values file of charts/berth/ci ("" for the defaults), CRDs included.
func renderChart(name, ns, values string, extra ...string) []*unstructured.Unstructured {
	GinkgoHelper()
	chart := filepath.Join(root, "charts", "berth")
	args := []string{"template", name, chart, "--namespace", ns, "--include-crds"}
	if values != "" {
		args = append(args, "--values", filepath.Join(chart, "ci", values))
	}
	out, err := helm(append(args, extra...)...)
	Expect(err).NotTo(HaveOccurred())
	objs, err := sandbox.DecodeObjects([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	return objs
}

// configOf writes the scheduler config of the rendered ConfigMap to a file.
func configOf(objs []*unstructured.Unstructured, path string) string {
	GinkgoHelper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			cfg, ok, err := unstructured.NestedString(o.Object, "data", schedulerConfigKey)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			Expect(os.WriteFile(path, []byte(cfg), 0o600)).To(Succeed())
			return cfg
		}
	}
	Fail("the chart rendered no ConfigMap")
	return ""
}

var _ = Describe("the Helm chart (charts/berth)", func() {
	It("passes helm lint --strict with the defaults and each install style", func() {
		for _, values := range chartValues {
			args := []string{"lint", "--strict", filepath.Join(root, "charts", "berth")}
			if values != "" {
				args = append(args, "--values", filepath.Join(root, "charts", "berth", "ci", values))
			}
			out, err := helm(args...)
			Expect(err).NotTo(HaveOccurred(), "values %q: %s", values, out)
		}
	})

	It("renders objects the API server accepts and a config the scheduler loads, for each install style", func(ctx SpecContext) {
		for i, values := range chartValues {
			ns := fmt.Sprintf("berth-chart-%d", i)
			objs := renderChart("berth-chart", ns, values)
			Expect(configOf(objs, filepath.Join(env.Dir, ns+".yaml"))).NotTo(BeEmpty())
			Expect(loadSchedulerConfig(filepath.Join(env.Dir, ns+".yaml"))).To(Succeed(), "values %q", values)
			Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace(ns)}, false)).To(Succeed())
			dryRun(ctx, objs)
		}
	})

	It("labels every object as Helm users expect (helm.sh/chart, app.kubernetes.io/managed-by), and the kustomize base without them", func() {
		chartYAML, err := os.ReadFile(filepath.Join(root, "charts", "berth", "Chart.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var chart struct{ Name, Version string }
		Expect(yaml.Unmarshal(chartYAML, &chart)).To(Succeed())
		for _, values := range []string{"", "ha-values.yaml", "all-plugins-values.yaml"} {
			for _, o := range renderChart("berth-labels", "berth-labels", values, "--set", "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,dashboards.enabled=true") {
				if o.GetKind() == "CustomResourceDefinition" {
					continue // crds/ are not templated
				}
				Expect(o.GetLabels()).To(HaveKeyWithValue("helm.sh/chart", chart.Name+"-"+strings.ReplaceAll(chart.Version, "+", "_")), "%s %s (%s)", o.GetKind(), o.GetName(), values)
				Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), "%s %s (%s)", o.GetKind(), o.GetName(), values)
			}
		}
		files, err := filepath.Glob(filepath.Join(root, "manifests", "second-scheduler", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			raw, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(raw)).NotTo(ContainSubstring("helm.sh/chart"), f)
			Expect(string(raw)).NotTo(ContainSubstring("app.kubernetes.io/managed-by"), f)
		}
	})

	It("refuses a misspelt value, naming it, instead of deploying the defaults", func() {
		bad := filepath.Join(env.Dir, "typo-values.yaml")
		Expect(os.WriteFile(bad, []byte("replicas: 3\nimage:\n  tags: v9\n"), 0o600)).To(Succeed())
		_, err := helm("template", "berth", filepath.Join(root, "charts", "berth"), "--values", bad)
		Expect(err).To(MatchError(And(ContainSubstring("values don't meet the specifications of the schema"), ContainSubstring("replicas"), ContainSubstring("tags"))))
	})

	It("refuses the control plane scheduler's lease, however it is named", func() {
		chart := filepath.Join(root, "charts", "berth")
		for _, set := range []string{"leaderElection.resourceName=kube-scheduler", "fullnameOverride=kube-scheduler"} {
			_, err := helm("template", "berth", chart, "--namespace", "kube-system", "--set", set)
			Expect(err).To(MatchError(ContainSubstring("kube-system/kube-scheduler is the control plane scheduler's lease")), set)
		}
		// A release named kube-scheduler is kube-scheduler-berth: its own lease.
		out, err := helm("template", "kube-scheduler", chart, "--namespace", "kube-system", "--show-only", "templates/config.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("resourceName: kube-scheduler-berth"))
	})

	It("gives helm test's pod the first profile's schedulerName, as the notes tell pods to use, when the profile names its own", func() {
		// The default values with the first profile (every plugin) named.
		raw, err := os.ReadFile(filepath.Join(root, "charts", "berth", "values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var values map[string]any
		Expect(yaml.Unmarshal(raw, &values)).To(Succeed())
		values["profiles"].([]any)[0].(map[string]any)["schedulerName"] = "team-scheduler"
		values["schedulerName"] = "unused"
		named, err := yaml.Marshal(values)
		Expect(err).NotTo(HaveOccurred())
		valuesFile := filepath.Join(env.Dir, "named-profile-values.yaml")
		Expect(os.WriteFile(valuesFile, named, 0o600)).To(Succeed())

		objs := renderChart("berth", "berth-system", "", "--values", valuesFile)
		var names []string
		for _, o := range objs {
			if o.GetKind() == "Pod" {
				n, _, _ := unstructured.NestedString(o.Object, "spec", "schedulerName")
				names = append(names, n)
			}
		}
		Expect(names).To(Equal([]string{"team-scheduler"}), "the test pod must ask a scheduler the config has")
		cfgPath := filepath.Join(env.Dir, "named-profile.yaml")
		Expect(configOf(objs, cfgPath)).To(ContainSubstring("schedulerName: team-scheduler"))
		Expect(loadSchedulerConfig(cfgPath)).To(Succeed())
		out, err := helm("install", "berth", filepath.Join(root, "charts", "berth"), "--dry-run=client", "--namespace", "berth-system", "--values", valuesFile)
		Expect(err).NotTo(HaveOccurred())
		_, notes, found := strings.Cut(out, "\nNOTES:\n")
		Expect(found).To(BeTrue(), "helm install --dry-run printed no NOTES:\n%s", out)
		Expect(notes).To(ContainSubstring("schedulerName: team-scheduler"))
		Expect(notes).NotTo(ContainSubstring("unused"))
	})

	It("rolls the Deployment when the scheduler config changes", func() {
		checksum := func(objs []*unstructured.Unstructured) string {
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					v, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "annotations", "checksum/config")
					return v
				}
			}
			return ""
		}
		before := checksum(renderChart("berth", "berth-system", ""))
		Expect(before).NotTo(BeEmpty())
		Expect(checksum(renderChart("berth", "berth-system", "", "--set", "logLevel=4"))).To(Equal(before), "a flag is not the config")
		Expect(checksum(renderChart("berth", "berth-system", "", "--set", "schedulerName=other"))).NotTo(Equal(before))
	})

	// The HA install, installed for real under another release and
	// namespace: its RBAC is enough to lead and schedule as its own
	// ServiceAccount, and grants nothing on the control plane scheduler's lease.
	It("installs the HA style under its own name: the scheduler leads on its lease and schedules as the chart's ServiceAccount", func(ctx SpecContext) {
		const ns = "berth-ha"
		objs := renderChart("berth-ha", ns, "ha-values.yaml")
		Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace(ns)}, false)).To(Succeed())
		applyRendered(ctx, objs, append(rbacKinds, "ConfigMap")...)
		sa := "system:serviceaccount:" + ns + ":berth-ha"
		for _, verb := range []string{"get", "update"} {
			Expect(canUser(ctx, sa, ns, authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: "kube-scheduler"})).
				To(BeFalse(), "%s on kube-system/kube-scheduler's lease", verb)
		}
		Expect(canUser(ctx, sa, ns, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "berth-ha"})).To(BeTrue())

		_, err := sandbox.CreateNode(ctx, env.Client, sandbox.NodeSpec{Name: "chart-node", CPU: "8", Memory: "16Gi"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Nodes().Delete(ctx, "chart-node", metav1.DeleteOptions{})).To(Succeed())
		})
		p, logPath := startRendered(objs, sa, "berth-ha")
		defer p.Stop()
		Eventually(func() (string, error) {
			l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, "berth-ha", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return "", err
			}
			return *l.Spec.HolderIdentity, nil
		}).ShouldNot(BeEmpty(), "scheduler log: %s", logPath)
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: "default", Name: "chart-pod", SchedulerName: "berth-scheduler", CPU: "100m"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.CoreV1().Pods("default").Delete(ctx, "chart-pod", *metav1.NewDeleteOptions(0))).To(Succeed())
		})
		Eventually(sandbox.NodeNameOf(ctx, env.Client, "default", "chart-pod")).Should(Equal("chart-node"), "scheduler log: %s", logPath)

		// helm test's pod: a hook for the chart's scheduler, outside the
		// Deployment's selector; the running scheduler binds it.
		var test *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Pod" {
				test = o
			}
		}
		Expect(test).NotTo(BeNil(), "no helm test pod rendered")
		Expect(test.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "test"))
		schedulerName, _, _ := unstructured.NestedString(test.Object, "spec", "schedulerName")
		Expect(schedulerName).To(Equal("berth-scheduler"))
		for _, o := range objs {
			if o.GetKind() == "Deployment" || o.GetKind() == "PodDisruptionBudget" {
				sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
				Expect(labels.SelectorFromSet(sel).Matches(labels.Set(test.GetLabels()))).To(BeFalse(), "%s %s selects the test pod", o.GetKind(), o.GetName())
			}
		}
		Expect(env.Apply(ctx, []*unstructured.Unstructured{test}, false)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Delete(ctx, test)).To(Succeed()) })
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, test.GetName())).Should(Equal("chart-node"), "scheduler log: %s", logPath)
		log, err := os.ReadFile(logPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).NotTo(ContainSubstring("is forbidden"), "scheduler log %s has a denied request", logPath)
	})
})

// applyRendered applies the rendered objects of the given kinds for real;
// the cluster-scoped ones are deleted when the spec ends.
func applyRendered(ctx SpecContext, objs []*unstructured.Unstructured, kinds ...string) {
	GinkgoHelper()
	var setup []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(kinds, o.GetKind()) {
			setup = append(setup, o)
		}
	}
	Expect(env.Apply(ctx, setup, false)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		for _, o := range setup {
			if o.GetNamespace() == "" {
				Expect(env.Delete(ctx, o)).To(Succeed())
			}
		}
	})
}

// rbacKinds are what a scheduler needs applied to run as the chart's ServiceAccount.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// startRendered runs bin/scheduler with the rendered config, leader election
// on, as ServiceAccount sa (impersonated), logging to name.log; extra flags
// follow. It returns the process and the log's path.
func startRendered(objs []*unstructured.Unstructured, sa, name string, extra ...string) (*sandbox.Process, string) {
	GinkgoHelper()
	kubeconfig, err := env.KubeconfigAs(sa, name+".kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	raw := filepath.Join(env.Dir, name+"-raw.yaml")
	configOf(objs, raw)
	cfg, err := sandbox.PrepareConfig(env.Dir, name+".yaml", kubeconfig, true, raw)
	Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(env.Dir, name+".log")
	p, err := sandbox.StartSchedulerProcess(schedulerBin, cfg, logPath, append([]string{"--v=2"}, extra...)...)
	Expect(err).NotTo(HaveOccurred())
	return p, logPath
}

func namespace(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	return u
}

// canUser asks the API server whether a ServiceAccount of ns may do attrs.
func canUser(ctx SpecContext, user, ns string, attrs authorizationv1.ResourceAttributes) bool {
	GinkgoHelper()
	sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &attrs,
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return sar.Status.Allowed
}

// The chart as users install it: packaged as make release packages it
// (helm package --version --app-version, hack/release.sh), then helm
// install of the .tgz into the suite's API server, from an untagged commit
// (a version with build metadata, "+<sha>") and from a tag.
var _ = Describe("The packaged chart", func() {
	for _, tc := range []struct{ what, appVersion, wantTag string }{
		{"an untagged commit", "v0.1.0-dev+abc1234", "v0.1.0-dev-abc1234"},
		{"a tag", "v0.1.0", "v0.1.0"},
	} {
		It("installs with helm install from "+tc.what+", the image tag as make image tags it", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			out, err := helm("package", filepath.Join(root, "charts", "berth"), "--version", strings.TrimPrefix(tc.appVersion, "v"), "--app-version", tc.appVersion, "-d", dir)
			Expect(err).NotTo(HaveOccurred(), out)
			tgz, err := filepath.Glob(filepath.Join(dir, "berth-*.tgz"))
			Expect(err).NotTo(HaveOccurred())
			Expect(tgz).To(HaveLen(1))
			release := "pkg-" + strings.ReplaceAll(strings.TrimPrefix(tc.wantTag, "v"), ".", "-")
			ns := release + "-ns"
			out, err = helm("install", release, tgz[0], "--namespace", ns, "--create-namespace", "--kubeconfig", env.Kubeconfig,
				"--set", "leaderElection.resourceName="+release, "--set", "schedulerName="+release)
			Expect(err).NotTo(HaveOccurred(), out)
			DeferCleanup(func(ctx SpecContext) {
				out, err := helm("uninstall", release, "--namespace", ns, "--kubeconfig", env.Kubeconfig, "--wait")
				Expect(err).NotTo(HaveOccurred(), out)
				Expect(env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
			})
			// A release whose name lacks the chart's: Helm's <release>-<chart>.
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, release+"-berth", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/version", tc.wantTag))
			Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/berth-scheduler/berth:" + tc.wantTag))
		})
	}
})

// The API client's rate, and any other field of the configuration, are
// set through the chart (kube-scheduler ignores --kube-api-qps with
// --config, which the chart always passes); the configuration they make is
// one the scheduler's start-up accepts (kubectl berth validate).
var _ = Describe("The chart's clientConnection and extraConfig", func() {
	It("set the scheduler's API client rate and other configuration fields, in a configuration the scheduler accepts", func(ctx SpecContext) {
		objs := renderChart("berth", "berth-system", "", "--set", "clientConnection.qps=200", "--set", "clientConnection.burst=400",
			"--set", "extraConfig.percentageOfNodesToScore=30")
		path := filepath.Join(GinkgoT().TempDir(), "config.yaml")
		raw := configOf(objs, path)
		var cfg map[string]any
		Expect(yaml.Unmarshal([]byte(raw), &cfg)).To(Succeed())
		Expect(cfg["clientConnection"]).To(Equal(map[string]any{"qps": float64(200), "burst": float64(400)}))
		Expect(cfg).To(HaveKeyWithValue("percentageOfNodesToScore", float64(30)))
		Expect(cfg).To(HaveKey("leaderElection"), "the chart's own fields stay")
		bin := os.Getenv("BERTH_KUBECTL_BIN")
		Expect(bin).NotTo(BeEmpty(), "BERTH_KUBECTL_BIN is not set: run `make test-integration`")
		out, err := exec.CommandContext(ctx, bin, "validate", path).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		_, err = helm("template", "berth", filepath.Join(root, "charts", "berth"), "--set", "clientConnection.qps=0")
		Expect(err).To(MatchError(ContainSubstring("qps")), "a rate of 0 is refused by the chart's schema")
	})
})

// Helm's naming convention: app.kubernetes.io/name is the chart's,
// app.kubernetes.io/instance the release's, objects are <release>-berth
// (or fullnameOverride), and cluster-scoped RBAC carries the namespace, so
// that two releases of one name in two namespaces install side by side.
var _ = Describe("The chart's names and labels", func() {
	It("installs releases of one name in two namespaces, each Deployment selecting its own release's pods", func(ctx SpecContext) {
		chart := filepath.Join(root, "charts", "berth")
		for _, ns := range []string{"twin-a", "twin-b"} {
			out, err := helm("install", "twin", chart, "--namespace", ns, "--create-namespace", "--kubeconfig", env.Kubeconfig,
				"--set", "schedulerName=twin-"+ns)
			Expect(err).NotTo(HaveOccurred(), "the second namespace's release collides with the first's: %s", out)
			DeferCleanup(func(ctx SpecContext) {
				out, err := helm("uninstall", "twin", "--namespace", ns, "--kubeconfig", env.Kubeconfig, "--wait")
				Expect(err).NotTo(HaveOccurred(), out)
				Expect(env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
			})
			d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "twin-berth", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "twin"}))
			crb, err := env.Client.RbacV1().ClusterRoleBindings().Get(ctx, "twin-berth:"+ns+":kube-scheduler", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(crb.Subjects).To(ConsistOf(HaveField("Namespace", ns)))
		}
	})

	It("takes fullnameOverride, commonLabels, topologySpreadConstraints, extra volumes and mounts, and a startupProbe", func(ctx SpecContext) {
		objs := renderChart("knobs", "berth-knobs", "",
			"--set", "fullnameOverride=sched,commonLabels.team=infra",
			"--set", "topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"--set", "extraVolumes[0].name=serving-cert,extraVolumes[0].secret.secretName=sched-serving-cert",
			"--set", "extraVolumeMounts[0].name=serving-cert,extraVolumeMounts[0].mountPath=/etc/berth-tls,extraVolumeMounts[0].readOnly=true",
			"--set", "extraArgs={--tls-cert-file=/etc/berth-tls/tls.crt,--tls-private-key-file=/etc/berth-tls/tls.key}",
			"--set", "topologySpreadConstraints[1].maxSkew=1,topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname,topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule,topologySpreadConstraints[1].labelSelector.matchLabels.team=infra",
			"--set", "metrics.service.enabled=true,metrics.prometheusRule.enabled=true")
		// The alerts select the metrics Service's job, whatever the names.
		var service string
		var rules []byte
		for _, o := range objs {
			switch o.GetKind() {
			case "Service":
				service = o.GetName()
			case "PrometheusRule":
				var err error
				rules, err = o.MarshalJSON()
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect(service).To(Equal("sched-metrics"))
		jobs := regexp.MustCompile(`job=\\"([^\\]*)\\"`).FindAllSubmatch(rules, -1)
		Expect(jobs).NotTo(BeEmpty())
		for _, j := range jobs {
			Expect(string(j[1])).To(Equal(service), "an alert selects another job than the metrics Service's")
		}
		var found bool
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			Expect(o.GetLabels()).To(HaveKeyWithValue("team", "infra"), "%s %s", o.GetKind(), o.GetName())
			if o.GetKind() != "Deployment" {
				continue
			}
			found = true
			Expect(o.GetName()).To(Equal("sched"))
			var d appsv1.Deployment
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)).To(Succeed())
			Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("team", "infra"))
			Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(ConsistOf(
				And(HaveField("TopologyKey", "topology.kubernetes.io/zone"), HaveField("LabelSelector.MatchLabels", Equal(d.Spec.Selector.MatchLabels))),
				And(HaveField("TopologyKey", "kubernetes.io/hostname"), HaveField("LabelSelector.MatchLabels", Equal(map[string]string{"team": "infra"}))),
			), "a constraint's own labelSelector is kept as given")
			Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "sched-serving-cert")))
			c := d.Spec.Template.Spec.Containers[0]
			Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/berth-tls")))
			Expect(c.Args).To(ContainElement("--tls-cert-file=/etc/berth-tls/tls.crt"))
			Expect(c.StartupProbe).NotTo(BeNil())
			Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/livez"))
			Expect(c.LivenessProbe.InitialDelaySeconds).To(BeZero(), "the startup probe holds liveness back")
		}
		Expect(found).To(BeTrue())
		Expect(env.Apply(ctx, []*unstructured.Unstructured{namespace("berth-knobs")}, false)).To(Succeed())
		// The PrometheusRule needs prometheus-operator's CRDs, which the
		// monitoring specs load and dry-run it against.
		dryRun(ctx, slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "PrometheusRule" }))
	})
})
