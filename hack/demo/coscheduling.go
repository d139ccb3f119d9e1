package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// The Coscheduling scenario: a training job's gang of eight one-CPU pods
// (a scheduler-plugins PodGroup, minMember 8) on two nodes that fit six.
// Six members fit and are held at Permit, the seventh fits nowhere, so the
// six are released at once and nothing is bound; when a third node joins
// (phase 1), the gang lands as a whole.
const (
	gangGroup   = "train"
	gangMembers = 8
)

var (
	gangTaint      = v1.Taint{Key: "berth.io/demo", Value: "coscheduling", Effect: v1.TaintEffectNoSchedule}
	gangNodes      = map[string]string{"berth.io/demo": "coscheduling"}
	gangToleration = []v1.Toleration{{Key: "berth.io/demo", Operator: v1.TolerationOpExists}}
	// gangJoiner joins the cluster at the start of phase 1.
	gangJoiner = sandbox.NodeSpec{Name: "gang-3", CPU: "3", Memory: "8Gi", Taints: []v1.Taint{gangTaint}, Labels: gangNodes}
)

// gangPods are the scenario's members: pending in phase 0, on a gang-* node
// once gang-3 joined.
func gangPods() []demoPod {
	pods := make([]demoPod, gangMembers)
	for i := range pods {
		pods[i] = demoPod{scenario: "coscheduling", pendingUntil: 1, expectNode: "gang-*", showEvent: "Explained",
			spec: sandbox.PodSpec{Namespace: ns, Name: fmt.Sprintf("%s-%d", gangGroup, i), SchedulerName: "berth-coscheduling", CPU: "1", Memory: "1Gi",
				Tolerations: gangToleration, NodeSelector: gangNodes, Labels: map[string]string{schedv1alpha1.PodGroupLabel: gangGroup}, Annotations: explainRequest},
			why: "gang of 8 on nodes that fit 6: nothing bound (phase 0), then all 8 at once when gang-3 joined"}
	}
	return pods
}

// createPodGroup creates the scenario's PodGroup.
func createPodGroup(ctx context.Context, cfg *rest.Config) error {
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = c.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gangGroup},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: gangMembers, ScheduleTimeoutSeconds: ptr.To[int32](60)},
	}, metav1.CreateOptions{})
	return err
}

// joinGangNode adds the node that gives the gang room (phase 1's action).
func joinGangNode(ctx context.Context, c kubernetes.Interface) error {
	step("coscheduling: node %s joins (3 CPU): the gang of %d now fits", gangJoiner.Name, gangMembers)
	_, err := sandbox.CreateNode(ctx, c, gangJoiner)
	return err
}
