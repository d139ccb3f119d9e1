package preemptible

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestForFallsBackToLowerPriority(t *testing.T) {
	pod := func(prio int32) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{Priority: ptr.To(prio)}} }
	v := For(nil)([]*v1.Pod{pod(100)})
	if !v.Eligible(pod(10)) || v.Eligible(pod(100)) || v.Eligible(pod(1000)) {
		t.Error("the default rule must take exactly the pods of lower priority")
	}
}
