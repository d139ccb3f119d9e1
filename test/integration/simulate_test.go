package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// simulateReport is the part of kubectl berth simulate -o json the specs
// read.
type simulateReport struct {
	Pods []struct {
		Namespace, Name string
		Outcomes        []struct{ Node, Reason string }
	}
}

// snapshotAndSimulate takes a snapshot of the suite's cluster (named name)
// with kubectl berth snapshot and simulates it with
// manifests/examples/celpolicy.yaml and args, as JSON.
func snapshotAndSimulate(ctx SpecContext, name string, args ...string) simulateReport {
	GinkgoHelper()
	file := filepath.Join(env.Dir, name+".json.gz")
	out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", file, "--kubeconfig", env.Kubeconfig).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	root, err := sandbox.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, kubectlBerthBin(), append([]string{"simulate", "--snapshot", file, "-o", "json",
		"--config", filepath.Join(root, "manifests", "examples", "celpolicy.yaml")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), stderr.String())
	var report simulateReport
	Expect(json.Unmarshal(raw, &report)).To(Succeed(), string(raw))
	return report
}

// kubectl berth simulate agrees with the scheduler: the suite's scheduler
// places a CELPolicy scenario (manifests/examples/celpolicy.yaml's profile),
// kubectl berth snapshot takes the cluster, and simulate --mode replace with
// the same config places every pod again, offline, on the same nodes. Each
// pod has one best node when it is placed, so there is no tie to tell apart.
var _ = Describe("kubectl berth simulate", func() {
	It("places a CELPolicy scenario again exactly where the scheduler placed it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "simulate-agree")
		// Tainted for this spec only, so that the snapshot's other pods,
		// placed again first (they are older), cannot take their room.
		taint := []v1.Taint{{Key: "berth.dev/simulate-spec", Value: "true", Effect: v1.TaintEffectNoSchedule}}
		toleration := []v1.Toleration{{Key: "berth.dev/simulate-spec", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
		mark := map[string]string{"berth.dev/simulate-spec": "true"}
		with := func(extra map[string]string) map[string]string {
			out := map[string]string{"berth.dev/simulate-spec": "true"}
			for k, v := range extra {
				out[k] = v
			}
			return out
		}
		createNodes(ctx,
			sandbox.NodeSpec{Name: "sim-spot", CPU: "2", Memory: "8Gi", Labels: with(map[string]string{"lifecycle": "spot"}), Taints: taint},
			sandbox.NodeSpec{Name: "sim-on-demand", CPU: "2", Memory: "8Gi", Labels: with(nil), Taints: taint},
			sandbox.NodeSpec{Name: "sim-gpu", CPU: "8", Memory: "8Gi", Labels: with(map[string]string{"nvidia.com/gpu.present": "true"}), Taints: taint},
			sandbox.NodeSpec{Name: "sim-old-kernel", CPU: "8", Memory: "8Gi", Labels: with(map[string]string{"berth.io/kernel": "5.15.0"}), Taints: taint},
		)
		// One at a time, each bound (or found unschedulable) before the
		// next: the order simulate's replace mode places them in.
		want := map[string]string{"batch-1": "sim-spot", "batch-2": "sim-spot", "batch-3": "sim-on-demand", "web-1": "sim-on-demand", "web-2": ""}
		for _, name := range []string{"batch-1", "batch-2", "batch-3", "web-1", "web-2"} {
			tier := strings.Split(name, "-")[0]
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "berth-celpolicy", CPU: "1",
				Labels: map[string]string{"tier": tier}, NodeSelector: mark, Tolerations: toleration})
			Expect(err).NotTo(HaveOccurred())
			if want[name] == "" {
				Eventually(sandbox.EventsFor(ctx, env.Client, ns, name, "FailedScheduling")).ShouldNot(BeEmpty())
				continue
			}
			Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, name)).Should(Equal(want[name]), "the scheduler places %s", name)
		}

		report := snapshotAndSimulate(ctx, "simulate-agree", "--mode", "replace")
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
		const key = "berth.dev/simulate-drain"
		taint := []v1.Taint{{Key: key, Value: "true", Effect: v1.TaintEffectNoSchedule}}
		toleration := []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
		mark := map[string]string{key: "true"}
		createKWOKNodes(ctx,
			sandbox.NodeSpec{Name: "drain-spot", CPU: "2", Memory: "8Gi", Labels: map[string]string{key: "true", "lifecycle": "spot"}, Taints: taint},
			sandbox.NodeSpec{Name: "drain-small", CPU: "2", Memory: "8Gi", Labels: mark, Taints: taint},
			sandbox.NodeSpec{Name: "drain-big", CPU: "8", Memory: "8Gi", Labels: mark, Taints: taint},
		)
		rs, err := sandbox.CreateReplicaSet(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "batch", SchedulerName: "berth-celpolicy", CPU: "1",
			Labels: map[string]string{"tier": "batch"}, NodeSelector: mark, Tolerations: toleration}, 2)
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

		report := snapshotAndSimulate(ctx, "simulate-drain", "--mode", "drain", "--nodes", "drain-spot")
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
