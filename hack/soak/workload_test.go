package main

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	spfake "github.com/berth-scheduler/berth/internal/spclient/clientset/versioned/fake"
)

// The reserve fills the reserve nodes and only the reserve and the claim
// may go there; the claim is made and released at set operations, whatever
// the seed; only the refusal probe goes to the refuser's nodes.
func TestReserveClaimAndRefuser(t *testing.T) {
	ctx := context.Background()
	c, sp := fake.NewClientset(), spfake.NewSimpleClientset()
	g := newGenerator(7, c, sp, 200_000)
	if err := g.setup(ctx); err != nil {
		t.Fatal(err)
	}
	reserve, err := c.CoreV1().Pods(reserveNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reserve.Items) != reservePods {
		t.Fatalf("%d reserve pods, want %d", len(reserve.Items), reservePods)
	}
	var reserveCPU int64
	for _, p := range reserve.Items {
		req := podRequests(&p)
		reserveCPU += req.Cpu().MilliValue()
	}
	perNode := resource.MustParse(probeNodeCPU)
	nodeCPU := reserveNodes * perNode.MilliValue()
	q, err := sp.SchedulingV1alpha1().ElasticQuotas(reserveNamespace).Get(ctx, "quota", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if min, max := q.Spec.Min.Cpu().MilliValue(), q.Spec.Max.Cpu().MilliValue(); reserveCPU != nodeCPU || min != reserveCPU || max != min {
		t.Errorf("the reserve asks %dm, its nodes have %dm, its quota min %dm max %dm: want them all equal", reserveCPU, nodeCPU, min, max)
	}
	nodes := map[string]*v1.Node{}
	for _, spec := range probeNodeSpecs() {
		nodes[spec.Name] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: spec.Labels}, Spec: v1.NodeSpec{Taints: spec.Taints}}
	}
	fitsNode := func(p *v1.Pod, node *v1.Node) bool {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.Spec.Tolerations, func(*v1.Taint) bool { return true }, false)
		ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node)
		return ok && !untolerated
	}
	fits := func(p *v1.Pod) bool { return fitsNode(p, nodes["soak-reserve-0"]) }
	// The refusal probe fits both refuser nodes, nothing else of the
	// workload fits either, and it prefers the refusing one.
	probe := &v1.Pod{Spec: refusalProbe().Spec.Template.Spec}
	if !fitsNode(probe, nodes[refuserNode]) || !fitsNode(probe, nodes["soak-refuser-1"]) || fits(probe) {
		t.Errorf("the refusal probe fits %s %v, soak-refuser-1 %v, a reserve node %v; want both refuser nodes only", refuserNode, fitsNode(probe, nodes[refuserNode]), fitsNode(probe, nodes["soak-refuser-1"]), fits(probe))
	}
	if pref := probe.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(pref) != 1 || nodes[refuserNode].Labels[refuserLabel] != pref[0].Preference.MatchExpressions[0].Values[0] {
		t.Errorf("the refusal probe does not prefer %s", refuserNode)
	}
	if !fits(&reserve.Items[0]) {
		t.Errorf("a reserve pod does not fit a reserve node")
	}
	ops := map[int]string{}
	for i := 1; i <= 3*claimEvery/2; i++ {
		kind, err := g.step(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("step %d (%s): %v", i, kind, err)
		}
		ops[i] = kind
		ds, err := c.AppsV1().Deployments(claimNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made := i >= claimEvery/2 && i < claimEvery || i >= 3*claimEvery/2
		if made != (len(ds.Items) == 1) {
			t.Fatalf("after operation %d, %d claims", i, len(ds.Items))
		}
		if made && !fits(&v1.Pod{Spec: ds.Items[0].Spec.Template.Spec}) {
			t.Fatalf("the claim's pods do not fit a reserve node")
		}
	}
	if ops[claimEvery/2] != "claim" || ops[claimEvery] != "release-claim" || ops[3*claimEvery/2] != "claim" {
		t.Errorf("operations %d, %d, %d: %q, %q, %q", claimEvery/2, claimEvery, 3*claimEvery/2, ops[claimEvery/2], ops[claimEvery], ops[3*claimEvery/2])
	}
	// Nothing else the workload made fits the reserve nodes.
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, p := range pods.Items {
		if p.Namespace == reserveNamespace {
			continue
		}
		others++
		if fits(&p) || fitsNode(&p, nodes[refuserNode]) {
			t.Errorf("pod %s/%s fits a reserve or refuser node", p.Namespace, p.Name)
		}
	}
	deployments, err := c.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		if d.Namespace == claimNamespace || d.Name == "refusal-probe" {
			continue
		}
		others++
		if p := (&v1.Pod{Spec: d.Spec.Template.Spec}); fits(p) || fitsNode(p, nodes[refuserNode]) {
			t.Errorf("deployment %s/%s's pods fit a reserve or refuser node", d.Namespace, d.Name)
		}
	}
	if others == 0 {
		t.Errorf("the workload made no pod and no Deployment in %d operations", len(ops))
	}
}
