package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

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

		file := filepath.Join(env.Dir, "simulate-agree.json.gz")
		out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", file, "--kubeconfig", env.Kubeconfig).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		root, err := sandbox.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.CommandContext(ctx, kubectlBerthBin(), "simulate", "--snapshot", file, "--mode", "replace", "-o", "json",
			"--config", filepath.Join(root, "manifests", "examples", "celpolicy.yaml"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		raw, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), stderr.String())
		var report struct {
			Pods []struct {
				Namespace, Name string
				Outcomes        []struct{ Node, Reason string }
			}
		}
		Expect(json.Unmarshal(raw, &report)).To(Succeed(), string(raw))
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
