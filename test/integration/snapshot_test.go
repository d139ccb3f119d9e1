package integration

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

// kubectl berth snapshot through the built binary against the suite's API
// server: what it holds, what it leaves out, and anonymization that keeps
// every reference the scheduler follows.
var _ = Describe("kubectl berth snapshot", func() {
	const image = "registry.example/snapshot-spec:1"

	// take runs the binary and returns the file's bytes (gunzipped) and its
	// standard error.
	take := func(ctx SpecContext, name string, args ...string) ([]byte, string) {
		GinkgoHelper()
		file := filepath.Join(env.Dir, name+".json.gz")
		cmd := exec.CommandContext(ctx, kubectlBerthBin(), append([]string{"snapshot", file, "--kubeconfig", env.Kubeconfig, "--page-size", "7"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		Expect(cmd.Run()).To(Succeed(), stderr.String())
		f, err := os.Open(file)
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		zr, err := gzip.NewReader(f)
		Expect(err).NotTo(HaveOccurred(), "a .gz name gets a gzip file")
		raw, err := io.ReadAll(zr)
		Expect(err).NotTo(HaveOccurred())
		return raw, stderr.String()
	}
	// ours are the spec's pods in a snapshot: the ones with its image.
	ours := func(f *snapshot.File) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, it := range f.Items {
			cs, _, _ := unstructured.NestedSlice(it.Object, "spec", "containers")
			if it.GetKind() == "Pod" && len(cs) > 0 && cs[0].(map[string]any)["image"] == image {
				out = append(out, it)
			}
		}
		return out
	}
	nodeNamed := func(f *snapshot.File, name string) *unstructured.Unstructured {
		for _, it := range f.Items {
			if it.GetKind() == "Node" && it.GetName() == name {
				return it
			}
		}
		return nil
	}

	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx, "snapshot-shop")
		createNodes(ctx, sandbox.NodeSpec{Name: "snap-worker-1.corp.example", CPU: "4", Memory: "8Gi",
			Labels: map[string]string{"kubernetes.io/hostname": "snap-worker-1.corp.example", "snap-pool": "gold-snap"}})
		for _, p := range []struct{ name, node string }{{"payments-7d9f-a1", "snap-worker-1.corp.example"}, {"payments-7d9f-a2", ""}} {
			pod := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: p.name, SchedulerName: "nobody-schedules-this", CPU: "1",
				Labels: map[string]string{"app": "payments-snap", "pod-template-generation": "1"}, NodeSelector: map[string]string{"snap-pool": "gold-snap"},
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"password":"hunter2"}`}})
			pod.Spec.NodeName = p.node
			pod.Spec.Containers[0].Image = image
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", Value: "s3cr3t-token"}}
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
	})

	It("holds every node and pod with what scheduling reads, names what the cluster does not serve, and leaves secrets out", func(ctx SpecContext) {
		raw, stderr := take(ctx, "snapshot")
		f, err := snapshot.Open(bytes.NewReader(raw))
		Expect(err).NotTo(HaveOccurred())
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Counts).To(HaveKeyWithValue("nodes", len(nodes.Items)), "every node, over several pages")
		Expect(f.Server.GitVersion).To(HavePrefix("v1.37."))
		Expect(ours(f)).To(HaveLen(2))
		for _, p := range ours(f) {
			Expect(p.GetNamespace()).To(Equal(ns))
			cs, _, _ := unstructured.NestedSlice(p.Object, "spec", "containers")
			cpu, _, _ := unstructured.NestedString(cs[0].(map[string]any), "resources", "requests", "cpu")
			Expect(cpu).To(Equal("1"), "%s keeps its requests", p.GetName())
		}
		Expect(nodeNamed(f, "snap-worker-1.corp.example")).NotTo(BeNil())
		for _, leak := range []string{"s3cr3t-token", "hunter2"} {
			Expect(string(raw)).NotTo(ContainSubstring(leak))
		}
		// Of managed fields, a pod keeps only what AdmissionFeedback reads:
		// an entry owning spec.nodeName (its author placed it) and the
		// kubelet's status writes, without their field sets.
		for _, o := range f.Items {
			for _, e := range o.GetManagedFields() {
				Expect(o.GetKind()).To(Equal("Pod"), "%s %s keeps managed fields", o.GetKind(), o.GetName())
				if e.Subresource == "status" {
					Expect(e.Manager).To(Equal("kubelet"))
					Expect(e.FieldsV1).To(BeNil())
				} else {
					Expect(e.FieldsV1.GetRawString()).To(Equal(`{"f:spec":{"f:nodeName":{}}}`), "%s keeps a managed-fields entry", o.GetName())
				}
			}
		}
		// The suite's API server serves neither native gangs nor metrics.k8s.io.
		Expect(f.Omitted).To(ContainElement(HaveField("Resource", "workloads.scheduling.k8s.io")))
		Expect(stderr).To(ContainSubstring("not in it: workloads.scheduling.k8s.io (not served by this cluster)"))
		Expect(stderr).To(MatchRegexp(`snapshot of a Kubernetes v1\.37\.\d+ cluster written to .*: \d+ namespaces, \d+ nodes, \d+ pods`))
	})

	It("anonymizes names and labels consistently: the pod still lands on, and selects, the same node", func(ctx SpecContext) {
		raw, _ := take(ctx, "snapshot-anonymized", "--anonymize", "--anonymize-labels")
		for _, name := range []string{ns, "snap-worker-1.corp.example", "payments-7d9f-a1", "payments-7d9f-a2", "payments-snap", "gold-snap", "snap-pool"} {
			Expect(string(raw)).NotTo(ContainSubstring(`"`+name+`"`), "the anonymized snapshot names %s", name)
		}
		f, err := snapshot.Open(bytes.NewReader(raw))
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Anonymized).To(Equal("names,labels"))
		pods := ours(f)
		Expect(pods).To(HaveLen(2))
		var bound *unstructured.Unstructured
		for _, p := range pods {
			Expect(p.GetNamespace()).To(Equal(pods[0].GetNamespace()))
			if n, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName"); n != "" {
				bound = p
			}
		}
		Expect(bound).NotTo(BeNil())
		// Only names and labels changed: still a Pod, with its requests and
		// its scheduler's name (a label value "1" renamed must not turn the
		// cpu request "1" into something else).
		var typed v1.Pod
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(bound.Object, &typed)).To(Succeed())
		Expect(typed.Spec.Containers[0].Resources.Requests.Cpu().String()).To(Equal("1"))
		Expect(typed.Spec.SchedulerName).To(Equal("nobody-schedules-this"))
		nodeName, _, _ := unstructured.NestedString(bound.Object, "spec", "nodeName")
		node := nodeNamed(f, nodeName)
		Expect(node).NotTo(BeNil(), "the bound pod's node %s is in the snapshot under the same new name", nodeName)
		Expect(node.GetLabels()).To(HaveKeyWithValue("kubernetes.io/hostname", nodeName))
		sel, _, _ := unstructured.NestedStringMap(bound.Object, "spec", "nodeSelector")
		Expect(sel).To(HaveLen(1))
		for k, v := range sel {
			Expect(node.GetLabels()).To(HaveKeyWithValue(k, v), "the pod's nodeSelector still selects its node")
		}
		var nsFound bool
		for _, it := range f.Items {
			nsFound = nsFound || (it.GetKind() == "Namespace" && it.GetName() == bound.GetNamespace())
		}
		Expect(nsFound).To(BeTrue(), "the pods' namespace is in the snapshot under its new name")
	})
})
