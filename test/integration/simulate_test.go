package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// simulateReport is the part of kubectl berth simulate -o json the specs
// read.
type simulateReport struct {
	Pods []struct {
		Namespace, Name string
		Outcomes        []struct {
			Node, Reason string
			Ties         int
			TiedWith     []string
		}
	}
	Totals struct {
		Quotas []struct {
			Namespace string
			Borrowed  []v1.ResourceList
		}
		Gangs []struct {
			Namespace, Name string
			MinMember       int32
			Bound           []int
		}
	}
}

// suiteProfiles writes the configuration of the suite's scheduler (its
// merged scheduler-config.yaml: every profile as the scheduler runs it,
// Coscheduling's queue sort shared) with only the named profiles, and
// returns its path: simulate then places again only those profiles' pods.
func suiteProfiles(names ...string) string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(env.Dir, "scheduler-config.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var doc map[string]any
	Expect(yaml.Unmarshal(raw, &doc)).To(Succeed())
	var kept []any
	for _, p := range doc["profiles"].([]any) {
		if slices.Contains(names, p.(map[string]any)["schedulerName"].(string)) {
			kept = append(kept, p)
		}
	}
	Expect(kept).To(HaveLen(len(names)), "profiles %v in the suite's configuration", names)
	doc["profiles"] = kept
	out, err := yaml.Marshal(doc)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(env.Dir, "simulate-"+strings.Join(names, "-")+".yaml")
	Expect(os.WriteFile(path, out, 0o600)).To(Succeed())
	return path
}

// snapshotAndSimulate takes a snapshot of the suite's cluster (named name)
// with kubectl berth snapshot and simulates it under config with args, as
// JSON.
func snapshotAndSimulate(ctx SpecContext, name, config string, args ...string) simulateReport {
	GinkgoHelper()
	file := filepath.Join(env.Dir, name+".json.gz")
	out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", file, "--kubeconfig", env.Kubeconfig).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	cmd := exec.CommandContext(ctx, kubectlBerthBin(), append([]string{"simulate", "--snapshot", file, "-o", "json", "--config", config}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), stderr.String())
	var report simulateReport
	Expect(json.Unmarshal(raw, &report)).To(Succeed(), string(raw))
	return report
}

// expectPlacedAsSimulated compares where the scheduler put ns's pods (""
// for pending; ended pods left out, as simulate leaves them) with where
// simulate --mode replace put them: the same node, or a node simulate
// reports as tied with its own (the scheduler picks among equally scored
// nodes by the order its filter workers finish in). It returns the
// simulated outcomes by pod.
func expectPlacedAsSimulated(ctx SpecContext, ns string, report simulateReport) map[string]int {
	GinkgoHelper()
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	placed := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded && p.DeletionTimestamp == nil {
			placed[p.Name] = p.Spec.NodeName
		}
	}
	simulated := map[string]string{}
	ties := map[string]int{}
	var disagree []string
	for _, p := range report.Pods {
		if p.Namespace != ns {
			continue
		}
		o := p.Outcomes[0]
		simulated[p.Name], ties[p.Name] = o.Node, o.Ties
		if real, ok := placed[p.Name]; ok && real != o.Node && !slices.Contains(o.TiedWith, real) {
			disagree = append(disagree, fmt.Sprintf("%s: scheduler %q, simulate %q (tied with %v; %s)", p.Name, real, o.Node, o.TiedWith, o.Reason))
		}
	}
	Expect(disagree).To(BeEmpty(), "simulate disagrees with the scheduler")
	Expect(simulated).To(HaveLen(len(placed)), "simulated %v, placed %v", simulated, placed)
	return ties
}

// kubectl berth simulate agrees with the scheduler: the suite's scheduler
// places a CELPolicy scenario (manifests/examples/celpolicy.yaml's profile),
// kubectl berth snapshot takes the cluster, and simulate --mode replace with
// the same config places every pod again, offline, on the same nodes. Each
// pod has one best node when it is placed, so there is no tie to tell apart.
var _ = Describe("kubectl berth simulate", func() {
	It("places a CELPolicy scenario again exactly where the scheduler placed it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-agree")
		iso := isolated("berth.dev/simulate-spec")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "sim-spot", CPU: "2", Memory: "8Gi", Labels: iso.Labels(map[string]string{"lifecycle": "spot"}), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-on-demand", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-gpu", CPU: "8", Memory: "8Gi", Labels: iso.Labels(map[string]string{"nvidia.com/gpu.present": "true"}), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-old-kernel", CPU: "8", Memory: "8Gi", Labels: iso.Labels(map[string]string{"berth.io/kernel": "5.15.0"}), Taints: iso.Taints},
		)
		// One at a time, each bound (or found unschedulable) before the
		// next: the order simulate's replace mode places them in.
		want := map[string]string{"batch-1": "sim-spot", "batch-2": "sim-spot", "batch-3": "sim-on-demand", "web-1": "sim-on-demand", "web-2": ""}
		for _, name := range []string{"batch-1", "batch-2", "batch-3", "web-1", "web-2"} {
			tier := strings.Split(name, "-")[0]
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "berth-celpolicy", CPU: "1",
				Labels: map[string]string{"tier": tier}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
			Expect(err).NotTo(HaveOccurred())
			if want[name] == "" {
				Eventually(sandbox.EventsFor(ctx, env.Client, ns, name, "FailedScheduling")).ShouldNot(BeEmpty())
				continue
			}
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal(want[name]), "the scheduler places %s", name)
		}

		report := snapshotAndSimulate(ctx, "simulate-agree", suiteProfiles("berth-celpolicy"), "--mode", "replace")
		got := map[string]string{}
		reasons := map[string]string{}
		for _, p := range report.Pods {
			if p.Namespace == ns {
				got[p.Name] = p.Outcomes[0].Node
				reasons[p.Name] = p.Outcomes[0].Reason
			}
		}
		Expect(got).To(Equal(want), "simulated placements (reasons: %v)", reasons)
		Expect(reasons["web-2"]).To(ContainSubstring("GPU nodes are reserved for pods that request GPUs"))
	})
})

// kubectl berth simulate --mode drain agrees with a real drain: a
// ReplicaSet's pods, which the scheduler put on the spot node (rule
// batch-prefers-spot), are evicted from it as kubectl drain evicts them
// (cordon, then the Eviction API), kube-controller-manager's ReplicaSet
// controller replaces them and the scheduler places the replacements on the
// nodes simulate named beforehand, offline.
var _ = Describe("kubectl berth simulate --mode drain", func() {
	It("names the nodes a drained node's ReplicaSet pods are replaced on", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-drain")
		iso := isolated("berth.dev/simulate-drain")
		createKWOKNodes(ctx,
			sandbox.NodeSpec{Name: "drain-spot", CPU: "2", Memory: "8Gi", Labels: iso.Labels(map[string]string{"lifecycle": "spot"}), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "drain-small", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "drain-big", CPU: "8", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
		)
		rs, err := sandbox.CreateReplicaSet(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch", SchedulerName: "berth-celpolicy", CPU: "1",
			Labels: map[string]string{"tier": "batch"}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations}, 2)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rs.Close)
		nodesOf := func(exclude map[string]bool) func() ([]string, error) {
			return func() ([]string, error) {
				pods, err := rs.Pods(ctx)
				if err != nil {
					return nil, err
				}
				var out []string
				for _, p := range pods {
					if !exclude[p.Name] && p.DeletionTimestamp == nil {
						out = append(out, p.Spec.NodeName)
					}
				}
				slices.Sort(out)
				return out, nil
			}
		}
		Eventually(nodesOf(nil)).Should(Equal([]string{"drain-spot", "drain-spot"}), "the scheduler puts both on the spot node")

		report := snapshotAndSimulate(ctx, "simulate-drain", suiteProfiles("berth-celpolicy"), "--mode", "drain", "--nodes", "drain-spot")
		var simulated []string
		evicted := map[string]bool{}
		for _, p := range report.Pods {
			if p.Namespace == ns {
				simulated = append(simulated, p.Outcomes[0].Node)
				evicted[p.Name] = true
			}
		}
		slices.Sort(simulated)
		Expect(simulated).To(HaveLen(2), "simulate lists the two evicted pods: %+v", report.Pods)
		Expect(simulated).NotTo(ContainElement(BeElementOf("drain-spot", "")), "simulated: %v", simulated)

		// The drain itself.
		_, err = env.Client.CoreV1().Nodes().Patch(ctx, "drain-spot", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		for name := range evicted {
			Expect(env.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		Eventually(nodesOf(evicted), "30s").Should(Equal(simulated), "the replacements land where simulate said")
	})
})

// isolation keeps a spec's pods on the spec's own nodes and other pods off
// them: the snapshot's other pods of a profile, placed again first when they
// are older, cannot take the spec's room.
type isolation struct {
	// Taints go on the spec's nodes, Tolerations and Selector on its pods.
	Taints      []v1.Taint
	Tolerations []v1.Toleration
	Selector    map[string]string
}

func isolated(key string) isolation {
	return isolation{
		Taints:      []v1.Taint{{Key: key, Value: "true", Effect: v1.TaintEffectNoSchedule}},
		Tolerations: []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
		Selector:    map[string]string{key: "true"},
	}
}

// Labels are a spec node's labels: the selector's, and extra.
func (i isolation) Labels(extra map[string]string) map[string]string {
	out := maps.Clone(i.Selector)
	maps.Copy(out, extra)
	return out
}

// createOneAtATime creates the pods in order, each bound to want[name] (or
// found unschedulable, for "") before the next: the order simulate's
// replace mode places them in.
func createOneAtATime(ctx SpecContext, want map[string]string, pods ...sandbox.PodSpec) {
	GinkgoHelper()
	for _, p := range pods {
		_, err := sandbox.CreatePod(ctx, env.Client, p)
		Expect(err).NotTo(HaveOccurred())
		if want[p.Name] == "" {
			Eventually(sandbox.EventsFor(ctx, env.Client, p.Namespace, p.Name, "FailedScheduling")).ShouldNot(BeEmpty(), "%s stays pending", p.Name)
			continue
		}
		Eventually(sandbox.NodeNameOf(ctx, env.Client, p.Namespace, p.Name)).Should(Equal(want[p.Name]), "the scheduler places %s", p.Name)
	}
}

// Each plugin's scenario, placed by the suite's scheduler with the plugin's
// profile, then snapshotted and simulated with that profile in replace
// mode: every pod where the scheduler put it, up to ties reported as ties.
var _ = Describe("kubectl berth simulate agrees with the scheduler", func() {
	It("reports a pod placed between two equally scored nodes as a tie, not a difference", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-tie")
		iso := isolated("berth.dev/simulate-tie")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "tie-a", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "tie-b", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "web-1", SchedulerName: "berth-celpolicy", CPU: "1",
			Labels: map[string]string{"tier": "web"}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "web-1")).Should(BeElementOf("tie-a", "tie-b"))

		report := snapshotAndSimulate(ctx, "simulate-tie", suiteProfiles("berth-celpolicy"), "--mode", "replace")
		ties := expectPlacedAsSimulated(ctx, ns, report)
		Expect(ties).To(HaveKeyWithValue("web-1", 1), "the other node scored as high: one tie")
	})

	It("on ElasticQuota's scenario: a namespace borrowing another's idle min up to the total", func(ctx SpecContext) {
		eqClient, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		borrower, lender := newNamespace(ctx, "simulate-eq-a"), newNamespace(ctx, "simulate-eq-b")
		createQuotaMax(ctx, eqClient, borrower, "1", "4")
		createQuotaMax(ctx, eqClient, lender, "2", "4") // idle: lends its min
		iso := isolated("berth.dev/simulate-eq")
		createNodes(ctx, sandbox.NodeSpec{Name: "sim-eq", CPU: "8", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		// Within its min, then borrowing up to the sum of the quotas' min (3
		// CPU): the fourth waits.
		want := map[string]string{"q-1": "sim-eq", "q-2": "sim-eq", "q-3": "sim-eq", "q-4": ""}
		var pods []sandbox.PodSpec
		for _, name := range []string{"q-1", "q-2", "q-3", "q-4"} {
			pods = append(pods, sandbox.PodSpec{Namespace: borrower, Name: name, SchedulerName: "berth-elasticquota", CPU: "1", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		}
		createOneAtATime(ctx, want, pods...)

		report := snapshotAndSimulate(ctx, "simulate-eq", suiteProfiles("berth-elasticquota"), "--mode", "replace")
		expectPlacedAsSimulated(ctx, borrower, report)
		var borrowed *resource.Quantity
		for _, q := range report.Totals.Quotas {
			if q.Namespace == borrower {
				b := q.Borrowed[0][v1.ResourceCPU]
				borrowed = &b
			}
		}
		Expect(borrowed).NotTo(BeNil(), "the borrower's quota in the totals: %+v", report.Totals.Quotas)
		Expect(borrowed.Cmp(resource.MustParse("2"))).To(Equal(0), "borrowed %s CPU above its min, want 2", borrowed)
	})

	It("on Coscheduling's scenario: a gang bound whole", func(ctx SpecContext) {
		pgClient, err := versioned.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace(ctx, "simulate-gang")
		_, err = pgClient.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: ptr.To[int32](30)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		iso := isolated("berth.dev/simulate-gang")
		createNodes(ctx, sandbox.NodeSpec{Name: "sim-gang", CPU: "4", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		for _, name := range []string{"g-0", "g-1"} {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "scheduler-plugins-scheduler", CPU: "1",
				Labels: map[string]string{schedv1alpha1.PodGroupLabel: "g"}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
			Expect(err).NotTo(HaveOccurred())
		}
		for _, name := range []string{"g-0", "g-1"} {
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal("sim-gang"))
		}

		report := snapshotAndSimulate(ctx, "simulate-gang", suiteProfiles("scheduler-plugins-scheduler"), "--mode", "replace")
		expectPlacedAsSimulated(ctx, ns, report)
		var bound []int
		for _, g := range report.Totals.Gangs {
			if g.Namespace == ns && g.Name == "g" {
				bound = g.Bound
			}
		}
		Expect(bound).To(Equal([]int{2}), "the gang's bound members in the totals: %+v", report.Totals.Gangs)
	})

	It("on LoadAware's scenario: pods kept off the node metrics-server reports as hot", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-load")
		iso := isolated("berth.dev/simulate-load")
		createKWOKNodes(ctx,
			sandbox.NodeSpec{Name: "sim-load-hot", CPU: "8", Memory: "16Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-load-cool", CPU: "4", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		Expect(kwok.SetUsage(ctx, "sim-load-hot", "7500m", "1Gi")).To(Succeed())
		Expect(kwok.SetUsage(ctx, "sim-load-cool", "100m", "1Gi")).To(Succeed())
		waitForMetrics(ctx, "sim-load-hot", 7)
		waitForMetrics(ctx, "sim-load-cool", 0)
		// The hot node has twice the room: by requests alone it would win.
		want := map[string]string{"api-1": "sim-load-cool", "api-2": "sim-load-cool"}
		createOneAtATime(ctx, want,
			sandbox.PodSpec{Namespace: ns, Name: "api-1", SchedulerName: "loadaware-metrics-fast", CPU: "500m", Memory: "128Mi", NodeSelector: iso.Selector, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "api-2", SchedulerName: "loadaware-metrics-fast", CPU: "500m", Memory: "128Mi", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})

		report := snapshotAndSimulate(ctx, "simulate-load", suiteProfiles("loadaware-metrics-fast"), "--mode", "replace")
		expectPlacedAsSimulated(ctx, ns, report)
	})

	It("on AdmissionFeedback's scenario: a controller's replacement kept off the node that refused its sibling", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-refusal")
		rc := refusalCluster(ctx, "simulate")
		r := replicaSet(ctx, rc, ns, "sim-web", "berth-admissionfeedback")
		Eventually(rc.RefusedCount(ctx)).Should(Equal(1))
		Eventually(r.Active(ctx)).Should(HaveLen(1))
		replacement := must(r.Active(ctx)())[0]
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, replacement)).Should(BeElementOf(rc.Others))

		// The refused pod (Failed on the black hole, the roomiest node) is in
		// the snapshot; simulate places the replacement again.
		report := snapshotAndSimulate(ctx, "simulate-refusal", suiteProfiles("berth-admissionfeedback"), "--mode", "replace")
		expectPlacedAsSimulated(ctx, ns, report)
	})

	It("on ConfirmBinder's and Explain's scenarios", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-confirm-explain")
		iso := isolated("berth.dev/simulate-ce")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "sim-confirm", CPU: "2", Memory: "8Gi", Labels: iso.Labels(map[string]string{"role": "confirm"}), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-spot", CPU: "2", Memory: "8Gi", Labels: iso.Labels(map[string]string{"lifecycle": "spot"}), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "sim-on-demand", CPU: "6", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		confirm := iso.Labels(map[string]string{"role": "confirm"})
		// ConfirmBinder: the node fits two; the third waits. Explain's
		// profile: batch-prefers-spot outweighs the on-demand node's room.
		want := map[string]string{"c-1": "sim-confirm", "c-2": "sim-confirm", "c-3": "", "batch-1": "sim-spot", "web-1": "sim-on-demand"}
		createOneAtATime(ctx, want,
			sandbox.PodSpec{Namespace: ns, Name: "c-1", SchedulerName: "berth-confirmbinder", CPU: "1", NodeSelector: confirm, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "c-2", SchedulerName: "berth-confirmbinder", CPU: "1", NodeSelector: confirm, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "c-3", SchedulerName: "berth-confirmbinder", CPU: "1", NodeSelector: confirm, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "batch-1", SchedulerName: "berth-explain", CPU: "1", Labels: map[string]string{"tier": "batch"}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "web-1", SchedulerName: "berth-explain", CPU: "1", Labels: map[string]string{"tier": "web"}, NodeSelector: iso.Selector, Tolerations: iso.Tolerations})

		report := snapshotAndSimulate(ctx, "simulate-confirm-explain", suiteProfiles("berth-confirmbinder", "berth-explain"), "--mode", "replace")
		expectPlacedAsSimulated(ctx, ns, report)
	})
})
