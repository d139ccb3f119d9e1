package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The refusal of a RefusalCluster's black hole, in the kubelet's words: a
// device plugin whose devices went unhealthy (the device manager's error).
const (
	RefusalReason  = ReasonUnexpectedAdmissionError
	RefusalMessage = "Pod was rejected: " + refusalAdmitMessage

	refusalAdmitMessage = "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/gpu, which is unexpected"
)

// StartRefusalSubstrate starts what RefusalCluster and ReplicaSet need
// beside cp: kube-controller-manager (assets holds it) with only the
// ServiceAccount, ReplicaSet and Deployment controllers (the reclaim specs'
// borrowers are Deployments, whose evicted pods come back; no garbage collector: suites
// create pods naming owners that do not exist; no node lifecycle controller:
// hand-made nodes have no heartbeat), and KWOK (kwokBin, kwokCRDs) serving
// its nodes' kubelet endpoints on kwokIP (see StartKWOK).
func StartRefusalSubstrate(ctx context.Context, cp *ControlPlane, assets, kwokBin, kwokCRDs, kwokIP string) (*ControllerManager, *KWOK, error) {
	cm, err := StartControllerManager(ctx, cp, filepath.Join(assets, "kube-controller-manager"),
		ControllerManagerOptions{Controllers: []string{"serviceaccount", "serviceaccount-token", "replicaset", "deployment"}})
	if err != nil {
		return nil, nil, err
	}
	k, err := StartKWOK(ctx, cp, kwokBin, kwokCRDs, kwokIP)
	if err != nil {
		cm.Stop()
		return nil, nil, err
	}
	return cm, k, nil
}

// RefusalCluster is three KWOK nodes for one test, tainted for its pods
// alone and reached through a node selector: BlackHole, the roomiest
// (LeastAllocated prefers it), whose kubelet refuses every pod at admission
// (KWOK.Refuse), and two smaller nodes whose pods start.
type RefusalCluster struct {
	BlackHole string
	Others    []string
	Selector  map[string]string
	taint     v1.Taint

	c    kubernetes.Interface
	kwok *KWOK
}

// StartRefusalCluster creates the KWOK nodes black-hole-<id>, admits-<id>-a
// and admits-<id>-b, waits until they are Ready and makes the black hole
// refuse every pod.
func StartRefusalCluster(ctx context.Context, k *KWOK, id string) (*RefusalCluster, error) {
	rc := &RefusalCluster{BlackHole: "black-hole-" + id, Others: []string{"admits-" + id + "-a", "admits-" + id + "-b"},
		Selector: map[string]string{"berth.dev/refusal-cluster": id}, c: k.cp.Client, kwok: k,
		taint: v1.Taint{Key: "berth.dev/refusal-cluster", Value: id, Effect: v1.TaintEffectNoSchedule}}
	names := append([]string{rc.BlackHole}, rc.Others...)
	if err := k.Refuse(ctx, rc.BlackHole, RefusalReason, refusalAdmitMessage); err != nil {
		return nil, fmt.Errorf("making %s refuse pods: %w", rc.BlackHole, err)
	}
	for i, name := range names {
		cpu, mem := "4", "8Gi"
		if i == 0 {
			cpu, mem = "16", "64Gi"
		}
		if _, err := k.CreateNode(ctx, NodeSpec{Name: name, CPU: cpu, Memory: mem, Labels: rc.Selector, Taints: []v1.Taint{rc.taint}}); err != nil {
			_ = rc.Close(ctx)
			return nil, err
		}
	}
	if err := k.WaitReady(ctx, wait.ForeverTestTimeout, names...); err != nil {
		_ = rc.Close(ctx)
		return nil, err
	}
	return rc, nil
}

// PodSpec is a pod of 1 CPU and 1Gi for profile, kept on the cluster's nodes.
func (rc *RefusalCluster) PodSpec(namespace, name, profile string) PodSpec {
	return PodSpec{Namespace: namespace, Name: name, SchedulerName: profile, CPU: "1", Memory: "1Gi", NodeSelector: rc.Selector,
		Tolerations: []v1.Toleration{{Key: rc.taint.Key, Operator: v1.TolerationOpEqual, Value: rc.taint.Value, Effect: rc.taint.Effect}}}
}

// Refused lists the pods (namespace/name) the black hole refused, read from
// the API: Failed on it with the refusal's reason, oldest first.
func (rc *RefusalCluster) Refused(ctx context.Context) ([]string, error) {
	l, err := rc.c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", rc.BlackHole).String(),
	})
	if err != nil {
		return nil, err
	}
	var refused []v1.Pod
	for _, p := range l.Items {
		if p.Status.Phase == v1.PodFailed && p.Status.Reason == RefusalReason {
			refused = append(refused, p)
		}
	}
	sortOldestFirst(refused)
	out := make([]string, len(refused))
	for i, p := range refused {
		out[i] = p.Namespace + "/" + p.Name
	}
	return out, nil
}

// RefusedCount is len(Refused), for Eventually.
func (rc *RefusalCluster) RefusedCount(ctx context.Context) func() (int, error) {
	return func() (int, error) {
		r, err := rc.Refused(ctx)
		return len(r), err
	}
}

// StopRefusing makes the black hole's kubelet admit pods again.
func (rc *RefusalCluster) StopRefusing(ctx context.Context) error {
	return rc.kwok.StopRefusing(ctx, rc.BlackHole)
}

// Close ends the refusals and deletes the nodes.
func (rc *RefusalCluster) Close(ctx context.Context) error {
	errs := []error{rc.StopRefusing(ctx)}
	for _, name := range append([]string{rc.BlackHole}, rc.Others...) {
		if err := rc.c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReplicaSet is a ReplicaSet that kube-controller-manager's ReplicaSet
// controller keeps at its replicas (StartControllerManager): it creates the
// pods and replaces each one that fails, as in production.
type ReplicaSet struct {
	c        kubernetes.Interface
	rs       *appsv1.ReplicaSet
	selector labels.Selector
}

// CreateReplicaSet creates a ReplicaSet named spec.Name of replicas pods of
// spec (its pods are named by the controller, <name>-<suffix>).
func CreateReplicaSet(ctx context.Context, c kubernetes.Interface, spec PodSpec, replicas int32) (*ReplicaSet, error) {
	match := map[string]string{"app": spec.Name}
	tmpl := MakePod(spec)
	tmpl.Labels = map[string]string{"app": spec.Name}
	for k, v := range spec.Labels {
		tmpl.Labels[k] = v
	}
	rs, err := c.AppsV1().ReplicaSets(spec.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: match},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ReplicaSet %s: %w", spec.Name, err)
	}
	return &ReplicaSet{c: c, rs: rs, selector: labels.SelectorFromSet(match)}, nil
}

// Name is the ReplicaSet's name.
func (r *ReplicaSet) Name() string { return r.rs.Name }

// Pods are the ReplicaSet's pods, oldest first.
func (r *ReplicaSet) Pods(ctx context.Context) ([]v1.Pod, error) {
	l, err := r.c.CoreV1().Pods(r.rs.Namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector.String()})
	if err != nil {
		return nil, err
	}
	pods := l.Items[:0]
	for _, p := range l.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.UID == r.rs.UID {
			pods = append(pods, p)
		}
	}
	sortOldestFirst(pods)
	return pods, nil
}

// Active are the names of its pods that have not failed or succeeded, for
// Eventually.
func (r *ReplicaSet) Active(ctx context.Context) func() ([]string, error) {
	return func() ([]string, error) {
		pods, err := r.Pods(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range pods {
			if p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded && p.DeletionTimestamp == nil {
				out = append(out, p.Name)
			}
		}
		return out, nil
	}
}

// ScaleUp adds one replica and names the pod the controller creates for it.
func (r *ReplicaSet) ScaleUp(ctx context.Context) (string, error) {
	before, err := r.Pods(ctx)
	if err != nil {
		return "", err
	}
	known := sets.New[string]()
	for _, p := range before {
		known.Insert(p.Name)
	}
	rs, err := r.c.AppsV1().ReplicaSets(r.rs.Namespace).Get(ctx, r.rs.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, ptr.Deref(rs.Spec.Replicas, 0)+1)
	if _, err := r.c.AppsV1().ReplicaSets(r.rs.Namespace).Patch(ctx, r.rs.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return "", fmt.Errorf("scaling ReplicaSet %s up: %w", r.rs.Name, err)
	}
	var added string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := r.Pods(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if !known.Has(p.Name) {
				added = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("ReplicaSet %s scaled up, but its controller created no pod: %w (is kube-controller-manager running?)", r.rs.Name, err)
	}
	return added, nil
}

// Close scales the ReplicaSet to zero, waits until its controller has seen
// that, then deletes it and its pods (the suites run no garbage collector,
// and a controller still syncing the old replicas would create pods again).
func (r *ReplicaSet) Close(ctx context.Context) error {
	rs, err := r.c.AppsV1().ReplicaSets(r.rs.Namespace).Patch(ctx, r.rs.Name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil {
		gen := rs.Generation
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
			cur, err := r.c.AppsV1().ReplicaSets(r.rs.Namespace).Get(ctx, r.rs.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return cur.Status.ObservedGeneration >= gen && cur.Status.Replicas == 0, nil
		}); err != nil {
			return fmt.Errorf("ReplicaSet %s scaled to 0, but its controller did not observe it: %w", r.rs.Name, err)
		}
		if err := r.c.AppsV1().ReplicaSets(r.rs.Namespace).Delete(ctx, r.rs.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// Its Failed (and any remaining) pods.
	return r.c.CoreV1().Pods(r.rs.Namespace).DeleteCollection(ctx, *metav1.NewDeleteOptions(0), metav1.ListOptions{LabelSelector: r.selector.String()})
}

// sortOldestFirst orders pods by creation, then name (creation timestamps
// have a resolution of a second).
func sortOldestFirst(pods []v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return strings.Compare(pods[i].Name, pods[j].Name) < 0
	})
}
