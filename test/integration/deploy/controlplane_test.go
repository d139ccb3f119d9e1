package deploy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/controlplane"
	kubeadmconfig "k8s.io/kubernetes/cmd/kubeadm/app/util/config"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/patches"
	"sigs.k8s.io/yaml"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// staticPod reads manifests/control-plane/kube-scheduler.yaml.
func staticPod() *v1.Pod {
	GinkgoHelper()
	objs, err := sandbox.ReadObjects(filepath.Join(root, "manifests", "control-plane", "kube-scheduler.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(objs).To(HaveLen(1))
	pod := &v1.Pod{}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, pod)).To(Succeed())
	Expect(pod.Spec.Containers).To(HaveLen(1))
	return pod
}

// imageUser is the USER of the Dockerfile's final stage: the user a container
// runs as when its Pod does not say.
func imageUser() (uid, gid uint32) {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	user := "0" // a stage without USER runs as root
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && strings.EqualFold(fields[0], "FROM"):
			user = "0"
		case len(fields) >= 2 && strings.EqualFold(fields[0], "USER"):
			user = fields[1]
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	u, g, hasGroup := strings.Cut(user, ":")
	uid64, err := strconv.ParseUint(u, 10, 32)
	Expect(err).NotTo(HaveOccurred(), "Dockerfile USER %q is not numeric", user)
	gid64 := uid64
	if hasGroup {
		gid64, err = strconv.ParseUint(g, 10, 32)
		Expect(err).NotTo(HaveOccurred(), "Dockerfile USER %q", user)
	}
	return uint32(uid64), uint32(gid64)
}

// effectiveUser is who the kubelet runs the container as: the container's
// runAsUser/runAsGroup, else the Pod's, else the image's.
func effectiveUser(pod *v1.Pod) (uid, gid uint32) {
	GinkgoHelper()
	uid, gid = imageUser()
	set := func(u, g *int64) {
		if u != nil {
			uid = uint32(*u)
		}
		if g != nil {
			gid = uint32(*g)
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		set(psc.RunAsUser, psc.RunAsGroup)
	}
	if sc := pod.Spec.Containers[0].SecurityContext; sc != nil {
		set(sc.RunAsUser, sc.RunAsGroup)
	}
	return uid, gid
}

var _ = Describe("the control-plane static Pod", func() {
	It("is hardened as kubeadm's own manifest, and more", func() {
		pod := staticPod()
		sc := pod.Spec.Containers[0].SecurityContext
		Expect(sc).NotTo(BeNil())
		Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(sc.Capabilities).NotTo(BeNil())
		Expect(sc.Capabilities.Drop).To(ContainElement(v1.Capability("ALL")))
		Expect(sc.Capabilities.Add).To(BeEmpty())
		Expect(pod.Spec.SecurityContext).NotTo(BeNil())
		Expect(pod.Spec.SecurityContext.SeccompProfile).To(HaveValue(HaveField("Type", v1.SeccompProfileTypeRuntimeDefault)))
	})

	It("starts as its effective user, with exactly its flags and config, against kubeadm's root-owned 0600 kubeconfig, and becomes ready", func(ctx SpecContext) {
		pod := staticPod()
		uid, gid := effectiveUser(pod)
		ctr := pod.Spec.Containers[0]
		By(fmt.Sprintf("running as %d:%d, as the kubelet would", uid, gid))

		// The node's filesystem, in a scratch directory: each hostPath volume is a path
		// under it, mounted where the container sees it.
		nodeFS, err := os.MkdirTemp("", "berth-node-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, nodeFS)
		Expect(os.Chmod(nodeFS, 0o755)).To(Succeed())
		hostPaths := map[string]string{}
		for _, vol := range pod.Spec.Volumes {
			Expect(vol.HostPath).NotTo(BeNil(), "volume %s: only hostPath volumes in a static Pod", vol.Name)
			hostPaths[vol.Name] = filepath.Join(nodeFS, vol.HostPath.Path)
		}
		mounts := map[string]string{} // path in the container -> path in nodeFS
		for _, m := range ctr.VolumeMounts {
			mounts[m.MountPath] = hostPaths[m.Name]
		}
		// Longest mount first, so /etc/kubernetes/berth wins over /etc/kubernetes.
		paths := make([]string, 0, len(mounts))
		for p := range mounts {
			paths = append(paths, p)
		}
		sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
		inSandbox := func(s string) string {
			for _, p := range paths {
				s = strings.ReplaceAll(s, p, mounts[p])
			}
			return s
		}

		// What kubeadm writes: /etc/kubernetes/scheduler.conf, root-owned, 0600.
		conf := filepath.Join(nodeFS, "etc", "kubernetes", "scheduler.conf")
		Expect(os.MkdirAll(filepath.Dir(conf), 0o755)).To(Succeed())
		kubeconfig, err := os.ReadFile(env.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(conf, kubeconfig, 0o600)).To(Succeed())
		// As root (CI's own machines may run the suite so), the file is
		// root's and the scheduler runs as the pod's user. As any other
		// user (make test needs no privilege), this user stands in for
		// root on both sides: what is checked is that the pod's effective
		// user is the kubeconfig's owner, kubeadm's root.
		asRoot := os.Geteuid() == 0
		if asRoot {
			Expect(os.Chown(conf, 0, 0)).To(Succeed())
		} else {
			Expect(uid).To(BeZero(), "the pod must run as the owner of kubeadm's 0600 scheduler.conf, root")
		}
		// What the README's install step copies: the config, to /etc/kubernetes/berth.
		config, err := os.ReadFile(filepath.Join(root, "manifests", "control-plane", "scheduler-config.yaml"))
		Expect(err).NotTo(HaveOccurred())
		berthDir := filepath.Join(nodeFS, "etc", "kubernetes", "berth")
		Expect(os.MkdirAll(berthDir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(berthDir, "scheduler-config.yaml"), []byte(inSandbox(string(config))), 0o644)).To(Succeed())
		// The image's binary, where the image has it.
		Expect(ctr.Command).NotTo(BeEmpty())
		bin := filepath.Join(nodeFS, "image", ctr.Command[0])
		Expect(os.MkdirAll(filepath.Dir(bin), 0o755)).To(Succeed())
		Expect(copyFile(schedulerBin, bin, 0o755)).To(Succeed())
		for d := filepath.Dir(bin); d != nodeFS; d = filepath.Dir(d) {
			Expect(os.Chmod(d, 0o755)).To(Succeed())
		}

		args := make([]string, 0, len(ctr.Command)+len(ctr.Args))
		for _, a := range append(append([]string{}, ctr.Command[1:]...), ctr.Args...) {
			args = append(args, inSandbox(a))
		}
		logPath := filepath.Join(env.Dir, "control-plane.log")
		var p *sandbox.Process
		if asRoot {
			p, err = sandbox.StartProcessAs(bin, args, uid, gid, logPath)
		} else {
			By(fmt.Sprintf("not root: running as this user (uid %d), the kubeconfig's owner here, in place of root", os.Geteuid()))
			p, err = sandbox.StartProcess(bin, args, logPath)
		}
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.Stop)

		probe := ctr.ReadinessProbe
		Expect(probe).NotTo(BeNil())
		Expect(probe.HTTPGet).NotTo(BeNil())
		url := fmt.Sprintf("%s://%s:%s%s", strings.ToLower(string(probe.HTTPGet.Scheme)), probe.HTTPGet.Host, probe.HTTPGet.Port.String(), probe.HTTPGet.Path)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// The kubelet does not verify a probe's certificate either.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's HTTPS probe
		}}
		log := func() string {
			b, _ := os.ReadFile(logPath)
			return string(b)
		}
		Eventually(func() (int, error) {
			if p.Exited() {
				return 0, StopTrying("the scheduler exited").Wrap(fmt.Errorf("log:\n%s", log()))
			}
			resp, err := client.Get(url)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, nil
		}, 2*time.Minute, time.Second).Should(Equal(http.StatusOK), "readiness probe %s; scheduler log %s", url, logPath)
	})
})

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

var _ = Describe("the kubeadm patch", func() {
	It("turns kubeadm's generated kube-scheduler static Pod into Berth's, so that kubeadm upgrade keeps Berth", func() {
		cfg, err := kubeadmconfig.DefaultedStaticInitConfiguration()
		Expect(err).NotTo(HaveOccurred())
		generated, ok := controlplane.GetStaticPodSpecs(&cfg.ClusterConfiguration, &cfg.LocalAPIEndpoint, nil)[kubeadmconstants.KubeScheduler]
		Expect(ok).To(BeTrue())
		data, err := yaml.Marshal(&generated)
		Expect(err).NotTo(HaveOccurred())

		pm, err := patches.GetPatchManagerForPath(filepath.Join(root, "manifests", "control-plane", "kubeadm-patches"), patches.KnownTargets(), GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		target := &patches.PatchTarget{Name: kubeadmconstants.KubeScheduler, StrategicMergePatchObject: v1.Pod{}, Data: data}
		Expect(pm.ApplyPatchesToTarget(target)).To(Succeed())
		patched := &v1.Pod{}
		Expect(yaml.UnmarshalStrict(target.Data, patched)).To(Succeed())

		want := staticPod()
		got, wantCtr := patched.Spec.Containers[0], want.Spec.Containers[0]
		Expect(got.Image).To(Equal(wantCtr.Image))
		Expect(got.Command).To(Equal(wantCtr.Command))
		Expect(got.Args).To(Equal(wantCtr.Args))
		Expect(got.SecurityContext).To(Equal(wantCtr.SecurityContext))
		Expect(got.VolumeMounts).To(ConsistOf(wantCtr.VolumeMounts))
		Expect(patched.Spec.Volumes).To(ConsistOf(want.Spec.Volumes))
		Expect(patched.Spec.SecurityContext).To(Equal(want.Spec.SecurityContext))
	})
})
