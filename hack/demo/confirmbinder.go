package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The ConfirmBinder scenario makes the binding race deterministic. Pod
// cb-web's claim uses a WaitForFirstConsumer StorageClass, so between the
// scheduling decision and the Binding the scheduler waits (VolumeBinding's
// PreBind) for the claim to be provisioned on the chosen node. The demo plays
// the provisioner, and before it provisions it binds another pod to that node
// through the API, as a second scheduler would at the same moment. When
// ConfirmBinder then confirms against the API server, the node no longer fits.
const (
	cbStorageClass = "demo-wffc"
	cbClaim        = "cb-data"
	cbProvisioner  = "berth.io/demo-provisioner"
	cbIntruder     = "cb-intruder"
	annSelected    = "volume.kubernetes.io/selected-node"
	annBound       = "pv.kubernetes.io/bind-completed"
)

var (
	cbTaint      = v1.Taint{Key: "berth.io/demo", Value: "confirmbinder", Effect: v1.TaintEffectNoSchedule}
	cbNodes      = map[string]string{"berth.io/demo": "confirmbinder"}
	cbToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
)

// createClaim creates the StorageClass and the claim of the scenario.
func createClaim(ctx context.Context, c kubernetes.Interface) error {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: cbStorageClass},
		Provisioner:       cbProvisioner,
		VolumeBindingMode: &wffc,
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cbClaim},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(cbStorageClass),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	return err
}

// provision waits for the scheduler to select a node for the claim, binds
// the intruder to that node, then provisions the volume (no node affinity: it
// can follow the pod elsewhere) and binds the claim, as the PV controller
// would (none runs here).
func provision(ctx context.Context, c kubernetes.Interface) error {
	var node string
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, cbClaim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = pvc.Annotations[annSelected]
		return node != "", nil
	}); err != nil {
		return fmt.Errorf("waiting for the scheduler to select a node for %s: %w", cbClaim, err)
	}

	if _, err := sandbox.CreatePod(ctx, c, sandbox.PodSpec{Namespace: ns, Name: cbIntruder, SchedulerName: "other-scheduler",
		CPU: "3", Memory: "1Gi", Tolerations: cbToleration}); err != nil {
		return err
	}
	if err := c.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cbIntruder},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, cbClaim, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "cb-pv", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": cbProvisioner}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              cbStorageClass,
			ClaimRef:                      &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: cbClaim, UID: pvc.UID, APIVersion: "v1"},
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/berth-demo"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pv.Status.Phase = v1.VolumeBound
	if _, err := c.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return err
	}
	pvc.Spec.VolumeName = pv.Name
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, annBound, "yes")
	if pvc, err = c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	pvc.Status.Phase = v1.ClaimBound
	pvc.Status.AccessModes = pv.Spec.AccessModes
	pvc.Status.Capacity = pv.Spec.Capacity
	_, err = c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}
