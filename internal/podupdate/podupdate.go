// Package podupdate tells a queueing hint whether an update of a pod is one
// of Berth's own writes, which must never requeue the pod: Explain writes its
// result into an annotation of the pod it explains, and a hint that queued
// the pod on that update would retry it every backoff, with another write
// each time.
package podupdate

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// AnnotationPrefix is the prefix of the annotations Berth writes on pods
// (Explain's result) and reads (Explain's request).
const AnnotationPrefix = "explain.berth.dev/"

// OnlyBerthAnnotations reports whether oldPod and newPod differ in nothing
// but annotations under AnnotationPrefix (and the object's bookkeeping:
// resourceVersion, managedFields).
func OnlyBerthAnnotations(oldPod, newPod *v1.Pod) bool {
	if oldPod == nil || newPod == nil {
		return false
	}
	if !berthAnnotationsDiffer(oldPod.Annotations, newPod.Annotations) {
		return false
	}
	o, n := *oldPod, *newPod
	o.ObjectMeta, n.ObjectMeta = *oldPod.ObjectMeta.DeepCopy(), *newPod.ObjectMeta.DeepCopy()
	o.Annotations, n.Annotations = withoutBerth(o.Annotations), withoutBerth(n.Annotations)
	o.ResourceVersion, n.ResourceVersion = "", ""
	o.ManagedFields, n.ManagedFields = nil, nil
	return apiequality.Semantic.DeepEqual(&o, &n)
}

// berthAnnotationsDiffer: some annotation under the prefix was added,
// removed or changed (cheap, and the common answer for other updates).
func berthAnnotationsDiffer(a, b map[string]string) bool {
	for k, v := range a {
		if strings.HasPrefix(k, AnnotationPrefix) {
			if w, ok := b[k]; !ok || w != v {
				return true
			}
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && strings.HasPrefix(k, AnnotationPrefix) {
			return true
		}
	}
	return false
}

func withoutBerth(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, AnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}
