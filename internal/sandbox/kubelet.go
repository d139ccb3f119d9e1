package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Kubelets stands in for the kubelets' resource metrics endpoint: each node
// given to Serve gets an HTTPS server on the host's end of the sandbox
// network, published in the Node's status as a kubelet publishes itself
// (InternalIP and status.daemonEndpoints.kubeletEndpoint.Port), that serves
// GET /metrics/resource in the kubelet's Prometheus text format: a
// cumulative node_cpu_usage_seconds_total that advances at the CPU usage set
// for the node, and node_memory_working_set_bytes, each with the time of the
// scrape. metrics-server computes a node's CPU usage from two scrapes, so a
// node appears in the metrics API after its second.
type Kubelets struct {
	ip string
	// now is the clock of the scrapes (time.Now; tests set it).
	now   func() time.Time
	mu    sync.Mutex
	nodes map[string]*kubeletEndpoint
}

type kubeletEndpoint struct {
	srv *httptest.Server
	// cpu is the usage in cores, memory the working set in bytes.
	cpu    float64
	memory int64
	// cumulative is node_cpu_usage_seconds_total at the last scrape, at lastScrape.
	cumulative float64
	lastScrape time.Time
	scrapes    int
}

// NewKubelets serves kubelet endpoints on ip (a Netns's HostIP).
func NewKubelets(ip string) *Kubelets {
	return &Kubelets{ip: ip, now: time.Now, nodes: map[string]*kubeletEndpoint{}}
}

// Serve starts node's endpoint reporting cpu and memory (quantities, e.g.
// "1500m", "2Gi") and publishes it in the Node's status.
func (k *Kubelets) Serve(ctx context.Context, c kubernetes.Interface, node, cpu, memory string) error {
	lis, err := net.Listen("tcp", net.JoinHostPort(k.ip, "0"))
	if err != nil {
		return fmt.Errorf("kubelet endpoint of %s: %w", node, err)
	}
	// A kubelet that has run for a while: metrics-server drops a node whose
	// cumulative CPU is 0.
	e := &kubeletEndpoint{cumulative: 1000}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics/resource", func(w http.ResponseWriter, _ *http.Request) { k.scrape(w, e) })
	e.srv = httptest.NewUnstartedServer(mux)
	_ = e.srv.Listener.Close()
	e.srv.Listener = lis
	e.srv.StartTLS()

	k.mu.Lock()
	if old := k.nodes[node]; old != nil {
		old.srv.Close()
	}
	k.nodes[node] = e
	k.mu.Unlock()
	if err := k.SetUsage(node, cpu, memory); err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses":       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: k.ip}, {Type: v1.NodeHostName, Address: node}},
		"daemonEndpoints": v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(lis.Addr().(*net.TCPAddr).Port)}},
	}})
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("publishing the kubelet endpoint of %s: %w", node, err)
	}
	return nil
}

// SetUsage changes what node's endpoint reports from its next scrape on.
func (k *Kubelets) SetUsage(node, cpu, memory string) error {
	c, err := resource.ParseQuantity(cpu)
	if err != nil {
		return fmt.Errorf("cpu of %s: %w", node, err)
	}
	m, err := resource.ParseQuantity(memory)
	if err != nil {
		return fmt.Errorf("memory of %s: %w", node, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.nodes[node]
	if e == nil {
		return fmt.Errorf("no kubelet endpoint for node %s", node)
	}
	e.cpu, e.memory = c.AsApproximateFloat64(), m.Value()
	return nil
}

// Scrapes is how many times node's endpoint was scraped.
func (k *Kubelets) Scrapes(node string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.nodes[node]; e != nil {
		return e.scrapes
	}
	return 0
}

// Close stops every endpoint.
func (k *Kubelets) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for n, e := range k.nodes {
		e.srv.Close()
		delete(k.nodes, n)
	}
}

// scrape advances the counter at the usage set now: the usage metrics-server
// computes from two scrapes is then the one set before the second.
func (k *Kubelets) scrape(w http.ResponseWriter, e *kubeletEndpoint) {
	k.mu.Lock()
	now := k.now()
	if !e.lastScrape.IsZero() {
		e.cumulative += e.cpu * now.Sub(e.lastScrape).Seconds()
	}
	e.lastScrape = now
	e.scrapes++
	cumulative, memory := e.cumulative, e.memory
	k.mu.Unlock()

	ms := now.UnixMilli()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = fmt.Fprintf(w, `# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total %g %d
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes %d %d
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`, cumulative, ms, memory, ms)
}
