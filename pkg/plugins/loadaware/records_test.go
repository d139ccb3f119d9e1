package loadaware

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

// versionedSource is a MetricsAPI-like source the test refreshes: a new
// map and a new version, as metricsAPISource.refresh stores them.
type versionedSource struct {
	samples map[string]sample
	v       uint64
}

func (s *versionedSource) sample(node *v1.Node) (sample, bool) {
	smp, ok := s.samples[node.Name]
	return smp, ok
}

func (s *versionedSource) version() uint64 { return s.v }

// TestNodeRecordsDecideAsTheByNamePath drives random clusters, samples,
// pods and node churn through two plugins: one that PreFilter gives the
// snapshot's node list (Filter and Score read the node records), one that
// it does not (they read the source and the tracker by name, as before the
// records). Every Filter status and Score must agree node by node, and
// also for copies of the NodeInfos (nominated pods, preemption).
func TestNodeRecordsDecideAsTheByNamePath(t *testing.T) {
	for _, src := range []string{"metrics", "annotations"} {
		t.Run(src, func(t *testing.T) {
			for seed := range uint64(40) {
				runRecordTrial(t, src, seed)
			}
		})
	}
}

func runRecordTrial(t *testing.T, srcKind string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 28))
	_, ctx := ktesting.NewTestContext(t)
	mutate := func(a *configv1.LoadAwareArgs) {
		a.UsageThresholds = map[v1.ResourceName]int64{v1.ResourceCPU: int64(40 + rng.IntN(50)), v1.ResourceMemory: int64(40 + rng.IntN(50))}
		if rng.IntN(3) == 0 {
			a.OnMissingMetrics = configv1.LoadAwareMissingMetricsReject
		}
	}
	withRecords, _ := testPlugin(t, nil, mutate)
	byName, _ := testPlugin(t, nil, nil)
	byName.cpuThreshold, byName.memThreshold, byName.rejectMissing = withRecords.cpuThreshold, withRecords.memThreshold, withRecords.rejectMissing
	clock := now
	if seed%4 == 3 {
		// A clock with a monotonic reading, as a test's time.Now(): the
		// MetricsAPI samples' timestamps carry it, and a node line cannot
		// (nodeline.go), so these trials read the records behind the lines.
		clock = time.Now()
	}
	for _, pl := range []*LoadAware{withRecords, byName} {
		pl.now = func() time.Time { return clock }
	}
	metrics := &versionedSource{samples: map[string]sample{}}
	if srcKind == "metrics" {
		withRecords.source, byName.source = metrics, metrics
	} else {
		for _, pl := range []*LoadAware{withRecords, byName} {
			a := newAnnotationSource(configv1.DefaultLoadAwareAnnotationKey)
			a.now = func() time.Time { return clock }
			pl.source = a
		}
	}

	randomSample := func() sample {
		s := sample{cpuMilli: int64(rng.IntN(4500)), memBytes: int64(rng.IntN(9)) << 30, timestamp: clock.Add(-time.Duration(rng.IntN(600)) * time.Second)}
		if rng.IntN(10) == 0 {
			s.invalid = true
		}
		if rng.IntN(25) == 0 {
			// Past what a line's Unix nanoseconds hold: the record is read.
			s.timestamp = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return s
	}
	newNode := func(name string) *v1.Node {
		n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": fmt.Sprint(2 + rng.IntN(6)), "memory": fmt.Sprintf("%dGi", 4+rng.IntN(12)), "pods": "110"}).Obj()
		if srcKind == "annotations" && rng.IntN(5) > 0 {
			s := randomSample()
			n.Annotations = map[string]string{configv1.DefaultLoadAwareAnnotationKey: fmt.Sprintf(`{"cpu":"%dm","memory":"%d","timestamp":%q}`, s.cpuMilli, s.memBytes, s.timestamp.Format(time.RFC3339))}
			if rng.IntN(10) == 0 {
				n.Annotations[configv1.DefaultLoadAwareAnnotationKey] = "not json"
			}
		}
		return n
	}
	var list []fwk.NodeInfo
	next := 0
	addNode := func() {
		ni := framework.NewNodeInfo()
		ni.SetNode(newNode(fmt.Sprintf("n%d", next)))
		next++
		list = append(list[:len(list):len(list)], ni) // a new list, as the snapshot builds
	}
	for range 3 + rng.IntN(20) {
		addNode()
	}
	refresh := func() {
		m := map[string]sample{}
		for _, ni := range list {
			if rng.IntN(6) > 0 {
				m[ni.Node().Name] = randomSample()
			}
		}
		metrics.samples = m
		metrics.v++
	}
	refresh()
	pods := 0
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op == 0: // a node added or removed: a new list
			if rng.IntN(2) == 0 || len(list) < 2 {
				addNode()
			} else {
				i := rng.IntN(len(list))
				list = append(append([]fwk.NodeInfo{}, list[:i]...), list[i+1:]...)
			}
		case op == 1: // a node updated: the snapshot copies a new Node object into its NodeInfo
			ni := list[rng.IntN(len(list))].(*framework.NodeInfo)
			ni.SetNode(newNode(ni.Node().Name))
		case op == 2:
			refresh()
		case op == 3:
			clock = clock.Add(time.Duration(rng.IntN(300)) * time.Second)
		case op <= 6: // a pod placed (Reserve), or seen running by the informer
			node := list[rng.IntN(len(list))].Node().Name
			p := assignedPod{node: node, est: estimate{cpuMilli: int64(rng.IntN(1500)), memBytes: int64(rng.IntN(3)) << 30}, at: clock.Add(-time.Duration(rng.IntN(300)) * time.Second)}
			if rng.IntN(2) == 0 {
				p.startedAt = p.at.Add(time.Duration(rng.IntN(120)) * time.Second)
			}
			uid := types.UID(fmt.Sprintf("p%d", pods))
			pods++
			withRecords.tracker.add(uid, p)
			byName.tracker.add(uid, p)
		default: // a pod gone
			if pods > 0 {
				uid := types.UID(fmt.Sprintf("p%d", rng.IntN(pods)))
				withRecords.tracker.remove(uid)
				byName.tracker.remove(uid)
			}
		}

		pod := podReq(fmt.Sprintf("incoming-%d", step), fmt.Sprintf("%dm", rng.IntN(2000)), fmt.Sprintf("%dMi", rng.IntN(4096)))
		stateR, stateN := framework.NewCycleState(), framework.NewCycleState()
		withRecords.PreFilter(ctx, stateR, pod, list)
		byName.PreFilter(ctx, stateN, pod, nil)
		withRecords.PreScore(ctx, stateR, pod, nil)
		byName.PreScore(ctx, stateN, pod, nil)
		for i, ni := range list {
			for _, n := range []fwk.NodeInfo{ni, ni.Snapshot()} {
				if got, want := withRecords.Filter(ctx, stateR, pod, n), byName.Filter(ctx, stateN, pod, n); got.Code() != want.Code() || got.Message() != want.Message() {
					t.Fatalf("seed %d step %d node %d (%s): Filter with records %v, by name %v", seed, step, i, n.Node().Name, got, want)
				}
				got, _ := withRecords.Score(ctx, stateR, pod, n)
				want, _ := byName.Score(ctx, stateN, pod, n)
				if got != want {
					t.Fatalf("seed %d step %d node %d (%s): Score with records %d, by name %d", seed, step, i, n.Node().Name, got, want)
				}
			}
		}
	}
	if withRecords.records.Len() != len(list) {
		t.Fatalf("seed %d: the records follow %d nodes, the list has %d", seed, withRecords.records.Len(), len(list))
	}
}
