package crd

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func TestAs(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	if got, err := As[schedv1alpha1.PodGroup](pg); err != nil || got != pg {
		t.Errorf("typed: %v, %v; want the object itself", got, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := As[schedv1alpha1.PodGroup](&unstructured.Unstructured{Object: m})
	if err != nil || got.Name != "g" || got.Spec.MinMember != 3 {
		t.Errorf("unstructured: %+v, %v", got, err)
	}
	if _, err := As[schedv1alpha1.PodGroup](&v1.Pod{}); err == nil {
		t.Error("a pod read as a PodGroup")
	}
}
