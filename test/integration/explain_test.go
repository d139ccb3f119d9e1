package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

// kubectlBerth runs bin/kubectl-berth (make test-integration builds it)
// against the suite's API server and returns its standard output.
func kubectlBerth(ctx SpecContext, args ...string) string {
	bin := kubectlBerthBin()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", env.Kubeconfig)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "%s %v: %s", bin, args, stderr.String())
	return string(out)
}

// kubectlBerthBin is bin/kubectl-berth, or BERTH_KUBECTL_BIN.
func kubectlBerthBin() string {
	GinkgoHelper()
	if bin := os.Getenv("BERTH_KUBECTL_BIN"); bin != "" {
		return bin
	}
	root, err := sandbox.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(root, "bin", "kubectl-berth")
}

// explanation polls the pod's explain.berth.dev/result.
func explanation(ctx SpecContext, ns, name string) func(Gomega) *explain.Result {
	return func(g Gomega) *explain.Result {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		raw, ok := p.Annotations[explain.AnnotationResult]
		g.Expect(ok).To(BeTrue(), "no %s annotation yet", explain.AnnotationResult)
		r := &explain.Result{}
		g.Expect(json.Unmarshal([]byte(raw), r)).To(Succeed())
		return r
	}
}

var _ = Describe("Explain", Serial, func() {
	asks := map[string]string{explain.AnnotationRequest: "true"}
	nodes := map[string]string{"berth.dev/explain": "true"}

	It("explains a placement by the plugins' weighted scores, written through pods/status, with an event", func(ctx SpecContext) {
		ns := newNamespace(ctx, "explain-placed")
		createNodes(ctx,
			// ex-hot is the roomiest by requests but burns its CPU; ex-spot is
			// small, cool and spot: LoadAware and CELPolicy make it win.
			sandbox.NodeSpec{Name: "ex-hot", CPU: "16", Memory: "32Gi", Labels: nodes, Annotations: usageAnnotation("10", "4Gi")},
			sandbox.NodeSpec{Name: "ex-spot", CPU: "4", Memory: "8Gi", Labels: map[string]string{"berth.dev/explain": "true", "lifecycle": "spot"},
				Annotations: usageAnnotation("200m", "1Gi")},
			sandbox.NodeSpec{Name: "ex-tiny", CPU: "1", Memory: "2Gi", Labels: nodes, Annotations: usageAnnotation("100m", "1Gi")},
		)
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch", SchedulerName: "berth-explain", CPU: "2", Memory: "1Gi",
			Labels: map[string]string{"tier": "batch"}, Annotations: asks, NodeSelector: nodes})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "batch")).Should(Equal("ex-spot"))
		var res *explain.Result
		Eventually(func(g Gomega) { res = explanation(ctx, ns, "batch")(g) }).Should(Succeed())
		Expect(res.Outcome).To(Equal(explain.OutcomePlaced))
		Expect(res.Profile).To(Equal("berth-explain"))
		Expect(res.Placed.Node).To(Equal("ex-spot"))
		Expect(res.Placed.Scored).To(BeTrue())
		Expect(res.Placed.Rank).To(Equal(1))
		Expect(res.Placed.Feasible).To(Equal(2), "ex-tiny lacks CPU; nodes outside the selector fail NodeAffinity: %+v", res)
		var spot, hot explain.NodeScore
		for _, n := range res.Placed.Top {
			switch n.Node {
			case "ex-spot":
				spot = n
			case "ex-hot":
				hot = n
			}
		}
		Expect(spot.Total).To(BeNumerically(">", hot.Total))
		Expect(spot.Plugins["LoadAware"]).To(BeNumerically(">", hot.Plugins["LoadAware"]), "LoadAware prefers the cool node")
		Expect(spot.Plugins["CELPolicy"]).To(BeNumerically(">", hot.Plugins["CELPolicy"]), "rule batch-prefers-spot")
		Expect(spot.Plugins["NodeResourcesFit"]).To(BeNumerically("<", hot.Plugins["NodeResourcesFit"]), "by requests alone ex-hot would win")
		Expect(res.Rejections).To(ContainElement(HaveField("Plugin", "NodeResourcesFit")))
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "batch", explain.ReasonExplained)).Should(ContainElement(
			HaveField("Message", And(HavePrefix("placed on ex-spot, rank 1 of 2 scored"), ContainSubstring("over ex-hot"), ContainSubstring("LoadAware")))))

		By("kubectl berth explain prints the nodes by plugin")
		out := kubectlBerth(ctx, "explain", "batch", "-n", ns)
		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("Pod " + ns + "/batch placed on ex-spot by profile berth-explain"))
		Expect(out).To(MatchRegexp(`(?m)^\*\s+ex-spot\s+\d+`))
		Expect(out).To(MatchRegexp(`(?m)^\s+ex-hot\s+\d+`))
		Expect(out).To(ContainSubstring("LoadAware"))
		Expect(out).To(MatchRegexp(`(?m)^REJECTED BY\s+NODES\s+REASON`))
		Expect(kubectlBerth(ctx, "explain", "batch", "-n", ns, "-o", "json")).To(ContainSubstring(`"version": "` + explain.ResultVersion + `"`))

		By("a pod that does not ask gets no explanation")
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "quiet", SchedulerName: "berth-explain", CPU: "100m", NodeSelector: nodes})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "quiet")).ShouldNot(BeEmpty())
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "quiet", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Annotations).NotTo(HaveKey(explain.AnnotationResult))
	})

	It("explains a pending pod: the blocking plugins and the nodes nearest to fitting", func(ctx SpecContext) {
		ns := newNamespace(ctx, "explain-pending")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "ex-p-a", CPU: "4", Memory: "8Gi", Labels: nodes},
			sandbox.NodeSpec{Name: "ex-p-b", CPU: "2", Memory: "8Gi", Labels: nodes},
			sandbox.NodeSpec{Name: "ex-p-t", CPU: "32", Memory: "64Gi", Labels: nodes,
				Taints: []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}},
		)
		// createNodes waits until the scheduler's cache holds all three: a pod
		// scheduled before it saw the tainted node was explained over two
		// nodes (CI, b3bd873).
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "big", SchedulerName: "berth-explain", CPU: "5", Memory: "1Gi",
			Annotations: asks, NodeSelector: nodes})
		Expect(err).NotTo(HaveOccurred())
		var res *explain.Result
		Eventually(func(g Gomega) { res = explanation(ctx, ns, "big")(g) }).Should(Succeed())
		Expect(res.Outcome).To(Equal(explain.OutcomePending))
		Expect(res.Rejections).To(ContainElements(
			And(HaveField("Plugin", "NodeResourcesFit"), HaveField("Nodes", 2)),
			And(HaveField("Plugin", "TaintToleration"), HaveField("Nodes", 1)),
		))
		Expect(res.Nearest).To(HaveLen(2))
		Expect(res.Nearest[0]).To(Equal(explain.Nearest{Node: "ex-p-a", Plugin: "NodeResourcesFit", Short: map[string]string{"cpu": "1"}}))
		Expect(res.Nearest[1].Node).To(Equal("ex-p-b"))
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "big", explain.ReasonExplained)).Should(ContainElement(
			HaveField("Message", ContainSubstring("nearest ex-p-a: short 1 cpu"))))
		out := kubectlBerth(ctx, "explain", "big", "-n", ns)
		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("Pod " + ns + "/big fits none of 3 nodes"))
		Expect(out).To(MatchRegexp(`(?m)^ex-p-a\s+NodeResourcesFit\s+1 cpu$`))
		Expect(out).To(MatchRegexp(`(?m)^TaintToleration\s+1\s+`))

		By("kubectl berth explain --pending lists the explained pending pods; kubectl's printers and completion")
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "unasked", SchedulerName: "berth-explain", CPU: "64", NodeSelector: nodes})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "unasked", "FailedScheduling")).ShouldNot(BeEmpty())
		list := kubectlBerth(ctx, "explain", "--pending", "-n", ns)
		GinkgoWriter.Println(list)
		Expect(list).To(MatchRegexp(`(?m)^NAME\s+PROFILE\s+NODES\s+REJECTED BY\s+NEAREST\s+EXPLAINED$`))
		Expect(list).To(MatchRegexp(`(?m)^big\s+berth-explain\s+3\s+NodeResourcesFit \(2\), TaintToleration \(1\)\s+ex-p-a \(short 1 cpu\)\s+\S+ ago$`))
		Expect(list).NotTo(ContainSubstring("unasked"), "a pod that did not ask has no explanation to list")
		Expect(kubectlBerth(ctx, "explain", "--pending", "-A")).To(MatchRegexp(`(?m)^%s\s+big\s+berth-explain\s+`, ns))
		Expect(kubectlBerth(ctx, "explain", "--pending", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}")).To(Equal("big"))
		Expect(kubectlBerth(ctx, "explain", "big", "-n", ns, "-o", "jsonpath={.nearest[0].node}")).To(Equal("ex-p-a"))
		Expect(kubectlBerth(ctx, "explain", "big", "-n", ns, "-o", "name")).To(Equal("explanation.explain.berth.dev/big\n"))
		Expect(kubectlBerth(ctx, "explain", "big", "-n", ns, "-o", "yaml")).To(And(
			ContainSubstring("apiVersion: "+explain.ResultVersion+"\n"), ContainSubstring("kind: Explanation\n"), ContainSubstring("outcome: Pending\n"),
			ContainSubstring("  namespace: "+ns+"\n")))
		// Errors are printed (cobra's own printing is silenced): this one once exited 1 saying nothing.
		Expect(kubectlBerthFails(ctx, "explain", "nosuch", "-n", ns)).To(Equal("error: pods \"nosuch\" not found\n"))
		Expect(kubectlBerthFails(ctx, "explain", "big", "-n", ns, "-o", "wide")).To(ContainSubstring(`unable to match a printer suitable for the output format "wide"`))
		Expect(kubectlBerthFails(ctx, "explain", "big", "--pending", "-n", ns)).To(ContainSubstring("give no pod name with it"))
		// Shell completion as kubectl asks a plugin for it (kubectl_complete-berth
		// runs kubectl-berth __complete): pod names from the cluster, then the
		// namespaces of -n.
		Expect(kubectlBerthComplete(ctx, "explain", "-n", ns, "")).To(ContainElements("big", "unasked"))
		Expect(kubectlBerthComplete(ctx, "explain", "-n", ns, "b")).To(Equal([]string{"big"}))
		Expect(kubectlBerthComplete(ctx, "explain", "-n", "explain-pe")).To(ContainElement(ns))
	})
})

// kubectlBerthFails runs bin/kubectl-berth, which must fail, and returns its
// standard error.
func kubectlBerthFails(ctx SpecContext, args ...string) string {
	bin := kubectlBerthBin()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", env.Kubeconfig)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	Expect(err).To(HaveOccurred(), "%s %v succeeded", bin, args)
	return stderr.String()
}

// kubectlBerthComplete asks bin/kubectl-berth for the completions of args'
// last word, as cobra's shell scripts do (__complete), and returns them
// without the closing directive line.
func kubectlBerthComplete(ctx SpecContext, args ...string) []string {
	bin := kubectlBerthBin()
	// The word to complete stays last: the kubeconfig goes before it.
	full := append([]string{"__complete", "--kubeconfig", env.Kubeconfig}, args...)
	out, err := exec.CommandContext(ctx, bin, full...).Output()
	Expect(err).NotTo(HaveOccurred(), "%s %v", bin, full)
	var comps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.HasPrefix(line, ":") {
			comps = append(comps, strings.SplitN(line, "\t", 2)[0])
		}
	}
	return comps
}
