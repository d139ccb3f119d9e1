package framework

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MetricsServer stands in for metrics-server on loopback: it serves
// NodeMetricsList at /apis/metrics.k8s.io/v1beta1/nodes in the real wire
// format, with usage the test sets.
type MetricsServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	usage map[string]v1.ResourceList
	lists int
}

// StartMetricsServer starts the server; Close stops it.
func StartMetricsServer() *MetricsServer {
	m := &MetricsServer{usage: map[string]v1.ResourceList{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/metrics.k8s.io/v1beta1/nodes", m.serveNodes)
	m.srv = httptest.NewServer(mux)
	return m
}

// SetNodeUsage sets what the next lists report for node.
func (m *MetricsServer) SetNodeUsage(node, cpu, memory string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage[node] = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
}

// Lists is how many times the node metrics were listed.
func (m *MetricsServer) Lists() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists
}

// Close stops serving; clients then get connection errors.
func (m *MetricsServer) Close() { m.srv.Close() }

// Client returns a metrics.k8s.io client for this server.
func (m *MetricsServer) Client(*rest.Config) (metricsclient.Interface, error) {
	return metricsclient.NewForConfig(&rest.Config{Host: m.srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
}

func (m *MetricsServer) serveNodes(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	m.lists++
	names := make([]string, 0, len(m.usage))
	for n := range m.usage {
		names = append(names, n)
	}
	sort.Strings(names)
	list := metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{APIVersion: "metrics.k8s.io/v1beta1", Kind: "NodeMetricsList"}}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, n := range names {
		list.Items = append(list.Items, metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Timestamp:  now,
			Window:     metav1.Duration{Duration: 15 * time.Second},
			Usage:      m.usage[n].DeepCopy(),
		})
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
