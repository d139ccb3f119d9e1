package sandbox

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// scrape GETs node's /metrics/resource as metrics-server does (HTTPS, the
// kubelet's certificate not verified) and parses it with Prometheus' parser.
func scrape(t *testing.T, port int32) (cpu, memory float64, cpuTime, memTime model.Time) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a stand-in kubelet's self-signed certificate
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics/resource", port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q, want the Prometheus text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	c, m := families["node_cpu_usage_seconds_total"], families["node_memory_working_set_bytes"]
	if c == nil || m == nil || c.GetType().String() != "COUNTER" || m.GetType().String() != "GAUGE" {
		t.Fatalf("want the counter node_cpu_usage_seconds_total and the gauge node_memory_working_set_bytes, got %v", families)
	}
	cm, mm := c.GetMetric()[0], m.GetMetric()[0]
	return cm.GetCounter().GetValue(), mm.GetGauge().GetValue(), model.Time(cm.GetTimestampMs()), model.Time(mm.GetTimestampMs())
}

func TestKubeletEndpointServesUsageAsTheKubeletDoes(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	k := NewKubelets("127.0.0.1")
	defer k.Close()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	k.now = func() time.Time { return now }
	if err := k.Serve(ctx, c, "n1", "1500m", "2Gi"); err != nil {
		t.Fatal(err)
	}
	node, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 || len(node.Status.Addresses) == 0 || node.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: "127.0.0.1"}) {
		t.Fatalf("node status publishes %+v, port %d; want InternalIP 127.0.0.1 and the endpoint's port", node.Status.Addresses, port)
	}

	cpu1, mem, t1, mt := scrape(t, port)
	if cpu1 <= 0 {
		t.Errorf("cumulative CPU %v: metrics-server drops a node whose counter is 0", cpu1)
	}
	if mem != 2*1024*1024*1024 || mt != t1 {
		t.Errorf("memory %v at %v, want 2Gi at the scrape's time %v", mem, mt, t1)
	}
	now = now.Add(10 * time.Second)
	cpu2, _, t2, _ := scrape(t, port)
	if !t2.After(t1) {
		t.Fatalf("timestamps %v then %v: they must advance", t1, t2)
	}
	// The rate metrics-server computes between two scrapes is the usage set.
	rate := (cpu2 - cpu1) / t2.Sub(t1).Seconds()
	if rate < 1.499 || rate > 1.501 {
		t.Errorf("rate between scrapes %.3f cores, want 1.5", rate)
	}
	if got := k.Scrapes("n1"); got != 2 {
		t.Errorf("Scrapes = %d, want 2", got)
	}
	if err := k.SetUsage("missing", "1", "1Gi"); err == nil {
		t.Error("SetUsage of a node without an endpoint: want an error")
	}
}
