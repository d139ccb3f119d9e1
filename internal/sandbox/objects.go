package sandbox

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// NodeSpec describes a test node.
type NodeSpec struct {
	Name   string
	CPU    string // allocatable and capacity, e.g. "4"
	Memory string // e.g. "8Gi"
	Pods   string // defaults to "110"
	// Extended are extra allocatable resources, e.g. {"nvidia.com/gpu": "1"}.
	Extended    map[string]string
	Labels      map[string]string
	Annotations map[string]string
	Taints      []v1.Taint
}

// allocatable is the node's allocatable (and capacity): CPU, memory, pods
// (110 unless set) and the extended resources.
func (s NodeSpec) allocatable() v1.ResourceList {
	pods := s.Pods
	if pods == "" {
		pods = "110"
	}
	rl := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(s.CPU),
		v1.ResourceMemory: resource.MustParse(s.Memory),
		v1.ResourcePods:   resource.MustParse(pods),
	}
	for k, q := range s.Extended {
		rl[v1.ResourceName(k)] = resource.MustParse(q)
	}
	return rl
}

// CreateNode creates a Ready node with the given allocatable resources, as a
// kubelet would register it (status is written with UpdateStatus).
func CreateNode(ctx context.Context, c kubernetes.Interface, s NodeSpec) (*v1.Node, error) {
	rl := s.allocatable()
	labels := map[string]string{v1.LabelHostname: s.Name}
	for k, v := range s.Labels {
		labels[k] = v
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels, Annotations: s.Annotations},
		Spec:       v1.NodeSpec{Taints: s.Taints},
	}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", s.Name, err)
	}
	created.Status = v1.NodeStatus{
		Capacity:    rl,
		Allocatable: rl,
		Phase:       v1.NodeRunning,
		Conditions: []v1.NodeCondition{{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	updated, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("making node %s ready: %w", s.Name, err)
	}
	return updated, nil
}

// PodSpec describes a test pod with one container.
type PodSpec struct {
	Namespace     string
	Name          string
	SchedulerName string // defaults to default-scheduler
	CPU, Memory   string // requests (and limits); empty means none
	Extended      map[string]string
	Labels        map[string]string
	Annotations   map[string]string
	Tolerations   []v1.Toleration
	NodeSelector  map[string]string
	HostPort      int32
	// PriorityClassName names an existing PriorityClass.
	PriorityClassName string
	// Claim mounts this PersistentVolumeClaim at /data.
	Claim string
}

// MakePod builds a pod (not yet created). The container never runs: envtest
// has no kubelet.
func MakePod(s PodSpec) *v1.Pod {
	req := v1.ResourceList{}
	if s.CPU != "" {
		req[v1.ResourceCPU] = resource.MustParse(s.CPU)
	}
	if s.Memory != "" {
		req[v1.ResourceMemory] = resource.MustParse(s.Memory)
	}
	for k, q := range s.Extended {
		req[v1.ResourceName(k)] = resource.MustParse(q)
	}
	c := v1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Requests: req, Limits: req}}
	if s.HostPort != 0 {
		c.Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: s.HostPort, Protocol: v1.ProtocolTCP}}
	}
	var volumes []v1.Volume
	if s.Claim != "" {
		c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: s.Claim},
		}}}
	}
	ns := s.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations},
		Spec: v1.PodSpec{
			SchedulerName:     s.SchedulerName,
			Containers:        []v1.Container{c},
			Tolerations:       s.Tolerations,
			NodeSelector:      s.NodeSelector,
			PriorityClassName: s.PriorityClassName,
			Volumes:           volumes,
		},
	}
}

// CreatePod creates the pod described by s.
func CreatePod(ctx context.Context, c kubernetes.Interface, s PodSpec) (*v1.Pod, error) {
	p, err := c.CoreV1().Pods(MakePod(s).Namespace).Create(ctx, MakePod(s), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating pod %s: %w", s.Name, err)
	}
	return p, nil
}

// CreateDeployment creates a Deployment of replicas pods made as s describes
// (its Name is the Deployment's; pods are labelled app=<name>), each
// stopping at once when deleted (terminationGracePeriodSeconds 0), as
// kube-controller-manager's Deployment controller then runs them.
func CreateDeployment(ctx context.Context, c kubernetes.Interface, s PodSpec, replicas int32) (*appsv1.Deployment, error) {
	tmpl := MakePod(s)
	labels := map[string]string{"app": s.Name}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	d, err := c.AppsV1().Deployments(tmpl.Namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: s.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.Name}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating Deployment %s: %w", s.Name, err)
	}
	return d, nil
}

// NodeNameOf returns a poller for the pod's spec.nodeName, for Eventually.
func NodeNameOf(ctx context.Context, c kubernetes.Interface, namespace, name string) func() (string, error) {
	return func() (string, error) {
		p, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Spec.NodeName, nil
	}
}

// EventsFor returns a poller for the events whose involved object is named
// name (a pod, a PodGroup) and whose reason is reason (e.g.
// "FailedScheduling", "Scheduled").
func EventsFor(ctx context.Context, c kubernetes.Interface, namespace, name, reason string) func() ([]v1.Event, error) {
	return func() ([]v1.Event, error) {
		sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
		l, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
}

// EventMessages maps events to their messages, for matchers.
func EventMessages(events []v1.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Message)
	}
	return out
}

// Namespace builds a namespace with a generated name.
func Namespace(prefix string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
}

// PlayKubelet removes pods being deleted in the namespaces (all, if none is
// given) every 200ms until ctx ends, as kubelets would once the containers
// stopped: no kubelet runs on envtest, so a gracefully deleted pod — a
// preemption victim, say — would otherwise stay Terminating for ever.
func PlayKubelet(ctx context.Context, c kubernetes.Interface, namespaces ...string) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, ns := range namespaces {
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					_ = c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
				}
			}
		}
	}, 200*time.Millisecond)
}
