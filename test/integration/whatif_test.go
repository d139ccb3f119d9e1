package integration

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

// whatIfReport is the part of kubectl berth simulate -o json these specs
// read.
type whatIfReport struct {
	Pods []struct {
		Namespace, Name, Change, Why string
		Outcomes                     []struct {
			Node, Reason string
			Preempted    bool
		}
	}
	Totals struct {
		Pending, NoProfile []int
		OtherSchedulers    []map[string]int
	}
	Warnings []string
}

// takeSnapshot writes a snapshot of the suite's cluster (kubectl berth
// snapshot) and returns its path.
func takeSnapshot(ctx SpecContext, name string) string {
	GinkgoHelper()
	file := filepath.Join(env.Dir, name+".json.gz")
	out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", file, "--kubeconfig", env.Kubeconfig).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return file
}

// simulateFile runs kubectl berth simulate -o json on file with args and
// returns its report, its exit code and its standard error.
func simulateFile(ctx SpecContext, file string, args ...string) (whatIfReport, int, string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, kubectlBerthBin(), append([]string{"simulate", "--snapshot", file, "-o", "json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred(), stderr.String())
	}
	var report whatIfReport
	if len(raw) > 0 {
		Expect(json.Unmarshal(raw, &report)).To(Succeed(), string(raw))
	}
	return report, code, stderr.String()
}

// outcomeOf returns the pod's outcomes in report.
func outcomeOf(report whatIfReport, ns, name string) (node, reason, change string) {
	GinkgoHelper()
	for _, p := range report.Pods {
		if p.Namespace == ns && p.Name == name {
			o := p.Outcomes[len(p.Outcomes)-1]
			return o.Node, o.Reason, p.Change
		}
	}
	Fail("no outcome for " + ns + "/" + name)
	return "", "", ""
}

// profileConfig writes a configuration with one profile of upstream's
// default plugins per name, and returns its path.
func profileConfig(file string, names ...string) string {
	GinkgoHelper()
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n")
	for _, n := range names {
		b.WriteString("- schedulerName: " + n + "\n")
	}
	path := filepath.Join(env.Dir, file)
	Expect(os.WriteFile(path, []byte(b.String()), 0o600)).To(Succeed())
	return path
}

// ageSnapshot rewrites the snapshot file as if it had been taken by ago
// earlier: its time and LoadAware's usage annotations' timestamps.
func ageSnapshot(file string, by time.Duration) {
	GinkgoHelper()
	f, err := os.Open(file)
	Expect(err).NotTo(HaveOccurred())
	snap, err := snapshot.Open(f)
	f.Close()
	Expect(err).NotTo(HaveOccurred())
	snap.Taken = metav1.NewTime(snap.Taken.Add(-by))
	for _, u := range snap.Items {
		v, ok := u.GetAnnotations()["berth.io/node-usage"]
		if u.GetKind() != "Node" || !ok {
			continue
		}
		var usage map[string]string
		Expect(json.Unmarshal([]byte(v), &usage)).To(Succeed())
		at, err := time.Parse(time.RFC3339, usage["timestamp"])
		Expect(err).NotTo(HaveOccurred())
		usage["timestamp"] = at.Add(-by).UTC().Format(time.RFC3339)
		aged, err := json.Marshal(usage)
		Expect(err).NotTo(HaveOccurred())
		a := u.GetAnnotations()
		a["berth.io/node-usage"] = string(aged)
		u.SetAnnotations(a)
	}
	out, err := os.Create(file)
	Expect(err).NotTo(HaveOccurred())
	zw := gzip.NewWriter(out)
	Expect(json.NewEncoder(zw).Encode(snap)).To(Succeed())
	Expect(zw.Close()).To(Succeed())
	Expect(out.Close()).To(Succeed())
}

// What-if on the inputs real clusters give: an old snapshot, a claim that
// waits for its first consumer, a pod being deleted, a configuration that
// no longer schedules the cluster's pods.
var _ = Describe("kubectl berth simulate on real clusters' inputs", func() {
	It("decides on a snapshot taken an hour ago as it did when fresh", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-aged")
		iso := isolated("berth.dev/whatif-aged")
		// By requests (loadaware-packing packs: MostAllocated) the small hot
		// node wins; its usage (3.9 of 4 CPUs) is over LoadAware's threshold.
		createNodes(ctx,
			sandbox.NodeSpec{Name: "aged-hot", CPU: "4", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "aged-cool", CPU: "16", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		annotateNode(ctx, "aged-hot", usageAnnotation("3900m", "1Gi"))
		annotateNode(ctx, "aged-cool", usageAnnotation("500m", "1Gi"))
		createOneAtATime(ctx, map[string]string{"api-1": "aged-cool"},
			sandbox.PodSpec{Namespace: ns, Name: "api-1", SchedulerName: "loadaware-packing", CPU: "1", Memory: "128Mi", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})

		file := takeSnapshot(ctx, "whatif-aged")
		config := suiteProfiles("loadaware-packing")
		report, code, stderr := simulateFile(ctx, file, "--config", config, "--mode", "replace")
		Expect(code).To(BeZero(), stderr)
		node, reason, _ := outcomeOf(report, ns, "api-1")
		Expect(node).To(Equal("aged-cool"), "fresh (%s)", reason)

		ageSnapshot(file, time.Hour)
		report, code, stderr = simulateFile(ctx, file, "--config", config, "--mode", "replace")
		Expect(code).To(BeZero(), stderr)
		node, reason, _ = outcomeOf(report, ns, "api-1")
		Expect(node).To(Equal("aged-cool"), "an hour later: the samples were a second old when the snapshot was taken (%s)", reason)
	})

	It("places a pod whose claim waits for its first consumer, the volume provisioned on the node chosen, without hanging", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-wffc")
		iso := isolated("berth.dev/whatif-wffc")
		createNodes(ctx, sandbox.NodeSpec{Name: "wffc-1", CPU: "4", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		_, err := env.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "whatif-wffc"},
			Provisioner: "disk.csi.example.com", VolumeBindingMode: &wffc}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.StorageV1().StorageClasses().Delete(ctx, "whatif-wffc", metav1.DeleteOptions{})).To(Succeed())
		})
		_, err = env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0"},
			Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("whatif-wffc"), AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// No profile of the suite's scheduler is named whatif-volumes: the
		// pod is pending, as a StatefulSet's first pod is before it is placed.
		_, err = sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "db-0", SchedulerName: "whatif-volumes", CPU: "1",
			Claim: "data-db-0", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Expect(err).NotTo(HaveOccurred())

		file := takeSnapshot(ctx, "whatif-wffc")
		report, code, stderr := simulateFile(ctx, file, "--config", profileConfig("whatif-volumes.yaml", "whatif-volumes"), "--mode", "pending", "--timeout", "3m")
		Expect(code).To(BeZero(), stderr)
		node, reason, _ := outcomeOf(report, ns, "db-0")
		Expect(node).To(Equal("wffc-1"), reason)
		Expect(report.Warnings).To(ContainElement(And(ContainSubstring("1 claims waiting for their first consumer were provisioned"), ContainSubstring(ns+"/data-db-0 on wffc-1"))))
	})

	It("places a pod whose GPU claim is made from a template again on the node with the device", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-dra")
		iso := isolated("berth.dev/whatif-dra")
		createNodes(ctx,
			sandbox.NodeSpec{Name: "dra-cpu", CPU: "8", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints},
			sandbox.NodeSpec{Name: "dra-gpu", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		_, err := env.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "whatif-gpu.example.com"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "whatif-gpu.example.com"`}}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-gpu-slice"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "whatif-gpu.example.com", NodeName: ptr.To("dra-gpu"),
				Pool:    resourcev1.ResourcePool{Name: "dra-gpu", Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.ResourceV1().ResourceSlices().Delete(ctx, "dra-gpu-slice", metav1.DeleteOptions{})).To(Succeed())
			Expect(env.Client.ResourceV1().DeviceClasses().Delete(ctx, "whatif-gpu.example.com", metav1.DeleteOptions{})).To(Succeed())
		})
		claimSpec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "whatif-gpu.example.com"}}}}}
		_, err = env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A ReplicaSet's pod would be made so; the claim is made as the
		// resourceclaim controller makes it (no kube-controller-manager
		// of the suite runs that controller).
		pod := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: "trainer", SchedulerName: "berth-packing", CPU: "1", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		pod, err = env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		claim, err := env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "trainer-gpu-",
			Annotations:     map[string]string{resourcev1.PodResourceClaimAnnotation: "gpu"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: claimSpec}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
		_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "trainer")).Should(Equal("dra-gpu"), "the scheduler allocates the claim and binds the pod to the node with the device")

		file := takeSnapshot(ctx, "whatif-dra")
		report, code, stderr := simulateFile(ctx, file, "--config", suiteProfiles("berth-packing"), "--mode", "replace", "--fail-on", "pending")
		node, reason, _ := outcomeOf(report, ns, "trainer")
		Expect(node).To(Equal("dra-gpu"), "placed again on the node with the device (%s)", reason)
		Expect(code).To(BeZero(), stderr)
	})

	It("places a young critical pod before the old pod it kept pending, as the cluster did, instead of preempting it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-order")
		iso := isolated("berth.dev/whatif-order")
		createNodes(ctx, sandbox.NodeSpec{Name: "order-1", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		create := func(p sandbox.PodSpec) {
			GinkgoHelper()
			pod := sandbox.MakePod(p)
			pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0)) // no kubelet: a victim leaves at once
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// The node is full; app (old, low priority) waits; critical
		// (young, high priority) preempts the filler and leaves app
		// pending.
		create(sandbox.PodSpec{Namespace: ns, Name: "filler", SchedulerName: "berth-packing", CPU: "2", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "filler")).Should(Equal("order-1"))
		create(sandbox.PodSpec{Namespace: ns, Name: "app", SchedulerName: "berth-packing", CPU: "1500m", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Eventually(sandbox.EventsFor(ctx, env.Client, ns, "app", "FailedScheduling")).ShouldNot(BeEmpty())
		create(sandbox.PodSpec{Namespace: ns, Name: "critical", SchedulerName: "berth-packing", CPU: "1500m", PriorityClassName: "system-cluster-critical",
			NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Eventually(sandbox.NodeNameOf(ctx, env.Client, ns, "critical")).Should(Equal("order-1"), "critical preempts the filler")
		Consistently(sandbox.NodeNameOf(ctx, env.Client, ns, "app"), "2s").Should(BeEmpty(), "app stays pending")

		file := takeSnapshot(ctx, "whatif-order")
		report, code, stderr := simulateFile(ctx, file, "--config", suiteProfiles("berth-packing"), "--mode", "replace")
		Expect(code).To(BeZero(), stderr)
		node, reason, _ := outcomeOf(report, ns, "critical")
		Expect(node).To(Equal("order-1"), reason)
		var app struct{ Node, Reason string }
		var preempted bool
		for _, p := range report.Pods {
			if p.Namespace == ns && p.Name == "app" {
				app.Node, app.Reason = p.Outcomes[0].Node, p.Outcomes[0].Reason
				preempted = p.Outcomes[0].Preempted
			}
		}
		Expect(app.Node).To(BeEmpty(), "app pending, as in the cluster")
		Expect(preempted).To(BeFalse(), "not placed first and then preempted by the younger critical pod")
	})

	It("lets pods being deleted go, their room free, unless --keep-terminating", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-terminating")
		iso := isolated("berth.dev/whatif-terminating")
		createNodes(ctx, sandbox.NodeSpec{Name: "terminating-1", CPU: "2", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		createOneAtATime(ctx, map[string]string{"leaving": "terminating-1", "waiting": ""},
			sandbox.PodSpec{Namespace: ns, Name: "leaving", SchedulerName: "berth-packing", CPU: "2", NodeSelector: iso.Selector, Tolerations: iso.Tolerations},
			sandbox.PodSpec{Namespace: ns, Name: "waiting", SchedulerName: "berth-packing", CPU: "1", NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		// No kubelet runs: a graceful deletion leaves the pod Terminating,
		// holding its room, as a slow shutdown does in a cluster.
		Expect(env.Client.CoreV1().Pods(ns).Delete(ctx, "leaving", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(3600))})).To(Succeed())
		Eventually(func(g Gomega) {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "leaving", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())

		file := takeSnapshot(ctx, "whatif-terminating")
		config := suiteProfiles("berth-packing")
		report, code, stderr := simulateFile(ctx, file, "--config", config, "--mode", "pending")
		Expect(code).To(BeZero(), stderr)
		node, reason, _ := outcomeOf(report, ns, "waiting")
		Expect(node).To(Equal("terminating-1"), reason)
		Expect(report.Warnings).To(ContainElement(ContainSubstring("pods being deleted were left out, their room free")))

		report, code, stderr = simulateFile(ctx, file, "--config", config, "--mode", "pending", "--keep-terminating")
		Expect(code).To(BeZero(), stderr)
		node, _, _ = outcomeOf(report, ns, "waiting")
		Expect(node).To(BeEmpty(), "kept, the leaving pod holds the node's 2 CPUs")
	})

	It("fails a gate whose proposed configuration renames the profile the cluster's pods name, and one that has no profile for any pod", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-gate")
		iso := isolated("berth.dev/whatif-gate")
		createNodes(ctx, sandbox.NodeSpec{Name: "gate-1", CPU: "8", Memory: "8Gi", Labels: iso.Labels(nil), Taints: iso.Taints})
		for _, name := range []string{"job-1", "job-2"} {
			_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: name, SchedulerName: "whatif-gate", CPU: "1",
				NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "theirs", SchedulerName: "whatif-another-scheduler", CPU: "1",
			NodeSelector: iso.Selector, Tolerations: iso.Tolerations})
		Expect(err).NotTo(HaveOccurred())

		file := takeSnapshot(ctx, "whatif-gate")
		current, proposed := profileConfig("whatif-current.yaml", "whatif-gate"), profileConfig("whatif-proposed.yaml", "whatif-gate-renamed")
		report, code, stderr := simulateFile(ctx, file, "--config", current, "--config", proposed, "--mode", "pending", "--fail-on", "newly-pending")
		Expect(code).To(Equal(3), "renamed profile: the gate fails (%s)", stderr)
		for _, name := range []string{"job-1", "job-2"} {
			_, _, change := outcomeOf(report, ns, name)
			Expect(change).To(Equal("newly-pending"), name)
		}
		Expect(report.Totals.NoProfile).To(HaveLen(2))
		Expect(report.Totals.NoProfile[1]).To(BeNumerically(">=", 2))
		Expect(report.Totals.OtherSchedulers[0]).To(HaveKeyWithValue("whatif-another-scheduler", 1), "pods of another scheduler are counted")

		_, code, stderr = simulateFile(ctx, file, "--config", proposed, "--mode", "pending", "--fail-on", "pending")
		Expect(code).To(Equal(3), "no profile for any pod: a gate that checks nothing fails (%s)", stderr)
		Expect(stderr).To(ContainSubstring("has no profile for any pod of the snapshot"))
	})
})

// The snapshot reader's ClusterRole (manifests/snapshot-reader.yaml) is
// all a snapshot needs; without it the snapshot is incomplete and simulate
// refuses it unless told to accept it; -n is refused, never ignored.
var _ = Describe("kubectl berth snapshot's permissions", func() {
	It("takes a complete snapshot with manifests/snapshot-reader.yaml's ClusterRole alone, and an incomplete one without it that simulate refuses", func(ctx SpecContext) {
		ns := newNamespace(ctx, "whatif-reader")
		_, err := sandbox.CreatePod(ctx, env.Client, sandbox.PodSpec{Namespace: ns, Name: "pending", SchedulerName: "whatif-nobody-schedules-it"})
		Expect(err).NotTo(HaveOccurred())
		root, err := sandbox.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		raw, err := os.ReadFile(filepath.Join(root, "manifests", "snapshot-reader.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var role rbacv1.ClusterRole
		Expect(yaml.UnmarshalStrict(raw, &role)).To(Succeed())
		role.Name = "whatif-snapshot-reader"
		_, err = env.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "whatif-snapshot-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "whatif-reader"}}}
		_, err = env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})).To(Succeed())
			Expect(env.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})).To(Succeed())
		})
		reader, err := env.UserKubeconfig("whatif-reader", nil, "", "kubeconfig-whatif-reader")
		Expect(err).NotTo(HaveOccurred())
		nobody, err := env.UserKubeconfig("whatif-nobody", nil, "", "kubeconfig-whatif-nobody")
		Expect(err).NotTo(HaveOccurred())

		readable := filepath.Join(env.Dir, "whatif-reader.json.gz")
		Eventually(func(g Gomega) {
			out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", readable, "--kubeconfig", reader).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			f, err := os.Open(readable)
			g.Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			snap, err := snapshot.Open(f)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(snap.Incomplete()).To(BeEmpty(), "the role grants everything a snapshot reads (RBAC may take a moment to see the binding)")
			g.Expect(snap.Counts["pods"]).To(BeNumerically(">", 0))
		}).Should(Succeed())

		partial := filepath.Join(env.Dir, "whatif-nobody.json.gz")
		out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", partial, "--kubeconfig", nobody).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("incomplete: simulate refuses it"))
		config := profileConfig("whatif-default.yaml", "default-scheduler")
		_, code, stderr := simulateFile(ctx, partial, "--config", config)
		Expect(code).To(Equal(1), stderr)
		Expect(stderr).To(And(ContainSubstring("is incomplete ("), ContainSubstring("pods: not readable with these credentials")))
		_, code, stderr = simulateFile(ctx, partial, "--config", config, "--allow-partial-snapshot")
		Expect(code).To(BeZero(), stderr)

		out, err = exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", partial, "--kubeconfig", reader, "-n", "default").CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring(`--namespace "default": a snapshot holds every namespace`))
	})
})

// A snapshot keeps only what scheduling reads: taken of a cluster whose
// objects carry secrets and addresses where scheduling never looks, the
// file holds none of them, and what scheduling reads is still there.
var _ = Describe("kubectl berth snapshot, minimal by default", func() {
	It("leaves out annotations, pod templates, addresses, volume servers and StorageClass parameters, and keeps what scheduling reads", func(ctx SpecContext) {
		const secret, server = "s3cr3t-whatif", "nfs.whatif.example"
		ns := newNamespace(ctx, "whatif-minimal")
		p := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: "web-1", SchedulerName: "whatif-nobody-schedules-it", CPU: "1",
			Annotations: map[string]string{"kapp.k14s.io/original": `{"env":"` + secret + `"}`, "team.example/tier": "gold", "explain.berth.dev/request": "true"}})
		p.Spec.HostAliases = []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"db." + server}}}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", Value: secret}}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: server, Path: "/exports/web"}}}}
		_, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		template := sandbox.MakePod(sandbox.PodSpec{Namespace: ns, Name: "unused", CPU: "1", Labels: map[string]string{"app": "whatif-minimal"}})
		template.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", Value: secret}}
		_, err = env.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "whatif-minimal"}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "whatif-minimal"}}, Spec: template.Spec}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "whatif-minimal"},
			Provisioner: "disk.csi.example.com", Parameters: map[string]string{"csi.storage.k8s.io/provisioner-secret-name": secret}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = env.Client.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "whatif-minimal-nfs"},
			Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
				PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: server, Path: "/exports/pv"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.StorageV1().StorageClasses().Delete(ctx, "whatif-minimal", metav1.DeleteOptions{})).To(Succeed())
			Expect(env.Client.CoreV1().PersistentVolumes().Delete(ctx, "whatif-minimal-nfs", metav1.DeleteOptions{})).To(Succeed())
		})

		file := filepath.Join(env.Dir, "whatif-minimal.json")
		out, err := exec.CommandContext(ctx, kubectlBerthBin(), "snapshot", file, "--kubeconfig", env.Kubeconfig, "--keep-annotation", "team.example/tier").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		raw, err := os.ReadFile(file)
		Expect(err).NotTo(HaveOccurred())
		for _, leak := range []string{secret, server, "10.9.9.9", "kapp.k14s.io", "/exports/"} {
			Expect(string(raw)).NotTo(ContainSubstring(leak))
		}
		for _, kept := range []string{`"team.example/tier":"gold"`, `"explain.berth.dev/request":"true"`, `"matchLabels":{"app":"whatif-minimal"}`, `"provisioner":"disk.csi.example.com"`, `"name":"web-1"`} {
			Expect(string(raw)).To(ContainSubstring(kept))
		}
	})
})
