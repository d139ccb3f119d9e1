package offline

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// prepareClaims keeps the DRA claims of the pods a simulation places as
// kube-controller-manager's resourceclaim controller keeps them
// (pkg/controller/resourceclaim): a pod that is gone (placed again in
// replace or drain mode, or left out as terminating) no longer holds its
// claims, and a claim no pod holds any more is deallocated; a pod whose
// claim comes from a ResourceClaimTemplate and has none yet gets one made
// from the template, owned by the pod and named in its status. It returns
// kube with the claims it made, and warns of the templates the snapshot
// lacks.
func prepareClaims(kube []runtime.Object, placing []*v1.Pod, gone map[types.UID]bool, sim *Simulation) []runtime.Object {
	claims := map[string]*resourcev1.ResourceClaim{}
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	for _, obj := range kube {
		switch o := obj.(type) {
		case *resourcev1.ResourceClaim:
			claims[o.Namespace+"/"+o.Name] = o
		case *resourcev1.ResourceClaimTemplate:
			templates[o.Namespace+"/"+o.Name] = o
		}
	}
	// The controller drops a pod that is gone from reservedFor, and
	// deallocates a claim nothing reserves.
	for _, c := range claims {
		if len(c.Status.ReservedFor) == 0 {
			continue
		}
		kept := c.Status.ReservedFor[:0:0]
		for _, r := range c.Status.ReservedFor {
			if r.Resource != "pods" || !gone[r.UID] {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(c.Status.ReservedFor) {
			continue
		}
		c.Status.ReservedFor = kept
		if len(kept) == 0 {
			// The controller deallocates it (the drivers' device status
			// stays until they update it).
			c.Status.Allocation = nil
		}
	}
	for _, p := range placing {
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil {
				continue
			}
			// The claim the pod's status names, if it is the pod's.
			if name, _, err := resourceclaim.Name(p, &pc); err == nil && name != nil {
				if c, ok := claims[p.Namespace+"/"+*name]; ok && resourceclaim.IsForPod(p, c, false) == nil {
					continue
				}
			}
			t, ok := templates[p.Namespace+"/"+*pc.ResourceClaimTemplateName]
			if !ok {
				sim.Warnings = append(sim.Warnings, fmt.Sprintf("pod %s/%s's claim %s is made from ResourceClaimTemplate %s, which the snapshot does not hold: it stays pending, waiting for its claim",
					p.Namespace, p.Name, pc.Name, *pc.ResourceClaimTemplateName))
				continue
			}
			c := claimFromTemplate(p, pc.Name, t)
			for claims[p.Namespace+"/"+c.Name] != nil {
				c.Name += "x"
			}
			claims[p.Namespace+"/"+c.Name] = c
			kube = append(kube, c)
			setClaimStatus(p, pc.Name, c.Name)
		}
	}
	return kube
}

// setClaimStatus names claim as p's claim for podClaim in p's status.
func setClaimStatus(p *v1.Pod, podClaim, claim string) {
	for i := range p.Status.ResourceClaimStatuses {
		if p.Status.ResourceClaimStatuses[i].Name == podClaim {
			p.Status.ResourceClaimStatuses[i].ResourceClaimName = ptr.To(claim)
			return
		}
	}
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: ptr.To(claim)})
}

// claimFromTemplate is the claim the resourceclaim controller makes from t
// for p's pod claim podClaim: t's spec, labels and annotations, the pod
// claim's name in an annotation, p its controlling owner, named
// <pod>-<claim>- and a suffix (the controller's is random).
func claimFromTemplate(p *v1.Pod, podClaim string, t *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	annotations := maps.Clone(t.Spec.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourcev1.PodResourceClaimAnnotation] = podClaim
	return &resourcev1.ResourceClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      p.Name + "-" + podClaim + "-sim",
			// The scheduler's caches of claims need a version.
			ResourceVersion: "1",
			UID:             types.UID("simulated-" + string(p.UID) + "-" + podClaim),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Annotations:     annotations,
			Labels:          maps.Clone(t.Spec.Labels),
		},
		Spec: *t.Spec.Spec.DeepCopy(),
	}
}
