package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// metricsServerPort is metrics-server's secure port in its namespace (its
// manifests' 10250 would do as well: the address is its own).
const metricsServerPort = 4443

// MetricsServer is the resource metrics pipeline of a cluster: the real
// metrics-server (built by make envtest-bin from its own module) in a
// network namespace of its own, registered with kube-apiserver's
// aggregation layer by its APIService v1beta1.metrics.k8s.io, Service and
// EndpointSlice as in a cluster, scraping the kubelet endpoints KWOK serves
// for its nodes (StartKWOK on Netns.HostIP). A client of metrics.k8s.io —
// the scheduler with its own kubeconfig — goes through the API server:
// kube-apiserver → aggregator → metrics-server → KWOK's kubelets.
type MetricsServer struct {
	// Netns holds metrics-server's address; its HostIP is the host's,
	// where metrics-server reaches KWOK.
	Netns *Netns

	cp         *ControlPlane
	bin        string
	kubeconfig string
	// apiLis forwards metrics-server's connections to kube-apiserver, which
	// listens on loopback only, from the host's end of the veth pair.
	apiLis net.Listener
	// client reads metrics.k8s.io through the API server, as the admin.
	client metricsclient.Interface
	proc   *Process
	starts int
}

// StartMetricsServer starts metrics-server (bin) for cp and waits until the
// API server serves metrics.k8s.io through it. It needs root (CanCreateNetns).
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

// NewMetricsServer prepares metrics-server for cp — its network namespace,
// its kubeconfig, its registration with the aggregation layer — without
// starting it: KWOK can serve nodes on Netns.HostIP first, which
// metrics-server then reports from its second scrape (10s after Start)
// instead of its third.
func NewMetricsServer(ctx context.Context, cp *ControlPlane, bin string) (_ *MetricsServer, err error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("metrics-server binary: %w (make envtest-bin builds it)", err)
	}
	ns, err := CreateNetns()
	if err != nil {
		return nil, err
	}
	m := &MetricsServer{Netns: ns, cp: cp, bin: bin}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.client, err = metricsclient.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if m.apiLis, err = net.Listen("tcp", net.JoinHostPort(ns.HostIP, "0")); err != nil {
		return nil, err
	}
	api, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("the API server's address: %w", err)
	}
	if api.Host == "" {
		return nil, fmt.Errorf("the API server's address %q has no host", cp.Config.Host)
	}
	go forward(m.apiLis, api.Host)
	if m.kubeconfig, err = m.writeKubeconfig(); err != nil {
		return nil, err
	}
	objs, err := DecodeObjects([]byte(registration(ns.NSIP)))
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
	cmd := m.Netns.Command(m.bin,
		"--kubeconfig="+m.kubeconfig,
		"--authentication-kubeconfig="+m.kubeconfig,
		"--authorization-kubeconfig="+m.kubeconfig,
		"--bind-address="+m.Netns.NSIP,
		"--secure-port="+strconv.Itoa(metricsServerPort),
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

// Endpoint is metrics-server's address, the one its EndpointSlice names.
func (m *MetricsServer) Endpoint() string {
	return net.JoinHostPort(m.Netns.NSIP, strconv.Itoa(metricsServerPort))
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

// Close stops metrics-server and removes the network namespace. The
// registration objects stay with the control plane.
func (m *MetricsServer) Close() {
	m.Stop()
	if m.apiLis != nil {
		_ = m.apiLis.Close()
	}
	_ = m.Netns.Delete()
}

// writeKubeconfig writes the control plane's admin kubeconfig pointed at the
// forwarder (the serving certificate names localhost).
func (m *MetricsServer) writeKubeconfig() (string, error) {
	cfg, err := clientcmd.LoadFromFile(m.cp.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + m.apiLis.Addr().String()
		c.TLSServerName = "localhost"
	}
	path := filepath.Join(m.cp.Dir, "metrics-server.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// registration is what metrics-server's manifests register, with the
// endpoint an EndpointSlice controller would write for its pod.
func registration(ip string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels:
    k8s-app: metrics-server
spec:
  ports:
  - name: https
    port: 443
    protocol: TCP
    targetPort: https
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server-sandbox
  namespace: kube-system
  labels:
    kubernetes.io/service-name: metrics-server
    endpointslice.kubernetes.io/managed-by: sandbox.berth.dev
addressType: IPv4
endpoints:
- addresses: [%q]
  conditions:
    ready: true
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
    port: 443
`, ip, metricsServerPort)
}

// forward copies each connection accepted on lis to target and back, until
// lis is closed.
func forward(lis net.Listener, target string) {
	for {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = in.Close() }()
			out, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer func() { _ = out.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}
