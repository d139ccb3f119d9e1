package sandbox

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KWOK's node annotation: KWOK plays the kubelet of the nodes that carry it
// (and of no other node, so the suites' hand-made nodes are left alone).
const (
	KWOKNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	// NotReadyAnnotation set to "true" makes a KWOK node's kubelet report
	// Ready False (see kwok-stages.yaml); removing it makes the node Ready.
	NotReadyAnnotation = "sandbox.berth.dev/not-ready"
	// CrashLabel set to "true" on a pod makes its container exit 1 after
	// RunForAnnotation (default 2s): the pod ends Failed.
	CrashLabel = "sandbox.berth.dev/crash"
	// RunForAnnotation is how long a Job's pod runs before it Succeeds
	// (default 5s), a duration such as "30s".
	RunForAnnotation = "sandbox.berth.dev/run-for"
)

// Kubelet admission refusals, in the kubelet's words: its message is
// "Pod was rejected: " and the admit handler's.
const (
	// ReasonUnexpectedAdmissionError: a device plugin's allocation failed.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// ReasonOutOfCPU: the kubelet's own resource check found the node full
	// (another scheduler's pods, static pods).
	ReasonOutOfCPU = "OutOfcpu"
)

// kwokConfig sets KWOK's parallelism explicitly: a configuration file
// given with --config is not defaulted (zero workers, and KWOK's
// controllers refuse to start).
var kwokConfig = []byte(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 8
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 2
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
`)

//go:embed kwok-stages.yaml
var kwokStages []byte

//go:embed kwok-metrics.yaml
var kwokMetrics []byte

// The kubelet's resource metrics of KWOK's nodes (kwok-metrics.yaml): where
// metrics-server finds a node's, and the pod annotations that set a pod's
// usage (KWOK's documented names).
const (
	resourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"
	UsageCPUAnnotation            = "kwok.x-k8s.io/usage-cpu"
	UsageMemoryAnnotation         = "kwok.x-k8s.io/usage-memory"
	// usageNamespace holds the pods KWOK.SetUsage binds.
	usageNamespace = metav1.NamespaceSystem
)

// refusingNodeLabel names the node a refusal Stage is for.
const refusingNodeLabel = "sandbox.berth.dev/refusing-node"

var stageGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}

// KWOK is the kubelets of a sandbox's simulated nodes: KWOK (built by make
// envtest-bin from its own module) with the Stages of kwok-stages.yaml:
// nodes Ready with Lease heartbeats, pods that start, complete (Jobs),
// crash on request and finish graceful deletions, and, per node on
// request, admission refusals and NotReady; and with the Metric of
// kwok-metrics.yaml, each node's resource metrics endpoint, which the real
// metrics-server scrapes.
type KWOK struct {
	*Process
	cp      *ControlPlane
	dyn     dynamic.Interface
	logPath string
	// endpoint is where KWOK serves the nodes' kubelet endpoints
	// (host:port), published in each node's status.
	endpoint string
}

// StartKWOK installs KWOK's CRDs from crdDir (make envtest-bin copies them
// from KWOK's module), creates the sandbox's Stages, Metric and
// ClusterResourceUsage and runs bin against cp. KWOK serves its nodes'
// kubelet endpoints (the resource metrics among them) on ip, which every
// KWOK node publishes as its InternalIP: "127.0.0.1", where a
// MetricsServer scrapes them.
func StartKWOK(ctx context.Context, cp *ControlPlane, bin, crdDir, ip string) (*KWOK, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kwok binary: %w (make envtest-bin builds it)", err)
	}
	var crds []string
	for _, kind := range []string{"stages", "metrics", "clusterresourceusages"} {
		crds = append(crds, filepath.Join(crdDir, "kwok.x-k8s.io_"+kind+".yaml"))
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing KWOK's CRDs from %s: %w (make envtest-bin copies them)", crdDir, err)
	}
	for _, o := range []struct {
		file string
		raw  []byte
	}{{"kwok-stages.yaml", kwokStages}, {"kwok-metrics.yaml", kwokMetrics}} {
		objs, err := DecodeObjects(o.raw)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", o.file, err)
		}
		if err := cp.Apply(ctx, objs, false); err != nil {
			return nil, fmt.Errorf("creating the objects of %s: %w", o.file, err)
		}
	}
	port, err := FreePort(ip)
	if err != nil {
		return nil, fmt.Errorf("a port for KWOK's kubelet endpoints on %s: %w", ip, err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(cp.Dir, "kwok.yaml")
	if err := os.WriteFile(conf, kwokConfig, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cp.Dir, "kwok.log")
	p, err := StartProcess(bin, []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation + "=" + kwokNodeValue,
		"--enable-crds=Stage,Metric,ClusterResourceUsage",
		// Room for the pods of a thousand nodes (the default is a /24).
		"--cidr=10.64.0.0/10",
		// Every node's kubelet endpoint: KWOK serves them all on one
		// port (HTTPS with a self-signed certificate, as kubelets serve;
		// metrics-server runs with --kubelet-insecure-tls).
		"--node-ip=" + ip,
		"--node-port=" + strconv.Itoa(port),
		"--server-address=" + net.JoinHostPort(ip, strconv.Itoa(port)),
		"--node-lease-duration-seconds=40",
		// Not ~/.kwok/kwok.yaml: every stage is a Stage object.
		"--config=" + conf,
	}, logPath)
	if err != nil {
		return nil, err
	}
	k := &KWOK{Process: p, cp: cp, dyn: dyn, logPath: logPath, endpoint: net.JoinHostPort(ip, strconv.Itoa(port))}
	if err := k.waitServing(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return k, nil
}

// waitServing waits until KWOK's server answers /healthz (the port was free
// when chosen; another process may have taken it since, and KWOK exits).
func (k *KWOK) waitServing(ctx context.Context) error {
	// No proxy: the address is the sandbox's own (an HTTP_PROXY in the
	// environment would be used for it, loopback aside).
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if k.Exited() {
			return false, fmt.Errorf("kwok exited; the end of its log:\n%s", logTail(k.logPath))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+k.endpoint+"/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("KWOK's server at %s: %w (kwok log: %s)", k.endpoint, err, k.logPath)
	}
	return nil
}

// FreePort is a TCP port free on ip now (another process may take it
// before the caller listens on it).
func FreePort(ip string) (int, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

// Endpoint is where KWOK serves its nodes' kubelet endpoints (host:port).
func (k *KWOK) Endpoint() string { return k.endpoint }

// usagePodName is the name of the pod SetUsage binds to node.
func usagePodName(node string) string { return "node-usage-" + node }

// SetUsage makes node's kubelet report cpu and memory (quantities, e.g.
// "1500m", "2Gi") in use from its next scrape on, on top of what its other
// pods use: a pod in kube-system bound to node (requesting nothing,
// tolerating every taint), whose container uses that much
// (UsageCPUAnnotation, UsageMemoryAnnotation), is created or updated. A
// node's usage is its pods' sum, as a kubelet reports it: this one is what
// a pod that requests little but burns a lot does to a node.
// metrics-server computes CPU from two scrapes, so a node shows the new
// usage in the metrics API from its second scrape after the change.
func (k *KWOK) SetUsage(ctx context.Context, node, cpu, memory string) error {
	for _, q := range []string{cpu, memory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("usage of node %s: %w", node, err)
		}
	}
	pods := k.cp.Client.CoreV1().Pods(usageNamespace)
	ann := map[string]string{UsageCPUAnnotation: cpu, UsageMemoryAnnotation: memory}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	p, err := pods.Patch(ctx, usagePodName(node), types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded:
		return nil
	case err == nil: // ended (EndUsage): a new one
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replacing the ended usage pod of node %s: %w", node, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return fmt.Errorf("replacing the ended usage pod of node %s: %w", node, err)
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: usagePodName(node), Namespace: usageNamespace, Annotations: ann,
			Labels: map[string]string{"app.kubernetes.io/name": "sandbox-node-usage"}},
		Spec: v1.PodSpec{
			NodeName:                      node,
			Containers:                    []v1.Container{{Name: "usage", Image: "sandbox.berth.dev/usage"}},
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding the usage pod of node %s: %w", node, err)
	}
	return nil
}

// EndUsage ends the pod SetUsage bound to node as a crashed pod ends
// (Failed): the pod stays on the node, and its usage is no longer reported,
// as a kubelet reports none for a pod whose containers exited.
func (k *KWOK) EndUsage(ctx context.Context, node string) error {
	patch := []byte(`{"status":{"phase":"Failed","reason":"Error"}}`)
	_, err := k.cp.Client.CoreV1().Pods(usageNamespace).Patch(ctx, usagePodName(node), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("ending the usage pod of node %s: %w", node, err)
	}
	return nil
}

// DeleteNode deletes node and the pod SetUsage bound to it (no pod garbage
// collector runs in the suites).
func (k *KWOK) DeleteNode(ctx context.Context, node string) error {
	err := k.cp.Client.CoreV1().Pods(usageNamespace).Delete(ctx, usagePodName(node), *metav1.NewDeleteOptions(0))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the usage pod of node %s: %w", node, err)
	}
	if err := k.cp.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting node %s: %w", node, err)
	}
	return nil
}

// LogPath is KWOK's log.
func (k *KWOK) LogPath() string { return k.logPath }

// NodeSpec's KWOK form: the node is created with its status (as a kubelet
// registers it) and the KWOK annotation; KWOK then makes it Ready and renews
// its Lease.
func kwokNode(s NodeSpec) *v1.Node {
	rl := s.allocatable()
	lbls := map[string]string{v1.LabelHostname: s.Name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64", "type": "kwok"}
	for key, v := range s.Labels {
		lbls[key] = v
	}
	ann := map[string]string{KWOKNodeAnnotation: kwokNodeValue,
		resourceMetricsPathAnnotation: "/metrics/nodes/" + s.Name + "/metrics/resource"}
	for key, v := range s.Annotations {
		ann[key] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: lbls, Annotations: ann},
		Spec:       v1.NodeSpec{Taints: s.Taints},
		Status:     v1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
}

// CreateNode registers a node KWOK plays the kubelet of; it is Ready once
// KWOK has seen it (WaitReady).
func (k *KWOK) CreateNode(ctx context.Context, s NodeSpec) (*v1.Node, error) {
	n, err := k.cp.Client.CoreV1().Nodes().Create(ctx, kwokNode(s), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", s.Name, err)
	}
	return n, nil
}

// WaitReady waits until every named node reports Ready.
func (k *KWOK) WaitReady(ctx context.Context, timeout time.Duration, names ...string) error {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if k.Exited() {
			return false, fmt.Errorf("kwok exited; the end of its log:\n%s", logTail(k.logPath))
		}
		nodes, err := k.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		ready := map[string]bool{}
		for i := range nodes.Items {
			if NodeReady(&nodes.Items[i]) {
				ready[nodes.Items[i].Name] = true
			}
		}
		missing = missing[:0]
		for n := range want {
			if !ready[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d nodes not Ready (%s...): %w (kwok log: %s)", len(missing), strings.Join(first(missing, 5), ", "), err, k.logPath)
	}
	return nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// NodeReady reports whether a node's Ready condition is True.
func NodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// SetNotReady makes node's kubelet report Ready False (true) or Ready again
// (false).
func (k *KWOK) SetNotReady(ctx context.Context, node string, notReady bool) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, NotReadyAnnotation)
	if notReady {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, NotReadyAnnotation)
	}
	_, err := k.cp.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// refusalStage is the Stage making node's kubelet refuse every pod bound to
// it at admission, as the kubelet does: the pod ends Failed with reason and
// "Pod was rejected: "+message, startTime set. Its weight puts it before
// berth-pod-ready, which then never runs for those pods.
func refusalStage(node, reason, message string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Stage",
		"metadata": map[string]any{
			"name":   refusalStageName(node),
			"labels": map[string]any{refusingNodeLabel: node},
		},
		"spec": map[string]any{
			"resourceRef": map[string]any{"apiGroup": "v1", "kind": "Pod"},
			"selector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": ".spec.nodeName", "operator": "In", "values": []any{node}},
				map[string]any{"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
				map[string]any{"key": ".status.phase", "operator": "In", "values": []any{"Pending"}},
			}},
			"weight": int64(1),
			"next": map[string]any{
				"event": map[string]any{"type": "Warning", "reason": reason, "message": "Pod was rejected: " + message},
				"statusTemplate": fmt.Sprintf(`{{ $now := Now }}
phase: Failed
reason: %q
message: %q
startTime: {{ $now | Quote }}
`, reason, "Pod was rejected: "+message),
			},
		},
	}}
}

func refusalStageName(node string) string { return "berth-refuse-" + node }

// Refuse makes node's kubelet refuse, at admission, every pod bound to it
// from now on, with reason (ReasonUnexpectedAdmissionError,
// ReasonOutOfCPU) and the admit handler's message.
func (k *KWOK) Refuse(ctx context.Context, node, reason, message string) error {
	_, err := k.dyn.Resource(stageGVR).Create(ctx, refusalStage(node, reason, message), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// StopRefusing ends node's refusals.
func (k *KWOK) StopRefusing(ctx context.Context, node string) error {
	err := k.dyn.Resource(stageGVR).Delete(ctx, refusalStageName(node), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Refusing lists the nodes refusing pods now.
func (k *KWOK) Refusing(ctx context.Context) ([]string, error) {
	l, err := k.dyn.Resource(stageGVR).List(ctx, metav1.ListOptions{LabelSelector: refusingNodeLabel})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range l.Items {
		out = append(out, s.GetLabels()[refusingNodeLabel])
	}
	return out, nil
}

// NodeSeries is what KWOK serves as node's kubelet resource metrics right
// now (the node_ series metrics-server reads, comments left out), for a
// failing spec to say which side is stale: KWOK's counter or
// metrics-server's storage.
func (k *KWOK) NodeSeries(ctx context.Context, node string) string {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: nil,
		// KWOK serves a self-signed certificate, as a kubelet does.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the sandbox's own KWOK, read by a test
	}}
	defer client.CloseIdleConnections()
	var errs []string
	for _, scheme := range []string{"https", "http"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+k.endpoint+"/metrics/nodes/"+node+"/metrics/resource", nil)
		if err != nil {
			return err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		var series []string
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "node_") {
				series = append(series, line)
			}
		}
		return fmt.Sprintf("%s at %s: %s", resp.Status, time.Now().Format(time.RFC3339Nano), strings.Join(series, "; "))
	}
	return strings.Join(errs, "; ")
}
