package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The AdmissionFeedback scenario, run after the other scenarios settled: a
// node whose kubelet refuses every pod (its device plugin lost its devices:
// UnexpectedAdmissionError), the roomiest of three, so the scheduler prefers
// it. A stand-in ReplicaSet controller replaces each Failed pod. With the
// default profile the replacements go back to the node for as long as the
// demo lets them (loopWindow); with AdmissionFeedback the node refuses one
// pod and the replacement lands elsewhere.
const loopWindow = 3 * time.Second

func runAdmissionFeedback(ctx context.Context, c kubernetes.Interface, timeout time.Duration) ([]outcome, error) {
	rc, err := StartRefusalCluster(ctx, c, "demo")
	if err != nil {
		return nil, err
	}
	// The stand-ins' watches end with the scenario; their pods and nodes
	// stay for DEMO_KEEP=1.
	defer rc.Stop()
	step("admissionfeedback: %s (the roomiest of three nodes) refuses every pod at admission: %s", rc.BlackHole, RefusalReason)

	loop, err := StartReplacer(ctx, c, rc.PodSpec(ns, "loop-web", "default-scheduler"), 1)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(loopWindow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	loop.Stop()
	looped, lastLoopPod := refusedOf(rc, "loop-web-")
	step("admissionfeedback: default profile: %s refused %d pods of ReplicaSet loop-web in %s; the demo stopped that ReplicaSet", rc.BlackHole, looped, loopWindow)
	loopNode, err := sandbox.NodeNameOf(ctx, c, ns, lastLoopPod)()
	if err != nil {
		return nil, err
	}

	af, err := StartReplacer(ctx, c, rc.PodSpec(ns, "af-web", "berth-admissionfeedback"), 1)
	if err != nil {
		return nil, err
	}
	defer af.Stop()
	var replacement, node string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if pods := af.Pods(); len(pods) < 2 {
			return false, nil
		}
		replacement = af.Latest()
		node, err = sandbox.NodeNameOf(ctx, c, ns, replacement)()
		return node != "", err
	}); err != nil {
		return nil, fmt.Errorf("admissionfeedback: af-web's replacement was not placed: %w", err)
	}
	first, err := c.CoreV1().Pods(ns).Get(ctx, af.Pods()[0], metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	refusedOnce, _ := refusedOf(rc, "af-web-")
	step("admissionfeedback: berth-admissionfeedback: %s refused %d pod(s) of ReplicaSet af-web; the replacement %s went to %s", rc.BlackHole, refusedOnce, replacement, node)
	return []outcome{
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: lastLoopPod, SchedulerName: "default-scheduler"}, expectNode: rc.BlackHole,
			why: fmt.Sprintf("default profile: %d replacements of ReplicaSet loop-web in %s, each sent back to %s and refused (the demo stopped the loop)", looped, loopWindow, rc.BlackHole)},
			node: loopNode},
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: first.Name, SchedulerName: "berth-admissionfeedback"}, expectNode: rc.BlackHole,
			why: fmt.Sprintf("refused by %s's kubelet: %s %s", first.Spec.NodeName, first.Status.Phase, first.Status.Reason)},
			node: first.Spec.NodeName},
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: replacement, SchedulerName: "berth-admissionfeedback"}, expectNode: "admits-demo-*",
			showEvent: "NodeRefusedSibling", why: fmt.Sprintf("the replacement went to another node (refusals of af-web: %d)", refusedOnce)},
			node: node, message: latestMessage(ctx, c, replacement, "NodeRefusedSibling")},
	}, nil
}

// refusedOf counts the pods named prefix* the black hole refused, and names
// the last.
func refusedOf(rc *RefusalCluster, prefix string) (n int, last string) {
	for _, p := range rc.Kubelet.RefusedPods() {
		if name, ok := strings.CutPrefix(p, ns+"/"); ok && strings.HasPrefix(name, prefix) {
			n, last = n+1, name
		}
	}
	return n, last
}

// latestMessage is the pod's latest event message of reason ("" if none yet).
func latestMessage(ctx context.Context, c kubernetes.Interface, name, reason string) string {
	msg, _, _ := latestEvent(ctx, c, demoPod{spec: sandbox.PodSpec{Namespace: ns, Name: name}}, reason)
	return msg
}
