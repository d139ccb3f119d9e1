// Package bench runs upstream's scheduler_perf harness
// (k8s.io/kubernetes/test/integration/scheduler_perf) with Berth's plugin
// registry: the same workloads under the default profile and under Berth's
// profiles, in one process. See docs/benchmarks.md and `make bench`.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	_ "k8s.io/component-base/logs/json/register" // the harness's logging flags
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's args in the scheduler's config scheme
	"github.com/berth-scheduler/berth/pkg/plugins/coscheduling"
	"github.com/berth-scheduler/berth/pkg/plugins/elasticquota"
	"github.com/berth-scheduler/berth/pkg/registry"
)

// The CRDs Berth reads, as users install them.
const (
	elasticQuotaCRD = "../../manifests/crds/scheduling.x-k8s.io_elasticquotas.yaml"
	podGroupCRD     = "../../manifests/crds/scheduling.x-k8s.io_podgroups.yaml"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	registerEvaluations()
	os.Exit(m.Run())
}

// BenchmarkPerfScheduling runs config/performance-config.yaml; select sizes
// with -perf-scheduling-label-filter (smoke, quick, full).
func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "config/performance-config.yaml", "berth", benchRegistry())
}

// benchRegistry is Berth's registry, with ElasticQuota and Coscheduling
// installing their CRDs into the harness's API server first (the harness
// starts the scheduler before any workload op could create them).
func benchRegistry() frameworkruntime.Registry {
	r := registry.Plugins()
	withCRD := func(path string, factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
		return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			if err := installCRD(ctx, h.KubeConfig(), path); err != nil {
				return nil, fmt.Errorf("installing the CRD %s: %w", path, err)
			}
			return factory(ctx, obj, h)
		}
	}
	r[elasticquota.Name] = withCRD(elasticQuotaCRD, elasticquota.New)
	r[coscheduling.Name] = withCRD(podGroupCRD, coscheduling.New)
	return r
}

func installCRD(ctx context.Context, cfg *rest.Config, path string) error {
	raw, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return err
	}
	// The file is one document after the generated header.
	doc := string(raw)
	if i := strings.Index(doc, "\n---\n"); i >= 0 {
		doc = doc[i+len("\n---\n"):]
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
		return err
	}
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := crd.Spec.Group + "/" + crd.Spec.Versions[0].Name
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, nil //nolint:nilerr // not served yet: poll again
		}
		for _, r := range list.APIResources {
			if r.Name == crd.Spec.Names.Plural {
				return true, nil
			}
		}
		return false, nil
	})
}
