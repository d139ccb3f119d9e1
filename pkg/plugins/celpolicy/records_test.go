package celpolicy

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

// TestNodeRecordsDecideAsTheByNamePath drives random clusters, pods and
// node churn (nodes added, removed, updated; pods landing on nodes, which
// moves their NodeInfo generation) through two plugins with the same rules:
// one that PreFilter gives the snapshot's node list (Filter and Score read
// the node records), one that it does not (they read the by-name cache).
// Filter statuses and Scores must agree node by node, for the snapshot's
// NodeInfos and for copies of them (nominated pods, preemption).
func TestNodeRecordsDecideAsTheByNamePath(t *testing.T) {
	ruleSets := map[string][]config.CELPolicyRule{
		// No rule reads nodeInfo: states are kept per Node object.
		"labels": {
			{Name: "no-gpu", Match: "!('gpu' in pod.metadata.labels)", Filter: "!('gpu' in node.metadata.labels)"},
			{Name: "not-draining", Filter: "node.metadata.?labels['draining'].orValue('false') != 'true'"},
			{Name: "spot", Score: "node.metadata.?labels.?lifecycle.orValue('') == 'spot' ? 100 : 10"},
		},
		// nodeInfo: states follow the NodeInfo generation.
		"nodeInfo": {
			{Name: "few-pods", Filter: "nodeInfo.podCount < 4"},
			{Name: "headroom", Filter: "nodeInfo.free['cpu'].isGreaterThan(quantity('500m'))", FailurePolicy: config.CELFailurePolicyIgnore},
			{Name: "free-cpu", Score: "100.0 * nodeInfo.free['cpu'].asApproximateFloat() / nodeInfo.allocatable['cpu'].asApproximateFloat()"},
		},
		// Outcomes other than pass in the node lines: a filter and a score
		// that fail (no lifecycle label) under Fail and under Ignore.
		"errors": {
			{Name: "spot-only-fail", Filter: "node.metadata.labels['lifecycle'] == 'spot' || nodeInfo.podCount > 2"},
			{Name: "spot-score-ignore", Score: "node.metadata.labels['lifecycle'] == 'spot' ? 80 : 30", FailurePolicy: config.CELFailurePolicyIgnore},
			{Name: "spot-score-fail", Score: "node.metadata.labels['lifecycle'] == 'spot' ? 60 : 40", Weight: 3},
			{Name: "zone-filter-ignore", Filter: "node.metadata.labels['lifecycle'] != 'x'", FailurePolicy: config.CELFailurePolicyIgnore},
		},
		// The same without nodeInfo: lines checked against the Node object.
		"errors-by-node": {
			{Name: "spot-only-fail", Filter: "node.metadata.labels['lifecycle'] == 'spot' || 'gpu' in node.metadata.labels"},
			{Name: "spot-score-ignore", Score: "node.metadata.labels['lifecycle'] == 'spot' ? 80 : 30", FailurePolicy: config.CELFailurePolicyIgnore},
			{Name: "spot-score-fail", Score: "node.metadata.labels['lifecycle'] == 'spot' ? 60 : 40", Weight: 3},
		},
		// Five scored rules: the fifth is past the line's scores, so Score
		// reads the node state; the filters stay in the line.
		"many-scores": {
			{Name: "s0", Score: "node.metadata.labels['zone'] == 'a' ? 100 : 0"},
			{Name: "s1", Score: "node.metadata.?labels.?lifecycle.orValue('') == 'spot' ? 70 : 20", Weight: 2},
			{Name: "s2", Score: "nodeInfo.podCount * 7"},
			{Name: "s3", Filter: "!('draining' in node.metadata.labels)", Score: "33.3"},
			{Name: "s4", Match: "'gpu' in pod.metadata.labels", Score: "'gpu' in node.metadata.labels ? 100 : 1"},
		},
		// A filter and a score that read the pod, beside cached ones.
		"pod-reading": {
			{Name: "same-zone", Filter: "node.metadata.labels[?'zone'].orValue('') != pod.metadata.?labels.?avoid.orValue('x')"},
			{Name: "zone-score", Score: "node.metadata.labels[?'zone'].orValue('') == pod.metadata.?labels.?zone.orValue('') ? 90 : 20", Weight: 2},
			{Name: "busy", Score: "nodeInfo.podCount * 10"},
		},
	}
	for name, rules := range ruleSets {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(30) {
				runRecordTrial(t, rules, seed)
			}
		})
	}
}

func runRecordTrial(t *testing.T, rules []config.CELPolicyRule, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 28))
	_, ctx := ktesting.NewTestContext(t)
	withRecords, byName := newPlugin(t, rules...), newPlugin(t, rules...)
	zones := []string{"a", "b", "c"}
	newNode := func(name string) *v1.Node {
		w := st.MakeNode().Name(name).Label("zone", zones[rng.IntN(3)]).
			Capacity(map[v1.ResourceName]string{"cpu": fmt.Sprint(1 + rng.IntN(4)), "memory": "8Gi", "pods": "110"})
		if rng.IntN(4) == 0 {
			w = w.Label("gpu", "true")
		}
		if rng.IntN(5) == 0 {
			w = w.Label("draining", "true")
		}
		if rng.IntN(2) == 0 {
			w = w.Label("lifecycle", "spot")
		}
		return w.Obj()
	}
	newPod := func(name string) *v1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).Label("zone", zones[rng.IntN(3)]).Req(map[v1.ResourceName]string{"cpu": fmt.Sprintf("%dm", 100+rng.IntN(900))})
		if rng.IntN(3) == 0 {
			w = w.Label("avoid", zones[rng.IntN(3)])
		}
		if rng.IntN(5) == 0 {
			w = w.Label("gpu", "yes")
		}
		return w.Obj()
	}
	var list []fwk.NodeInfo
	var incoming []*v1.Pod
	next := 0
	addNode := func() {
		ni := framework.NewNodeInfo()
		ni.SetNode(newNode(fmt.Sprintf("n%d", next)))
		next++
		list = append(list[:len(list):len(list)], ni)
	}
	for range 3 + rng.IntN(20) {
		addNode()
	}
	for step := range 40 {
		switch op := rng.IntN(6); {
		case op == 0:
			if rng.IntN(2) == 0 || len(list) < 2 {
				addNode()
			} else {
				i := rng.IntN(len(list))
				list = append(append([]fwk.NodeInfo{}, list[:i]...), list[i+1:]...)
			}
		case op == 1: // a node updated: a new Node object in the same NodeInfo
			ni := list[rng.IntN(len(list))].(*framework.NodeInfo)
			ni.SetNode(newNode(ni.Node().Name))
		case op <= 3: // a pod placed: the NodeInfo's generation moves
			list[rng.IntN(len(list))].(*framework.NodeInfo).AddPod(newPod(fmt.Sprintf("placed-%d", step)))
		}
		pod := newPod(fmt.Sprintf("incoming-%d", step))
		if len(incoming) > 0 && rng.IntN(2) == 0 {
			// A pod seen before, at the same resourceVersion: PreFilter
			// reuses its match results (matchPodOnce's copy of the state).
			pod = incoming[rng.IntN(len(incoming))]
		} else {
			pod.ResourceVersion = "1"
			incoming = append(incoming, pod)
		}
		stateR, stateN := framework.NewCycleState(), framework.NewCycleState()
		_, sR := withRecords.PreFilter(ctx, stateR, pod, list)
		_, sN := byName.PreFilter(ctx, stateN, pod, nil)
		if sR.Code() != sN.Code() && (!sR.IsSuccess() || !sN.IsSuccess()) {
			// The label index may reject the pod outright where the
			// by-name plugin rejects it node by node.
			if sR.Code() != fwk.UnschedulableAndUnresolvable {
				t.Fatalf("seed %d step %d: PreFilter with records %v, by name %v", seed, step, sR, sN)
			}
		}
		scoring := withRecords.PreScore(ctx, stateR, pod, nil).IsSuccess()
		byName.PreScore(ctx, stateN, pod, nil)
		for i, ni := range list {
			for _, n := range []fwk.NodeInfo{ni, ni.Snapshot()} {
				if !sR.IsSkip() && sR.IsSuccess() {
					got, want := withRecords.Filter(ctx, stateR, pod, n), byName.Filter(ctx, stateN, pod, n)
					if got.Code() != want.Code() || got.Message() != want.Message() {
						t.Fatalf("seed %d step %d node %d (%s): Filter with records %v, by name %v", seed, step, i, n.Node().Name, got, want)
					}
				}
				if scoring {
					got, _ := withRecords.Score(ctx, stateR, pod, n)
					want, _ := byName.Score(ctx, stateN, pod, n)
					if got != want {
						t.Fatalf("seed %d step %d node %d (%s): Score with records %d, by name %d", seed, step, i, n.Node().Name, got, want)
					}
				}
			}
		}
	}
	if withRecords.records.Len() != len(list) {
		t.Fatalf("seed %d: the records follow %d nodes, the list has %d", seed, withRecords.records.Len(), len(list))
	}
}
