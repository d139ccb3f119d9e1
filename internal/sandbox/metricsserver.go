package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MetricsServer is the resource metrics pipeline of a cluster: the real
// metrics-server (built by make envtest-bin from its own module) on a
// loopback port, registered with kube-apiserver's aggregation layer by its
// APIService v1beta1.metrics.k8s.io and Service, scraping the kubelet
// endpoints KWOK serves for its nodes (StartKWOK on 127.0.0.1). A client of
// metrics.k8s.io — the scheduler with its own kubeconfig — goes through the
// API server: kube-apiserver → aggregator → metrics-server → KWOK's
// kubelets.
//
// No privilege is needed. The Service is of type ExternalName, naming
// "localhost": the aggregator (without --enable-aggregator-routing) resolves
// such a Service to its name and the APIService's port and dials it, while
// an EndpointSlice, the other way to reach a process without kube-proxy,
// refuses a loopback address (an address of its own needed a network
// namespace, and root).
type MetricsServer struct {
	cp   *ControlPlane
	bin  string
	port int
	// client reads metrics.k8s.io through the API server, as the admin.
	client metricsclient.Interface
	proc   *Process
	starts int
}

// metricsServerHost is the ExternalName of metrics-server's Service, where
// it listens.
const metricsServerHost = "localhost"

// StartMetricsServer starts metrics-server (bin) for cp and waits until the
// API server serves metrics.k8s.io through it.
func StartMetricsServer(ctx context.Context, cp *ControlPlane, bin string) (*MetricsServer, error) {
	m, err := NewMetricsServer(ctx, cp, bin)
	if err != nil {
		return nil, err
	}
	if err := m.Start(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// NewMetricsServer prepares metrics-server for cp — its port, its
// registration with the aggregation layer — without starting it: KWOK can
// serve nodes first, which metrics-server then reports from its second
// scrape (10s after Start) instead of its third.
func NewMetricsServer(ctx context.Context, cp *ControlPlane, bin string) (*MetricsServer, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("metrics-server binary: %w (make envtest-bin builds it)", err)
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("a port for metrics-server: %w", err)
	}
	m := &MetricsServer{cp: cp, bin: bin, port: port}
	if m.client, err = metricsclient.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	objs, err := DecodeObjects([]byte(registration(port)))
	if err != nil {
		return nil, err
	}
	if err := cp.Apply(ctx, objs, false); err != nil {
		return nil, fmt.Errorf("registering metrics-server: %w", err)
	}
	return m, nil
}

// Start runs metrics-server (again, after Stop) and waits until the API
// server serves metrics.k8s.io through it.
func (m *MetricsServer) Start(ctx context.Context) error {
	if m.proc != nil && !m.proc.Exited() {
		return nil
	}
	m.starts++
	certDir := filepath.Join(m.cp.Dir, "metrics-server-certs")
	cmd := exec.Command(m.bin,
		"--kubeconfig="+m.cp.Kubeconfig,
		"--authentication-kubeconfig="+m.cp.Kubeconfig,
		"--authorization-kubeconfig="+m.cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(m.port),
		"--cert-dir="+certDir,
		// The flags of metrics-server's own manifests for a cluster whose
		// kubelets serve self-signed certificates.
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-insecure-tls",
		"--metric-resolution=10s",
		// metrics-server wants the scrape timeout below its resolution.
		"--kubelet-request-timeout=5s",
	)
	p, err := startProcess(cmd, filepath.Join(m.cp.Dir, fmt.Sprintf("metrics-server-%d.log", m.starts)))
	if err != nil {
		return err
	}
	m.proc = p
	return m.waitServing(ctx)
}

// waitServing polls a NodeMetrics list through the API server.
func (m *MetricsServer) waitServing(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if m.proc.Exited() {
			return false, fmt.Errorf("metrics-server exited; the end of its log:\n%s", logTail(m.LogPath()))
		}
		_, last = m.client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
		return fmt.Errorf("metrics.k8s.io not served through the API server: %w (metrics-server log: %s)", err, m.LogPath())
	}
	return nil
}

// logTailLines is how much of a process's log an error quotes.
const logTailLines = 20

// logTail is the last logTailLines lines of a log file.
func logTail(path string) string {
	n := logTailLines
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// NodeCPU is node's CPU usage in cores as the API server serves it through
// metrics-server (an error until metrics-server reports the node).
func (m *MetricsServer) NodeCPU(ctx context.Context, node string) (float64, error) {
	nm, err := m.client.MetricsV1beta1().NodeMetricses().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return nm.Usage.Cpu().AsApproximateFloat64(), nil
}

// Endpoint is where metrics-server listens, as the aggregator dials it.
func (m *MetricsServer) Endpoint() string {
	return net.JoinHostPort(metricsServerHost, strconv.Itoa(m.port))
}

// LogPath is the log of the running (or last) metrics-server process.
func (m *MetricsServer) LogPath() string {
	return filepath.Join(m.cp.Dir, fmt.Sprintf("metrics-server-%d.log", m.starts))
}

// Stop ends the metrics-server process (an outage: the APIService stays,
// so clients get the aggregator's 503). Start runs it again.
func (m *MetricsServer) Stop() {
	if m.proc != nil {
		m.proc.Stop()
	}
}

// Close stops metrics-server. The registration objects stay with the
// control plane.
func (m *MetricsServer) Close() { m.Stop() }

// registration is what metrics-server's manifests register, with a Service
// of type ExternalName naming metricsServerHost in place of the Service an
// EndpointSlice controller would fill in for its pod (see MetricsServer).
func registration(port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels:
    k8s-app: metrics-server
spec:
  type: ExternalName
  externalName: %s
  ports:
  - name: https
    port: %d
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels:
    k8s-app: metrics-server
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service:
    name: metrics-server
    namespace: kube-system
    port: %d
`, metricsServerHost, port, port)
}

// LogTail is the end of the running (or last) metrics-server's log, for a
// failing spec's message (CI keeps the output, not the files).
func (m *MetricsServer) LogTail() string { return logTail(m.LogPath()) }
