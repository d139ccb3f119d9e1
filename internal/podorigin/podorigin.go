// Package podorigin reads from a pod's managed fields who placed it and
// when its kubelet last wrote its status: AdmissionFeedback counts a
// refusal only of a pod a scheduler bound and times it by the kubelet's
// write, and a snapshot keeps exactly these facts of a pod's managed fields.
package podorigin

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeNameFields is the field set of spec.nodeName alone.
const NodeNameFields = `{"f:spec":{"f:nodeName":{}}}`

// OwnsNodeName: the entry is the pod's author's (not a subresource's) and
// owns spec.nodeName. A scheduler binds through the binding subresource,
// which the API server writes without a managed-fields entry, so such an
// entry means the author set spec.nodeName.
func OwnsNodeName(e metav1.ManagedFieldsEntry) bool {
	if e.Subresource != "" || e.FieldsV1 == nil {
		return false
	}
	var f struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) != nil {
		return false
	}
	_, ok := f.Spec["f:nodeName"]
	return ok
}

// KubeletStatusWrite: the entry is the kubelet's write of the pod's status.
func KubeletStatusWrite(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == "kubelet" && e.Subresource == "status"
}
