package snapshot

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func pod(ns, name, node string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"nodeName": node, "containers": []any{map[string]any{
		"name": "app", "image": "registry.example/app:1",
		"env":       []any{map[string]any{"name": "TOKEN", "value": "s3cr3t"}},
		"command":   []any{"/app", "--password=hunter2"},
		"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
	}}}
	for k, v := range extra {
		spec[k] = v
	}
	p := obj("v1", "Pod", ns, name, map[string]any{"spec": spec, "status": map[string]any{"phase": "Running", "podIP": "10.1.2.3"}})
	p.SetLabels(map[string]string{"app": "payments", "pool": "gold"})
	p.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"env":"s3cr3t"}`,
		"explain.berth.dev/result": `{"node":"` + node + `"}`, "team.example/owner": "alice"})
	p.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "payments-7d9f", UID: "u1"}})
	return p
}

func TestSanitizeDropsWhatSchedulingNeverReads(t *testing.T) {
	p := pod("shop", "payments-7d9f-abcde", "worker-1", nil)
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
	node := obj("v1", "Node", "", "worker-1.corp.example", nil)
	node.SetLabels(map[string]string{"kubernetes.io/hostname": "worker-1.corp.example", "pool": "gold", "topology.kubernetes.io/zone": "eu-1a"})
	unstructured.SetNestedSlice(node.Object, []any{map[string]any{"type": "InternalIP", "address": "192.168.7.7"}}, "status", "addresses")
	p := pod("shop", "payments-7d9f-abcde", "worker-1.corp.example", map[string]any{
		"nodeSelector": map[string]any{"pool": "gold"},
		"affinity": map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
			"topologyKey":   "kubernetes.io/hostname",
			"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "In", "values": []any{"payments"}}}},
			"namespaces":    []any{"shop"},
		}}}},
	})
	ns := obj("v1", "Namespace", "", "shop", nil)
	ns.SetLabels(map[string]string{"kubernetes.io/metadata.name": "shop"})
	pv := obj("v1", "PersistentVolume", "", "pv-1", map[string]any{"spec": map[string]any{"nodeAffinity": map[string]any{"required": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/hostname", "operator": "In", "values": []any{"worker-1.corp.example"}}}}},
	}}}})
	for resource, o := range map[string]*unstructured.Unstructured{"namespaces": ns, "nodes": node, "pods": p} {
		m, err := metaOf(o)
		if err != nil {
			t.Fatal(err)
		}
		a.learn(resource, m)
	}
	for _, o := range []*unstructured.Unstructured{ns, node, p, pv} {
		Sanitize(o)
		a.Apply(o)
	}
	var all bytes.Buffer
	for _, o := range []*unstructured.Unstructured{ns, node, p, pv} {
		raw, _ := o.MarshalJSON()
		all.Write(raw)
	}
	for _, leak := range []string{`"worker-1.corp.example"`, `"shop"`, `"payments-7d9f-abcde"`, `"payments-7d9f"`, `"payments"`, `"gold"`, `"pool"`, `"app"`, "192.168.7.7", "10.1.2.3", "alice"} {
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
}

func metaOf(u *unstructured.Unstructured) (*metav1.ObjectMeta, error) {
	m := &metav1.ObjectMeta{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["metadata"].(map[string]any), m)
	return m, err
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
	node := obj("v1", "Node", "", "n1", nil)
	running := pod("shop", "p1", "n1", nil)
	done := pod("shop", "p2", "n1", nil)
	unstructured.SetNestedField(done.Object, "Succeeded", "status", "phase")
	refused := pod("shop", "p3", "n1", nil)
	unstructured.SetNestedField(refused.Object, "Failed", "status", "phase")
	unstructured.SetNestedField(refused.Object, "OutOfcpu", "status", "reason")
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
