package podupdate

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOnlyBerthAnnotations(t *testing.T) {
	base := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "1",
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}}}
	with := func(f func(p *v1.Pod)) *v1.Pod {
		p := base.DeepCopy()
		p.ResourceVersion = "2"
		f(p)
		return p
	}
	for _, tc := range []struct {
		name string
		new  *v1.Pod
		want bool
	}{
		{"the result written", with(func(p *v1.Pod) { p.Annotations[AnnotationPrefix+"result"] = "{}" }), true},
		{"the request added", with(func(p *v1.Pod) { p.Annotations[AnnotationPrefix+"request"] = "true" }), true},
		{"the result written with a label changed", with(func(p *v1.Pod) {
			p.Annotations[AnnotationPrefix+"result"] = "{}"
			p.Labels["app"] = "api"
		}), false},
		{"another annotation", with(func(p *v1.Pod) { p.Annotations["team"] = "b" }), false},
		{"nothing but the resourceVersion", with(func(*v1.Pod) {}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OnlyBerthAnnotations(base, tc.new); got != tc.want {
				t.Errorf("OnlyBerthAnnotations = %v, want %v", got, tc.want)
			}
		})
	}
}
