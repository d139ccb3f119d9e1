package podorigin

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnsNodeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    metav1.ManagedFieldsEntry
		want bool
	}{
		{"the author's create with spec.nodeName", metav1.ManagedFieldsEntry{FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{},"f:nodeName":{}}}`)}, true},
		{"a controller's create without it", metav1.ManagedFieldsEntry{FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{}}}`)}, false},
		{"a status write", metav1.ManagedFieldsEntry{Subresource: "status", FieldsV1: metav1.NewFieldsV1(NodeNameFields)}, false},
		{"no field set", metav1.ManagedFieldsEntry{}, false},
		{"not JSON", metav1.ManagedFieldsEntry{FieldsV1: metav1.NewFieldsV1(`{`)}, false},
	} {
		if got := OwnsNodeName(tc.e); got != tc.want {
			t.Errorf("%s: OwnsNodeName = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKubeletStatusWrite(t *testing.T) {
	if !KubeletStatusWrite(metav1.ManagedFieldsEntry{Manager: "kubelet", Subresource: "status"}) {
		t.Error("the kubelet's status write not recognised")
	}
	for _, e := range []metav1.ManagedFieldsEntry{{Manager: "kubelet"}, {Manager: "kwok", Subresource: "status"}} {
		if KubeletStatusWrite(e) {
			t.Errorf("%+v taken for the kubelet's status write", e)
		}
	}
}
