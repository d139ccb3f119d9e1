package snapshot

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	corev1helper "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/yaml"
)

func obj(kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// pod is a Running pod in namespace shop, with what must not leak.
func pod(name, node string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"nodeName": node, "containers": []any{map[string]any{
		"name": "app", "image": "registry.example/app:1",
		"env":       []any{map[string]any{"name": "TOKEN", "value": "s3cr3t"}},
		"command":   []any{"/app", "--password=hunter2"},
		"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
	}}}
	for k, v := range extra {
		spec[k] = v
	}
	p := obj("Pod", "shop", name, map[string]any{"spec": spec, "status": map[string]any{"phase": "Running", "podIP": "10.1.2.3"}})
	p.SetLabels(map[string]string{"app": "payments", "pool": "gold", "pod-template-generation": "1", "apps.kubernetes.io/pod-index": "0"})
	p.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"env":"s3cr3t"}`,
		"explain.berth.dev/result": `{"node":"` + node + `"}`, "team.example/owner": "alice"})
	p.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "payments-7d9f", UID: "u1"}})
	return p
}

func TestSanitizeDropsWhatSchedulingNeverReads(t *testing.T) {
	p := pod("payments-7d9f-abcde", "worker-1", nil)
	Sanitize(p)
	raw, _ := p.MarshalJSON()
	for _, secret := range []string{"s3cr3t", "hunter2", "managedFields", "last-applied"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("sanitized pod still holds %q: %s", secret, raw)
		}
	}
	for _, kept := range []string{`"cpu":"1"`, `"image":"registry.example/app:1"`, `"nodeName":"worker-1"`} {
		if !bytes.Contains(raw, []byte(kept)) {
			t.Errorf("sanitized pod lost %s: %s", kept, raw)
		}
	}
}

func TestAnonymizerRenamesEveryReferenceAlike(t *testing.T) {
	a := NewAnonymizer(true)
	node := obj("Node", "", "worker-1.corp.example", nil)
	node.SetLabels(map[string]string{"kubernetes.io/hostname": "worker-1.corp.example", "pool": "gold", "topology.kubernetes.io/zone": "eu-1a",
		"node-type": "gpu", "gpu": "true", "kubernetes.io/os": "linux"})
	must(t, unstructured.SetNestedMap(node.Object, map[string]any{"cpu": "1", "hugepages-2Mi": "0", "pods": "110"}, "status", "allocatable"))
	must(t, unstructured.SetNestedSlice(node.Object, []any{map[string]any{"type": "InternalIP", "address": "192.168.7.7"}}, "status", "addresses"))
	p := pod("payments-7d9f-abcde", "worker-1.corp.example", map[string]any{
		// The release's own Deployment is called berth-scheduler too.
		"schedulerName": "berth-scheduler",
		"os":            map[string]any{"name": "linux"},
		"nodeSelector":  map[string]any{"pool": "gold", "kubernetes.io/os": "linux"},
		"affinity": map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
			"topologyKey":   "kubernetes.io/hostname",
			"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "In", "values": []any{"payments"}}}},
			"namespaces":    []any{"shop"},
		}}},
			"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{map[string]any{"key": "gpu", "operator": "In", "values": []any{"true"}}}},
				map[string]any{"matchExpressions": []any{map[string]any{"key": "node-type", "operator": "In", "values": []any{"gpu"}}}},
			}}}},
	})
	ns := obj("Namespace", "", "shop", nil)
	ns.SetLabels(map[string]string{"kubernetes.io/metadata.name": "shop"})
	pv := obj("PersistentVolume", "", "pv-1", map[string]any{"spec": map[string]any{"nodeAffinity": map[string]any{"required": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/hostname", "operator": "In", "values": []any{"worker-1.corp.example"}}}}},
	}}}})
	a.learn("ns", "shop")
	a.learn("node", "worker-1.corp.example")
	a.learn("deployment", "berth-scheduler")
	a.learn("replicaset", "payments-7d9f")
	a.learn("pod", "payments-7d9f-abcde")
	for _, o := range []*unstructured.Unstructured{ns, node, p, pv} {
		Sanitize(o)
		a.Apply(o)
	}
	var all bytes.Buffer
	for _, o := range []*unstructured.Unstructured{ns, node, p, pv} {
		raw, _ := o.MarshalJSON()
		all.Write(raw)
	}
	for _, leak := range []string{"worker-1.corp.example", `"shop"`, "payments-7d9f", `"payments"`, `"gold"`, `"pool"`, `"eu-1a"`, "192.168.7.7", "10.1.2.3", "alice"} {
		if bytes.Contains(all.Bytes(), []byte(leak)) {
			t.Errorf("anonymized objects still hold %s:\n%s", leak, all.String())
		}
	}
	nodeName := node.GetName()
	if got, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName"); got != nodeName || !strings.HasPrefix(nodeName, "node-") {
		t.Errorf("pod's nodeName %q, node's name %q: want the same node-N", got, nodeName)
	}
	if got := node.GetLabels()["kubernetes.io/hostname"]; got != nodeName {
		t.Errorf("hostname label %q, want the node's new name %q", got, nodeName)
	}
	if got := node.GetLabels()["topology.kubernetes.io/zone"]; got == "eu-1a" || got == "" {
		t.Errorf("zone label value %q: want it renamed", got)
	}
	values, _, _ := unstructured.NestedSlice(pv.Object, "spec", "nodeAffinity", "required", "nodeSelectorTerms")
	if !strings.Contains(strings.Join(flatten(values), " "), nodeName) {
		t.Errorf("PV node affinity %v does not name %s", values, nodeName)
	}
	// The pod's nodeSelector still selects the node: same key, same value.
	sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "nodeSelector")
	for k, v := range sel {
		if node.GetLabels()[k] != v {
			t.Errorf("nodeSelector %s=%s no longer matches the node's labels %v", k, v, node.GetLabels())
		}
	}
	if p.GetNamespace() != ns.GetName() {
		t.Errorf("pod namespace %q, namespace %q", p.GetNamespace(), ns.GetName())
	}
	if ns.GetLabels()["kubernetes.io/metadata.name"] != ns.GetName() {
		t.Errorf("namespace label %v, want its new name %s", ns.GetLabels(), ns.GetName())
	}
	if got := p.GetOwnerReferences()[0].Name; !strings.HasPrefix(got, "replicaset-") {
		t.Errorf("owner %q, want replicaset-N", got)
	}
	if _, ok := p.GetAnnotations()["explain.berth.dev/result"]; ok {
		t.Error("Explain's result (it names nodes inside a JSON string) kept")
	}

	// Still typed objects with their quantities, scheduler name and OS:
	// only names and labels changed.
	var tp v1.Pod
	var tn v1.Node
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Object, &tp); err != nil {
		t.Fatalf("anonymized pod is no Pod: %v", err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(node.Object, &tn); err != nil {
		t.Fatalf("anonymized node is no Node: %v", err)
	}
	if q := tp.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; q.String() != "1" {
		t.Errorf("pod's cpu request %s, want 1", q.String())
	}
	if q := tn.Status.Allocatable["hugepages-2Mi"]; q.String() != "0" || tn.Status.Allocatable.Cpu().String() != "1" {
		t.Errorf("node's allocatable %v, want cpu 1 and hugepages-2Mi 0", tn.Status.Allocatable)
	}
	if tp.Spec.SchedulerName != "berth-scheduler" || tp.Spec.OS.Name != "linux" || tp.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("schedulerName %q, os %q, nodeSelector %v: want berth-scheduler, linux and kubernetes.io/os=linux kept", tp.Spec.SchedulerName, tp.Spec.OS.Name, tp.Spec.NodeSelector)
	}
	// Both node affinity terms (a key that is also another label's value)
	// still match the node, by the scheduler's own matcher.
	for i, term := range tp.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok, err := corev1helper.MatchNodeSelectorTerms(&tn, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}})
		if err != nil || !ok {
			t.Errorf("node affinity term %d %+v no longer matches the node's labels %v (%v)", i, term, tn.Labels, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func flatten(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			out = append(out, flatten(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range t {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return nil
}

func TestTakeWritesAFileOpenReads(t *testing.T) {
	node := obj("Node", "", "n1", nil)
	running := pod("p1", "n1", nil)
	done := pod("p2", "n1", nil)
	must(t, unstructured.SetNestedField(done.Object, "Succeeded", "status", "phase"))
	refused := pod("p3", "n1", nil)
	must(t, unstructured.SetNestedField(refused.Object, "Failed", "status", "phase"))
	must(t, unstructured.SetNestedField(refused.Object, "OutOfcpu", "status", "reason"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "nodes"}: "NodeList", {Version: "v1", Resource: "pods"}: "PodList", {Version: "v1", Resource: "namespaces"}: "NamespaceList",
	}, node, running, done, refused)
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: "v1.37.2"}}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "nodes"}, {Name: "pods"}, {Name: "namespaces"}}}}
	var buf bytes.Buffer
	h, err := Take(context.Background(), disc, dyn, &buf, Options{Client: "test", Now: func() time.Time { return time.Unix(1e9, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if f.Server.GitVersion != "v1.37.2" || f.Counts["pods"] != 2 || f.Counts["nodes"] != 1 || h.Counts["pods"] != 2 {
		t.Errorf("header %+v, want v1.37.2 with 1 node and 2 pods (the Succeeded one left out)", f.Header)
	}
	var names []string
	for _, it := range f.Items {
		names = append(names, it.GetKind()+"/"+it.GetName())
	}
	if strings.Join(names, ",") != "Node/n1,Pod/p1,Pod/p3" {
		t.Errorf("items %v, want Node/n1,Pod/p1,Pod/p3", names)
	}
	var omitted []string
	for _, o := range f.Omitted {
		omitted = append(omitted, o.Resource)
	}
	if !strings.Contains(strings.Join(omitted, ","), "podgroups.scheduling.x-k8s.io") || !strings.Contains(strings.Join(omitted, ","), "nodes.metrics.k8s.io") {
		t.Errorf("omitted %v, want the resources this cluster does not serve named", omitted)
	}
	if _, err := Open(strings.NewReader(`{"apiVersion":"v1","kind":"List","items":[]}`)); err == nil || !strings.Contains(err.Error(), "not a Berth snapshot") {
		t.Errorf("Open of a List: %v, want 'not a Berth snapshot'", err)
	}
}

// A pod keeps, of its managed fields, what AdmissionFeedback reads: that its
// author set spec.nodeName, and when the kubelet last wrote its status, with
// no other field (issue 51, items 5 and 8); other entries go.
func TestSanitizeKeepsTheAuthorsNodeNameAndTheKubeletsWrite(t *testing.T) {
	p := pod("payments-7d9f-abcde", "worker-1", nil)
	at := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	p.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{}}}`)},
		{Manager: "tenant", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{},"f:nodeName":{}}}`)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:phase":{}}}`)},
	})
	Sanitize(p)
	want := []metav1.ManagedFieldsEntry{
		{Manager: "tenant", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:nodeName":{}}}`)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &at},
	}
	// FieldsV1 is compared by its text (its representation is its own).
	fields := cmp.Transformer("FieldsV1", func(f *metav1.FieldsV1) string {
		if f == nil {
			return "<nil>"
		}
		return f.GetRawString()
	})
	if diff := cmp.Diff(want, p.GetManagedFields(), fields); diff != "" {
		t.Errorf("managed fields kept (-want,+got):\n%s", diff)
	}
}

// manifests/snapshot-reader.yaml (rendered from the chart) grants get and
// list on exactly the resources a snapshot reads.
func TestTheSnapshotReaderClusterRoleGrantsWhatSnapshotReads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "snapshot-reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	for _, r := range role.Rules {
		if !slices.Equal(r.Verbs, []string{"get", "list"}) {
			t.Errorf("rule %+v: verbs %v, want get and list only", r, r.Verbs)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[res+"."+g] = true
			}
		}
	}
	want := map[string]bool{}
	for _, r := range Resources {
		want[r.Resource+"."+r.Group] = true
	}
	if !maps.Equal(granted, want) {
		t.Errorf("the ClusterRole grants %v, want %v (internal/snapshot's Resources): change charts/berth/templates/snapshot-reader.yaml, then make generate", slices.Sorted(maps.Keys(granted)), slices.Sorted(maps.Keys(want)))
	}
}

// Without --anonymize a snapshot keeps only what scheduling reads: no
// annotation but scheduling's (and the ones asked for), no controller's pod
// template, no addresses, no volume servers, attributes or secrets, no
// StorageClass parameters.
func TestSanitizeKeepsOnlyWhatSchedulingReads(t *testing.T) {
	p := pod("web-1", "worker-1", map[string]any{
		"hostAliases": []any{map[string]any{"ip": "10.9.9.9", "hostnames": []any{"db.corp.example"}}},
		"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1",
			"env":          []any{map[string]any{"name": "TOKEN", "value": "s3cr3t"}},
			"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/srv/corp.example"}},
			"resources":    map[string]any{"requests": map[string]any{"cpu": "1"}}}},
		"volumes": []any{
			map[string]any{"name": "data", "nfs": map[string]any{"server": "nfs.corp.example", "path": "/exports/web"}},
			map[string]any{"name": "vault", "csi": map[string]any{"driver": "secrets-store.csi.k8s.io", "volumeAttributes": map[string]any{"vaultAddress": "https://vault.corp.example"}}},
		}})
	p.SetAnnotations(map[string]string{"kapp.k14s.io/original": `{"env":"s3cr3t"}`, "explain.berth.dev/request": "true", "team.example/rule-input": "gold"})
	rs := obj("ReplicaSet", "shop", "web-7d9f", map[string]any{"spec": map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "s3cr3t"}},
			"spec": map[string]any{"hostAliases": []any{map[string]any{"ip": "10.9.9.9"}}}}}})
	sc := obj("StorageClass", "", "fast", map[string]any{"provisioner": "disk.csi.example.com", "parameters": map[string]any{"csi.storage.k8s.io/provisioner-secret-name": "s3cr3t"}})
	pvc := obj("PersistentVolumeClaim", "shop", "data", nil)
	pvc.SetAnnotations(map[string]string{"pv.kubernetes.io/bind-completed": "yes", "argocd.argoproj.io/tracking-id": "corp.example"})
	pv := obj("PersistentVolume", "", "pv-nfs", map[string]any{"spec": map[string]any{
		"nfs":          map[string]any{"server": "nfs.corp.example", "path": "/exports/pv"},
		"capacity":     map[string]any{"storage": "1Gi"},
		"nodeAffinity": map[string]any{"required": map[string]any{"nodeSelectorTerms": []any{}}}}})
	node := obj("Node", "", "worker-1", map[string]any{"status": map[string]any{
		"addresses": []any{map[string]any{"type": "InternalIP", "address": "10.1.2.3"}},
		"images":    []any{map[string]any{"names": []any{"registry.example/app:1"}, "sizeBytes": int64(1000)}}}})
	var all bytes.Buffer
	for _, o := range []*unstructured.Unstructured{p, rs, sc, pvc, pv, node} {
		Sanitize(o, "team.example/rule-input")
		raw, _ := o.MarshalJSON()
		all.Write(raw)
	}
	for _, leak := range []string{"s3cr3t", "corp.example", "10.9.9.9", "10.1.2.3", "/exports/", "kapp.k14s.io", "argocd"} {
		if bytes.Contains(all.Bytes(), []byte(leak)) {
			t.Errorf("sanitized objects still hold %s:\n%s", leak, all.String())
		}
	}
	for _, kept := range []string{`"explain.berth.dev/request":"true"`, `"team.example/rule-input":"gold"`, `"pv.kubernetes.io/bind-completed":"yes"`,
		`"matchLabels":{"app":"web"}`, `"driver":"secrets-store.csi.k8s.io"`, `"nfs":{}`, `"provisioner":"disk.csi.example.com"`,
		`"images":[{"names":["registry.example/app:1"]`, `"requests":{"cpu":"1"}`, `"image":"registry.example/app:1"`} {
		if !bytes.Contains(all.Bytes(), []byte(kept)) {
			t.Errorf("sanitized objects lack %s:\n%s", kept, all.String())
		}
	}
	var explained bytes.Buffer
	if err := ExplainFields(&explained); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubernetes.io/config.mirror", "spec.template", "parameters", "nfs: server, path"} {
		if !strings.Contains(explained.String(), want) {
			t.Errorf("--explain-fields lacks %q:\n%s", want, explained.String())
		}
	}
}
