package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/test/integration/framework"
)

// One control plane and one scheduler for the whole suite (see framework.StartScheduler).
var (
	env       *sandbox.ControlPlane
	scheduler *framework.Scheduler
	// metricsServer is the real metrics-server, registered with the API
	// server's aggregation layer, for LoadAware's MetricsAPI source.
	metricsServer *sandbox.MetricsServer
	// hold holds pods at Permit for the binding-race specs.
	hold = &framework.Hold{}
	// controllers is kube-controller-manager with the ReplicaSet
	// controller (the AdmissionFeedback specs' pods are a real
	// ReplicaSet's); kwok plays the kubelets of the nodes created through
	// it (sandbox.KWOK), the other specs' hand-made nodes have none.
	controllers *sandbox.ControllerManager
	kwok        *sandbox.KWOK
)

// klog's flags (-v, -vmodule) on the test binary, to read the in-process
// scheduler's decisions when a spec fails.
func init() { klog.InitFlags(nil) }

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "Berth integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	env, err = sandbox.StartControlPlane()
	Expect(err).NotTo(HaveOccurred())
	root, err := sandbox.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	// The suite's own profiles plus every plugin's example config from manifests/.
	cfg, err := sandbox.PrepareConfig(env.Dir, "scheduler-config.yaml", env.Kubeconfig, false,
		filepath.Join("testdata", "scheduler-config.yaml"),
		filepath.Join(root, "manifests", "examples", "celpolicy.yaml"),
		filepath.Join(root, "manifests", "examples", "loadaware.yaml"),
		filepath.Join(root, "manifests", "examples", "confirmbinder.yaml"),
		filepath.Join(root, "manifests", "examples", "elasticquota.yaml"),
		filepath.Join(root, "manifests", "examples", "coscheduling.yaml"),
		filepath.Join(root, "manifests", "examples", "admissionfeedback.yaml"),
		filepath.Join(root, "manifests", "examples", "explain.yaml"),
	)
	Expect(err).NotTo(HaveOccurred())
	metricsServer, err = sandbox.StartMetricsServer(ctx, env, os.Getenv("BERTH_METRICS_SERVER_BIN"))
	Expect(err).NotTo(HaveOccurred())
	controllers, kwok, err = sandbox.StartRefusalSubstrate(ctx, env, os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("BERTH_KWOK_BIN"), os.Getenv("BERTH_KWOK_CRDS"), "127.0.0.1")
	Expect(err).NotTo(HaveOccurred())
	// The scheduler outlives this node's context: it is stopped in AfterSuite.
	// Its plugins are Berth's production ones, LoadAware reading metrics.k8s.io
	// with the scheduler's kubeconfig, plus the test-only TestHold.
	scheduler, err = framework.StartScheduler(context.Background(), cfg, runtime.Registry{
		framework.HoldName: hold.Factory,
	})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() {
	if scheduler != nil {
		GinkgoWriter.Printf("scheduler stopped: %v\n", scheduler.Stop())
	}
	if metricsServer != nil {
		metricsServer.Close()
	}
	if kwok != nil {
		kwok.Stop()
	}
	if controllers != nil {
		controllers.Stop()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
