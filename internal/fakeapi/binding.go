// Package fakeapi makes client-go's in-memory clientset behave as
// kube-apiserver does where the scheduler depends on it.
package fakeapi

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// BindThroughTracker is a reactor for "create" on "pods" that does what
// kube-apiserver does on pods/binding: set the pod's nodeName and its
// PodScheduled condition (the in-memory clientset stores nothing for a
// binding). now stamps the condition (nil: time.Now).
func BindThroughTracker(tracker clienttesting.ObjectTracker, now func() time.Time) clienttesting.ReactionFunc {
	if now == nil {
		now = time.Now
	}
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(clienttesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return false, nil, nil
		}
		obj, err := tracker.Get(v1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*v1.Pod).DeepCopy()
		if p.Spec.NodeName != "" {
			return true, nil, fmt.Errorf("pod %s/%s is already bound to %s", p.Namespace, p.Name, p.Spec.NodeName)
		}
		p.Spec.NodeName = b.Target.Name
		cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now())}
		replaced := false
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodScheduled {
				p.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			p.Status.Conditions = append(p.Status.Conditions, cond)
		}
		return true, b, tracker.Update(v1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace)
	}
}
