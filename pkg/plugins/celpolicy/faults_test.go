package celpolicy

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

// hintFor returns the queueing hint CELPolicy registers for resource.
func hintFor(t *testing.T, pl *CELPolicy, resource fwk.EventResource) fwk.QueueingHintFn {
	t.Helper()
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Event.Resource == resource {
			return e.QueueingHintFn
		}
	}
	t.Fatalf("no event registered for %s: a change of it waits for the periodic flush", resource)
	return nil
}

// A pod rejected by a rule that reads the pod is requeued when the pod
// itself changes so that the rule may let it through, and only then.
func TestPodUpdateRequeuesThePodItself(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := newPlugin(t,
		config.CELPolicyRule{Name: "batch-on-batch-pool", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Filter: "node.metadata.labels.?pool.orValue('') == 'batch'"},
		config.CELPolicyRule{Name: "opt-in", Filter: "pod.metadata.?annotations['berth.io/spot-ok'].orValue('') == 'true' || node.metadata.labels.?lifecycle.orValue('') != 'spot'"},
	)
	batch := st.MakePod().Namespace("ns").Name("p").UID("p").Label("tier", "batch").Obj()
	web := batch.DeepCopy()
	web.Labels["tier"] = "web"
	annotated := batch.DeepCopy()
	annotated.Annotations = map[string]string{"berth.io/spot-ok": "true"}
	other := batch.DeepCopy()
	other.Labels["team"] = "ml"

	noPodFilter := newPlugin(t, config.CELPolicyRule{Name: "batch-on-batch-pool", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Filter: "node.metadata.labels.?pool.orValue('') == 'batch'"})
	for _, tc := range []struct {
		name     string
		pl       *CELPolicy
		old, new *v1.Pod
		want     fwk.QueueingHint
	}{
		{"relabelled tier: batch -> web: the rule no longer matches", pl, batch, web, fwk.Queue},
		{"opt-in annotation added: a pod-reading filter may pass", pl, batch, annotated, fwk.Queue},
		{"an unrelated label, no pod-reading filter: nothing changes", noPodFilter, batch, other, fwk.QueueSkip},
		// Issue #26 item 10: Explain's own write of its result (and the
		// request that asks for it) is not a change of the pod a rule reads.
		{"Explain writes its result: no requeue, even with a pod-reading filter", pl, explainAsked(batch, false), explainAsked(batch, true), fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hintFor(t, tc.pl, fwk.TargetPod)
			got, err := h(logger, tc.new, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}

// A node update that leaves the rule's outcome as it was (an annotation
// LoadAware writes, a heartbeat condition) requeues nothing.
func TestNodeHintComparesOldAndNew(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := newPlugin(t, config.CELPolicyRule{Name: "spot-only", Filter: "node.metadata.labels.?lifecycle.orValue('') == 'spot'"})
	hint := hintFor(t, pl, fwk.Node)
	spot := spotNode.DeepCopy()
	annotated := spot.DeepCopy()
	annotated.Annotations["berth.io/node-usage"] = `{"cpu":"1"}`
	onDemand := spot.DeepCopy()
	onDemand.Labels["lifecycle"] = "on-demand"
	for _, tc := range []struct {
		name     string
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		{"passed before and after (annotation written)", spot, annotated, fwk.QueueSkip},
		{"now passes", onDemand, spot, fwk.Queue},
		{"node added and passes", nil, spot, fwk.Queue},
		{"fails after", spot, onDemand, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hint(logger, batchPod, tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
	// One node event runs the hint once per pending pod: its nodes are
	// converted to CEL once.
	if _, err := hint(logger, batchPod, spot, annotated); err != nil {
		t.Fatal(err)
	}
	converted := pl.lastNodeVals.Load()
	for range 100 {
		if _, err := hint(logger, plainPod, spot, annotated); err != nil {
			t.Fatal(err)
		}
	}
	if pl.lastNodeVals.Load() != converted {
		t.Error("the same node event's objects were converted to CEL again for another pending pod")
	}
	// A rule reading nodeInfo may pass once allocatable grows.
	room := newPlugin(t, config.CELPolicyRule{Name: "room", Filter: "nodeInfo.free['cpu'].isGreaterThan(quantity('2'))"})
	grown := spot.DeepCopy()
	grown.Status.Allocatable[v1.ResourceCPU] = *resourceQuantity("64")
	if got, _ := hintFor(t, room, fwk.Node)(logger, batchPod, spot, grown); got != fwk.Queue {
		t.Errorf("allocatable grown under a nodeInfo rule: hint %v, want Queue", got)
	}
}

type snapshotHandle struct {
	fwk.Handle
	snapshot *internalcache.Snapshot
}

func (h *snapshotHandle) SnapshotSharedLister() fwk.SharedLister                 { return h.snapshot }
func (h *snapshotHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

// After a preemption dry-run (or with nominated pods) the scheduler's own
// NodeInfo must still be served from the cache, not rebuilt on every lookup.
func TestNodeCacheSurvivesNodeInfoCopies(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	running := st.MakePod().Namespace("ns").Name("victim").UID("victim").Node("spot").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	snapshot := internalcache.NewSnapshot([]*v1.Pod{running}, []*v1.Node{spotNode.DeepCopy()})
	p, err := New(ctx, &config.CELPolicyArgs{Rules: []config.CELPolicyRule{{Name: "few-pods", Filter: "nodeInfo.podCount < 5", FailurePolicy: config.CELFailurePolicyFail}}}, &snapshotHandle{snapshot: snapshot})
	if err != nil {
		t.Fatal(err)
	}
	pl := p.(*CELPolicy)
	real, err := snapshot.NodeInfos().Get("spot")
	if err != nil {
		t.Fatal(err)
	}
	evals := func() float64 { return value(t, pl.counters[0].filter.isTrue) }
	filterResult(t, pl, batchPod, real.(*framework.NodeInfo))
	before := evals()
	// A dry run removes the victim from a copy (a newer generation).
	cp := real.Snapshot()
	if err := cp.RemovePod(klog.Background(), running); err != nil {
		t.Fatal(err)
	}
	filterResult(t, pl, batchPod, cp.(*framework.NodeInfo))
	for range 10 {
		filterResult(t, pl, batchPod, real.(*framework.NodeInfo))
	}
	if n := evals() - before; n != 1 {
		t.Errorf("filter evaluated %v times for one copy and ten lookups of the real NodeInfo, want 1 (the copy)", n)
	}
}

// The queue signs pods when they are added, and PreFilter runs later, after
// the rest of the burst: each pod's match is still evaluated once.
func TestMatchEvaluatedOncePerPodInABurst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newPlugin(t, config.CELPolicyRule{Name: "once-per-pod", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Filter: "true"})
	var pods []*v1.Pod
	for i := range 100 {
		p := batchPod.DeepCopy()
		p.Name, p.UID, p.ResourceVersion = fmt.Sprintf("b%d", i), ktypesUID(i), "1"
		pods = append(pods, p)
	}
	before := value(t, pl.counters[0].match.isTrue)
	for _, p := range pods {
		pl.SignPod(ctx, p)
	}
	for _, p := range pods {
		pl.PreFilter(ctx, framework.NewCycleState(), p, nil)
	}
	if n := value(t, pl.counters[0].match.isTrue) - before; n != 100 {
		t.Errorf("match evaluated %v times for 100 pods signed then filtered, want 100", n)
	}
}

// Node churn must not grow the node cache, even when a Filter on a snapshot
// taken before a node's deletion runs after it.
func TestNodeCacheShrinksWithNodeChurn(t *testing.T) {
	pl := newPlugin(t, config.CELPolicyRule{Name: "spot-only", Filter: "node.metadata.labels.?lifecycle.orValue('') == 'spot'"})
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pl.nodeLister = corelisters.NewNodeLister(indexer)
	for i := range 1000 {
		n := spotNode.DeepCopy()
		n.Name = fmt.Sprintf("n%d", i)
		if err := indexer.Add(n); err != nil {
			t.Fatal(err)
		}
		filterResult(t, pl, batchPod, nodeInfo(n))
		if err := indexer.Delete(n); err != nil {
			t.Fatal(err)
		}
		pl.cache.remove(n.Name) // the node informer's delete handler
		filterResult(t, pl, batchPod, nodeInfo(n))
	}
	if n := pl.cache.len(); n != 0 {
		t.Errorf("node cache holds %d nodes after every node was deleted, want 0", n)
	}
}

func ktypesUID(i int) ktypes.UID { return ktypes.UID(fmt.Sprintf("uid-%d", i)) }

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// explainAsked is p asking Explain for an explanation, with its result
// written if written.
func explainAsked(p *v1.Pod, written bool) *v1.Pod {
	p = p.DeepCopy()
	p.ResourceVersion = "1"
	p.Annotations = map[string]string{"explain.berth.dev/request": "true"}
	if written {
		p.ResourceVersion = "2"
		p.Annotations["explain.berth.dev/result"] = `{"version":"explain.berth.dev/v1alpha1","outcome":"Pending"}`
	}
	return p
}
