package main

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
)

// The AdmissionFeedback scenario, run after the other scenarios settled, on
// the sandbox's real substrate (internal/sandbox, as the integration suites):
// three KWOK nodes, the roomiest of which (LeastAllocated prefers it) refuses
// every pod at admission through KWOK's refusal Stage (its device plugin lost
// its devices: UnexpectedAdmissionError), and kube-controller-manager's
// ReplicaSet controller, which replaces each Failed pod. With the default
// profile the replacements go back to the node for as long as the demo lets
// them (loopWindow); with AdmissionFeedback the node refuses one pod and the
// replacement lands elsewhere.
const loopWindow = 3 * time.Second

func runAdmissionFeedback(ctx context.Context, c kubernetes.Interface, kwok *sandbox.KWOK, timeout time.Duration) ([]outcome, error) {
	rc, err := sandbox.StartRefusalCluster(ctx, kwok, "demo")
	if err != nil {
		return nil, err
	}
	// The nodes, the refusal Stage and af-web stay for DEMO_KEEP=1 (loop-web
	// is deleted once counted); the control plane goes with them otherwise.
	step("admissionfeedback: KWOK node %s (the roomiest of three) refuses every pod at admission: %s", rc.BlackHole, sandbox.RefusalReason)

	loop, err := sandbox.CreateReplicaSet(ctx, c, rc.PodSpec(ns, "loop-web", "default-scheduler"), 1)
	if err != nil {
		return nil, err
	}
	// Should the scenario fail before the loop is stopped (DEMO_KEEP=1
	// keeps the cluster up), the loop must not go on refusing for ever.
	closed := false
	defer func() {
		if !closed {
			_ = loop.Close(context.WithoutCancel(ctx))
		}
	}()
	select {
	case <-time.After(loopWindow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Scaled to zero (and deleted): the loop stops; its Failed pods were
	// read first.
	looped, lastLoop, err := refusedOf(ctx, rc, loop)
	if err != nil {
		return nil, err
	}
	closed = true
	if err := loop.Close(ctx); err != nil {
		return nil, err
	}
	if looped == 0 {
		return nil, fmt.Errorf("admissionfeedback: %s refused no pod of ReplicaSet loop-web in %s (is KWOK's refusal Stage on?)", rc.BlackHole, loopWindow)
	}
	step("admissionfeedback: default profile: %s refused %d pods of ReplicaSet loop-web in %s; the demo scaled it to 0", rc.BlackHole, looped, loopWindow)

	af, err := sandbox.CreateReplicaSet(ctx, c, rc.PodSpec(ns, "af-web", "berth-admissionfeedback"), 1)
	if err != nil {
		return nil, err
	}
	// The refused pod and the controller's replacement (creation times have
	// a resolution of a second, so the order of af.Pods does not tell them
	// apart: the phase does).
	var refusedOnce int
	var first v1.Pod
	var replacement, node string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if refusedOnce, first, err = refusedOf(ctx, rc, af); err != nil || refusedOnce == 0 {
			return false, nil
		}
		pods, err := af.Pods(ctx)
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				replacement, node = p.Name, p.Spec.NodeName
			}
		}
		return node != "", nil
	}); err != nil {
		return nil, fmt.Errorf("admissionfeedback: af-web's replacement was not placed: %w", err)
	}
	step("admissionfeedback: berth-admissionfeedback: %s refused %d pod(s) of ReplicaSet af-web; the controller's replacement %s went to %s", rc.BlackHole, refusedOnce, replacement, node)
	return []outcome{
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: lastLoop.Name, SchedulerName: "default-scheduler"}, expectNode: rc.BlackHole,
			why: fmt.Sprintf("default profile: %d replacements of ReplicaSet loop-web in %s, each sent back to %s and refused (the demo stopped the loop)", looped, loopWindow, rc.BlackHole)},
			node: lastLoop.Spec.NodeName},
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: first.Name, SchedulerName: "berth-admissionfeedback"}, expectNode: rc.BlackHole,
			why: fmt.Sprintf("refused by %s's kubelet: %s %s", first.Spec.NodeName, first.Status.Phase, first.Status.Reason)},
			node: first.Spec.NodeName},
		{pod: demoPod{scenario: "admissionfeedback", spec: sandbox.PodSpec{Namespace: ns, Name: replacement, SchedulerName: "berth-admissionfeedback"}, expectNode: "admits-demo-*",
			showEvent: "NodeRefusedSibling", why: fmt.Sprintf("the replacement went to another node (refusals of af-web: %d)", refusedOnce)},
			node: node, message: latestMessage(ctx, c, replacement, "NodeRefusedSibling")},
	}, nil
}

// refusedOf counts the pods of r the black hole refused (Failed there with
// the refusal's reason), and returns the last.
func refusedOf(ctx context.Context, rc *sandbox.RefusalCluster, r *sandbox.ReplicaSet) (n int, last v1.Pod, err error) {
	pods, err := r.Pods(ctx)
	if err != nil {
		return 0, v1.Pod{}, err
	}
	for _, p := range pods {
		if p.Spec.NodeName == rc.BlackHole && p.Status.Phase == v1.PodFailed && p.Status.Reason == sandbox.RefusalReason {
			n, last = n+1, p
		}
	}
	return n, last, nil
}

// latestMessage is the pod's latest event message of reason ("" if none yet).
func latestMessage(ctx context.Context, c kubernetes.Interface, name, reason string) string {
	msg, _, _ := latestEvent(ctx, c, demoPod{spec: sandbox.PodSpec{Namespace: ns, Name: name}}, reason)
	return msg
}
