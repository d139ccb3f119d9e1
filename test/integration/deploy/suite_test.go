// Package deploy proves the manifests under manifests/: they decode strictly,
// and the second scheduler's RBAC is enough, and needed, to schedule. It runs
// bin/scheduler as a process (leader election ends a process that loses its
// lease), so it has a control plane of its own.
package deploy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

var (
	env *sandbox.ControlPlane
	// metricsServer is the real metrics-server behind the API server's
	// aggregation layer (the RBAC specs' hotNode).
	metricsServer *sandbox.MetricsServer
	// controllers runs the ReplicaSet controller, kwok the kubelets of
	// the AdmissionFeedback spec's nodes (see test/integration's suite).
	controllers  *sandbox.ControllerManager
	kwok         *sandbox.KWOK
	root         string
	schedulerBin string
)

func TestDeploy(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "Berth deploy manifests suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	root, err = sandbox.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	schedulerBin = os.Getenv("BERTH_SCHEDULER_BIN")
	if schedulerBin == "" {
		schedulerBin = filepath.Join(root, "bin", "scheduler")
	}
	_, err = os.Stat(schedulerBin)
	Expect(err).NotTo(HaveOccurred(), "bin/scheduler is needed: run `make test-integration`, which builds it")
	// GenericWorkload (beta, off by default in 1.37) for the gang-scheduling profile.
	env, err = sandbox.StartControlPlane("feature-gates=GenericWorkload=true", "runtime-config=scheduling.k8s.io/v1beta1=true")
	Expect(err).NotTo(HaveOccurred())
	metricsServer, err = sandbox.StartMetricsServer(ctx, env, os.Getenv("BERTH_METRICS_SERVER_BIN"))
	Expect(err).NotTo(HaveOccurred())
	controllers, kwok, err = sandbox.StartRefusalSubstrate(ctx, env, os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("BERTH_KWOK_BIN"), os.Getenv("BERTH_KWOK_CRDS"), "127.0.0.1")
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() {
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
