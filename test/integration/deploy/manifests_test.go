package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's args in the config scheme
	"github.com/berth-scheduler/berth/internal/sandbox"
)

// schedulerConfigKey is the ConfigMap key that holds a KubeSchedulerConfiguration.
const schedulerConfigKey = "scheduler-config.yaml"

// loadSchedulerConfig decodes a KubeSchedulerConfiguration file with the
// scheduler's own loader (strict: an unknown field is an error) and runs
// upstream's validation, as `--config` does.
func loadSchedulerConfig(path string) error {
	_, err := options.LoadConfigFromFile(klog.Background(), path)
	return err
}

// dryRun has the API server validate objects without storing them, strictly.
// Namespaces are created for real: dry-run objects in them need them to exist.
func dryRun(ctx SpecContext, objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(env.Apply(ctx, []*unstructured.Unstructured{o}, o.GetKind() != "Namespace")).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
}

var _ = Describe("manifests/", func() {
	It("decodes strictly: scheduler configs through the scheduler's loader, everything else by server-side dry-run", func(ctx SpecContext) {
		var files []string
		Expect(filepath.WalkDir(filepath.Join(root, "manifests"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == "kubeadm-patches" {
				return filepath.SkipDir // patches, not objects: the control-plane spec applies them with kubeadm's code
			}
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
				files = append(files, p)
			}
			return err
		})).To(Succeed())
		Expect(files).NotTo(BeEmpty())

		var others []*unstructured.Unstructured
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue // not an API object; rendered by the kustomize spec
			}
			objs, err := sandbox.ReadObjects(f)
			Expect(err).NotTo(HaveOccurred(), f)
			for _, o := range objs {
				switch o.GetKind() {
				case "KubeSchedulerConfiguration":
					Expect(loadSchedulerConfig(f)).To(Succeed(), f)
					continue
				case "CustomResourceDefinition":
					continue // installed by envtest from manifests/crds
				case "ConfigMap":
					if data, ok, _ := unstructured.NestedString(o.Object, "data", schedulerConfigKey); ok {
						tmp := filepath.Join(env.Dir, o.GetName()+"-"+schedulerConfigKey)
						Expect(os.WriteFile(tmp, []byte(data), 0o600)).To(Succeed())
						Expect(loadSchedulerConfig(tmp)).To(Succeed(), "%s: ConfigMap %s", f, o.GetName())
					}
				}
				others = append(others, o)
			}
		}
		// Namespaces first.
		sort.SliceStable(others, func(i, j int) bool { return others[i].GetKind() == "Namespace" && others[j].GetKind() != "Namespace" })
		dryRun(ctx, others)
	})
})
