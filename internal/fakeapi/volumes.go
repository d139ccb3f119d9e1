package fakeapi

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-helpers/storage/volume"
)

var (
	claims         = v1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumes        = v1.SchemeGroupVersion.WithResource("persistentvolumes")
	storageClasses = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	nodes          = v1.SchemeGroupVersion.WithResource("nodes")
)

// SimulatedVolumeHandle prefixes the volume handle of a PersistentVolume
// ProvisionThroughTracker made: no storage holds it.
const SimulatedVolumeHandle = "berth-simulated-"

// ProvisionThroughTracker is a reactor for "update" on
// "persistentvolumeclaims" that does, at once, what the PV controller and
// an external provisioner do when the scheduler's VolumeBinding selects a
// node for a claim waiting for its first consumer (it sets the claim's
// volume.kubernetes.io/selected-node and waits in PreBind until the claim
// is bound): it makes a PersistentVolume for the claim, as the claim's
// StorageClass's provisioner would on that node, and binds the claim to it.
// The volume's node affinity is the node's value of each topology key the
// class's allowedTopologies name (a provisioner that reports its own
// topology, as most CSI drivers do, may pin it more narrowly). A class
// without a provisioner (kubernetes.io/no-provisioner) is left alone, as
// the PV controller leaves it. made is called with each claim provisioned
// ("namespace/name") and the node; now stamps the objects.
func ProvisionThroughTracker(tracker clienttesting.ObjectTracker, now func() time.Time, made func(claim, node string)) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		ua, ok := action.(clienttesting.UpdateAction)
		if !ok || action.GetSubresource() != "" {
			return false, nil, nil
		}
		claim, ok := ua.GetObject().(*v1.PersistentVolumeClaim)
		if !ok || claim.Spec.VolumeName != "" || claim.Annotations[volume.AnnSelectedNode] == "" || claim.Spec.StorageClassName == nil {
			return false, nil, nil
		}
		obj, err := tracker.Get(storageClasses, "", *claim.Spec.StorageClassName)
		if err != nil {
			return false, nil, nil // no class: nothing provisions it
		}
		class := obj.(*storagev1.StorageClass)
		if class.Provisioner == volume.NotSupportedProvisioner {
			return false, nil, nil
		}
		nodeName := claim.Annotations[volume.AnnSelectedNode]
		obj, err = tracker.Get(nodes, "", nodeName)
		if err != nil {
			return true, nil, fmt.Errorf("provisioning %s/%s on node %s: %w", claim.Namespace, claim.Name, nodeName, err)
		}
		node := obj.(*v1.Node)
		pv := provisioned(claim, class, node, now())
		if err := tracker.Create(volumes, pv, ""); err != nil && !apierrors.IsAlreadyExists(err) {
			return true, nil, err
		}
		bound := claim.DeepCopy()
		bindClaim(bound, pv.Name, pv.Spec.Capacity)
		metav1.SetMetaDataAnnotation(&bound.ObjectMeta, volume.AnnStorageProvisioner, class.Provisioner)
		if err := tracker.Update(claims, bound, bound.Namespace); err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(claims, bound.Namespace, bound.Name)
		if err != nil {
			return true, nil, err
		}
		if made != nil {
			made(claim.Namespace+"/"+claim.Name, nodeName)
		}
		return true, stored, nil
	}
}

// BindClaimsThroughTracker is a reactor for "update" on
// "persistentvolumes" that does what the PV controller does when the
// scheduler's VolumeBinding pre-binds an existing volume to a claim waiting
// for its first consumer (the volume's claimRef set): it binds the claim to
// the volume.
func BindClaimsThroughTracker(tracker clienttesting.ObjectTracker) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		ua, ok := action.(clienttesting.UpdateAction)
		if !ok || action.GetSubresource() != "" {
			return false, nil, nil
		}
		pv, ok := ua.GetObject().(*v1.PersistentVolume)
		if !ok || pv.Spec.ClaimRef == nil || pv.Status.Phase == v1.VolumeBound {
			return false, nil, nil
		}
		obj, err := tracker.Get(claims, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
		if err != nil {
			return false, nil, nil
		}
		claim := obj.(*v1.PersistentVolumeClaim).DeepCopy()
		if claim.Spec.VolumeName != "" || claim.UID != pv.Spec.ClaimRef.UID {
			return false, nil, nil
		}
		bound := pv.DeepCopy()
		bound.Status.Phase = v1.VolumeBound
		if err := tracker.Update(volumes, bound, ""); err != nil {
			return true, nil, err
		}
		bindClaim(claim, pv.Name, pv.Spec.Capacity)
		if err := tracker.Update(claims, claim, claim.Namespace); err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(volumes, "", bound.Name)
		return true, stored, err
	}
}

// bindClaim binds claim to the volume named pv, as the PV controller does.
func bindClaim(claim *v1.PersistentVolumeClaim, pv string, capacity v1.ResourceList) {
	claim.Spec.VolumeName = pv
	metav1.SetMetaDataAnnotation(&claim.ObjectMeta, volume.AnnBindCompleted, "yes")
	metav1.SetMetaDataAnnotation(&claim.ObjectMeta, volume.AnnBoundByController, "yes")
	claim.Status.Phase = v1.ClaimBound
	claim.Status.AccessModes = claim.Spec.AccessModes
	claim.Status.Capacity = capacity
}

// provisioned is the volume that claim's class's provisioner makes on node.
func provisioned(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node *v1.Node, now time.Time) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{
			// As external-provisioner names it.
			Name: "pvc-" + string(claim.UID),
			// VolumeBinding's cache of volumes needs a version.
			ResourceVersion:   "1",
			CreationTimestamp: metav1.NewTime(now),
			Annotations:       map[string]string{volume.AnnDynamicallyProvisioned: class.Provisioner, volume.AnnBoundByController: "yes"},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  class.MountOptions,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name,
				UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: class.Provisioner, VolumeHandle: SimulatedVolumeHandle + string(claim.UID)},
			},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound},
	}
	var exprs []v1.NodeSelectorRequirement
	seen := map[string]bool{}
	for _, term := range class.AllowedTopologies {
		for _, e := range term.MatchLabelExpressions {
			if value, ok := node.Labels[e.Key]; ok && !seen[e.Key] {
				seen[e.Key] = true
				exprs = append(exprs, v1.NodeSelectorRequirement{Key: e.Key, Operator: v1.NodeSelectorOpIn, Values: []string{value}})
			}
		}
	}
	if len(exprs) > 0 {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: exprs}}}}
	}
	return pv
}
