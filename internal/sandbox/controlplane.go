// Package sandbox brings up a local cluster for `make demo`, `make
// race-report` and the integration suites alike: etcd and kube-apiserver
// (envtest, binaries built from the Go module proxy by `make envtest-bin`)
// with the aggregation layer configured, the real metrics-server registered
// with it (MetricsServer), stand-ins for what kubelets and controllers do
// (resource metrics endpoints, removing deleted pods, refusing admission,
// replacing a ReplicaSet's failed pods) and bin/scheduler as a process of
// its own. What only tests need (ginkgo helpers, the in-process scheduler
// with test plugins) stays in test/integration/framework.
package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is one running control plane.
type ControlPlane struct {
	env *envtest.Environment
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig file, for the scheduler.
	Kubeconfig string
	// Dir is a scratch directory removed by Stop.
	Dir string
	// apiServer and etcd: the processes RestartAPIServer and RestartEtcd
	// started in place of envtest's (nil until then).
	apiServer, etcd *Process
}

// RepoRoot finds the repository root (the directory holding go.mod) from the
// test's working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// StartControlPlane starts etcd and kube-apiserver from $KUBEBUILDER_ASSETS
// and loads the CRDs under manifests/crds, if there are any. The API server's
// aggregation layer is on (front-proxy certificates in Dir), so an
// extension API server such as metrics-server can be registered.
//
// Nodes: the API server's TaintNodesByCondition admission plugin adds
// node.kubernetes.io/not-ready:NoSchedule to every new Node, and envtest runs
// no node lifecycle controller to remove it, so the suite disables that
// admission plugin; CreateNode then makes nodes Ready as a kubelet would.
//
// apiServerArgs are extra kube-apiserver flags, "name=value" (for example
// "feature-gates=GenericWorkload=true").
func StartControlPlane(apiServerArgs ...string) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test-integration`, which builds kube-apiserver and etcd into bin/k8s/<version>")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-envtest-")
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{ErrorIfCRDPathMissing: false}
	if crds := filepath.Join(root, "manifests", "crds"); dirExists(crds) {
		te.CRDDirectoryPaths = []string{crds}
	}
	// A loaded API server (the soak's thousand nodes) can take longer than
	// envtest's default 20s to drain on SIGTERM.
	te.ControlPlane.GetAPIServer().StopTimeout = time.Minute
	args := te.ControlPlane.GetAPIServer().Configure()
	args.Append("disable-admission-plugins", "TaintNodesByCondition")
	aggregation, err := aggregationArgs(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for _, a := range aggregation {
		args.Set(a[0], a[1])
	}
	for _, a := range apiServerArgs {
		name, value, _ := strings.Cut(a, "=")
		args.Append(name, value)
	}

	cfg, err := te.Start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	e := &ControlPlane{env: te, Config: cfg, Dir: dir}
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = e.Stop()
		return nil, err
	}
	user, err := te.AddUser(envtest.User{Name: "berth-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("adding the admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kubeconfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// ServiceAccountSigningKey is the private key the API server verifies
// ServiceAccount tokens with (envtest writes it into the API server's
// certificate directory): kube-controller-manager's token controller signs
// the tokens of kubernetes.io/service-account-token Secrets with it.
func (e *ControlPlane) ServiceAccountSigningKey() string {
	return filepath.Join(e.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key")
}

// Stop stops the control plane and removes the scratch directory.
func (e *ControlPlane) Stop() error {
	// Restarted processes are this package's, not envtest's: the API
	// server (either) stops before etcd (either), as envtest stops its own.
	if e.apiServer != nil {
		e.apiServer.Stop()
	}
	if e.etcd != nil {
		_ = e.env.ControlPlane.APIServer.Stop()
		e.etcd.Stop()
	}
	err := e.env.Stop()
	if rmErr := os.RemoveAll(e.Dir); err == nil {
		err = rmErr
	}
	return err
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// UserKubeconfig is a kubeconfig (for server, or the API server when "")
// authenticating as user in groups with a client certificate of the API
// server's CA: a ServiceAccount's identity ("system:serviceaccount:NS:NAME",
// groups system:serviceaccounts and system:serviceaccounts:NS), whose
// permissions are exactly what RBAC grants it, written to Dir/file.
func (e *ControlPlane) UserKubeconfig(user string, groups []string, server, file string) (string, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", user, err)
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return "", err
	}
	if server != "" {
		for _, c := range cfg.Clusters {
			c.Server = server
			c.TLSServerName = "localhost"
		}
	}
	path := filepath.Join(e.Dir, file)
	return path, clientcmd.WriteToFile(*cfg, path)
}
