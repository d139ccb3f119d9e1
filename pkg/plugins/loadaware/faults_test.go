package loadaware

import (
	"fmt"
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

// annotated is a 4 CPU / 8Gi node whose exporter wrote value.
func annotated(name, value string) *framework.NodeInfo {
	ni := testNode(name)
	n := ni.Node().DeepCopy()
	n.Annotations = map[string]string{"berth.io/node-usage": value}
	n.ResourceVersion = "1"
	ni.SetNode(n)
	return ni
}

// A broken exporter must never make its node more attractive than a node
// with a valid sample. Reproduces the review's run: 40 pods over nine equal
// nodes whose annotations were broken in different ways.
func TestMalformedSamplesNeverAttractPods(t *testing.T) {
	ts := now.Add(-10 * time.Second).Format(time.RFC3339)
	usage := func(cpu, mem, at string) string {
		return fmt.Sprintf(`{"cpu":%q,"memory":%q,"timestamp":%q}`, cpu, mem, at)
	}
	valid := []*framework.NodeInfo{annotated("valid-1", usage("1", "2Gi", ts)), annotated("valid-2", usage("1", "2Gi", ts))}
	broken := []*framework.NodeInfo{
		annotated("negative-cpu", usage("-4", "2Gi", ts)),
		annotated("negative-memory", usage("1", "-2Gi", ts)),
		annotated("huge-memory", usage("1", "7Ei", ts)),
		annotated("huge-cpu", usage("9223372036854775807", "2Gi", ts)),
		annotated("over-allocatable", usage("100", "2Gi", ts)),
		annotated("not-json", `{"cpu":`),
		annotated("no-timestamp", `{"cpu":"1","memory":"2Gi"}`),
	}
	// Stamped 24h ahead: clamped to when it was read, so it is as fresh as
	// the valid ones, and burst estimation still works on it.
	future := annotated("future", usage("1", "2Gi", now.Add(24*time.Hour).Format(time.RFC3339)))
	src := newAnnotationSource("berth.io/node-usage")
	src.now = func() time.Time { return now }
	pl, _ := testPlugin(t, src, func(a *configv1.LoadAwareArgs) { a.Source = configv1.LoadAwareSourceNodeAnnotations })
	_, ctx := ktesting.NewTestContext(t)
	all := append(append(append([]*framework.NodeInfo{}, broken...), future), valid...)
	placed := map[string]int{}
	for i := range 40 {
		pod := podReq(fmt.Sprintf("p%d", i), "100m", "100Mi")
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		if s := pl.PreScore(ctx, state, pod, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		scores := map[string]int64{}
		best, bestScore := "", int64(-1)
		// Broken nodes first: a tie goes to them, the worst case.
		for _, ni := range all {
			if s := pl.Filter(ctx, state, pod, ni); !s.IsSuccess() {
				continue
			}
			v, s := pl.Score(ctx, state, pod, ni)
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			scores[ni.Node().Name] = v
			if v > bestScore {
				best, bestScore = ni.Node().Name, v
			}
		}
		minValid := fwk.MaxScore + 1
		for _, ni := range valid {
			if v, ok := scores[ni.Node().Name]; ok && v < minValid {
				minValid = v
			}
		}
		for _, ni := range broken {
			if v, ok := scores[ni.Node().Name]; ok && v > fwk.MinScore && v >= minValid {
				t.Fatalf("pod %d: broken node %s scored %d, a valid node %d", i, ni.Node().Name, v, minValid)
			}
		}
		if best == "" {
			t.Fatalf("pod %d fits nowhere", i)
		}
		pl.Reserve(ctx, state, pod, best)
		placed[best]++
	}
	for _, ni := range broken {
		if n := placed[ni.Node().Name]; n > 0 {
			t.Errorf("broken node %s took %d pods (placed: %v)", ni.Node().Name, n, placed)
		}
	}
	if f, v := placed["future"], min(placed["valid-1"], placed["valid-2"]); f > v+1 {
		t.Errorf("the future-stamped node took %d pods, the valid ones at least %d: burst estimation is off there (placed: %v)", f, v, placed)
	}
	// The future-stamped sample expires like any other.
	if smp, ok := pl.source.sample(future.Node()); classify(ok, smp.invalid, staleAt(smp, ok, pl.staleBefore(now.Add(pl.expiration+time.Second))), pl.missingFilter, pl.staleFilter, pl.invalidFilter) != sampleMissing {
		t.Errorf("the future-stamped sample is still fresh %s later", pl.expiration+time.Second)
	}
}

// A pod keeps its estimate until it has run for the grace period before a
// sample: a newer sample taken while it pulls its image does not include it.
func TestEstimateKeptUntilThePodRuns(t *testing.T) {
	src := fakeSource{"n1": fresh(1000, 1)}
	pl, _ := testPlugin(t, src, nil)
	_, ctx := ktesting.NewTestContext(t)
	pod := podReq("slow-start", "2", "")
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, pod, nil)
	pl.Reserve(ctx, state, pod, "n1")
	// The binding lands; the kubelet is pulling the image.
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "n1"
	bound.Status.Phase = v1.PodPending
	h := pl.podEventHandler()
	h.OnUpdate(pod, bound)

	// A sample taken after the binding, while the pod does not run yet.
	src["n1"] = sample{cpuMilli: 1000, memBytes: 1 << 30, timestamp: now.Add(30 * time.Second)}
	pl.onRefresh(klog.Background(), src)
	if got := pl.tracker.pending("n1", src["n1"].timestamp); got.cpuMilli != 2000 {
		t.Fatalf("pending cpu %dm after a sample taken before the pod ran, want 2000m", got.cpuMilli)
	}
	// 1000m measured + 2000m pending + 500m > 80% of 4 CPU: the node is full.
	if s := runFilter(t, pl, podReq("next", "500m", ""), testNode("n1")); s.IsSuccess() {
		t.Error("a pod passed a node whose earlier pod's estimate was dropped before it ran")
	}

	// Running from +40s: a sample at +70s is within the 60s grace, one at +101s is not.
	running := bound.DeepCopy()
	running.Status.Phase = v1.PodRunning
	for _, c := range running.Spec.Containers {
		running.Status.ContainerStatuses = append(running.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(40 * time.Second))}}})
	}
	h.OnUpdate(bound, running)
	src["n1"] = sample{cpuMilli: 3000, memBytes: 1 << 30, timestamp: now.Add(70 * time.Second)}
	pl.onRefresh(klog.Background(), src)
	if n := pl.tracker.len(); n != 1 {
		t.Errorf("tracker holds %d pods after a sample within the grace period, want 1", n)
	}
	src["n1"] = sample{cpuMilli: 3000, memBytes: 1 << 30, timestamp: now.Add(101 * time.Second)}
	pl.onRefresh(klog.Background(), src)
	if n := pl.tracker.len(); n != 0 {
		t.Errorf("tracker holds %d pods after a sample a grace period after the pod started, want 0", n)
	}
}

// onMissingMetrics: Reject turns pods away from nodes without a sample; the
// refresh that brings the sample must give them another chance.
func TestRejectMissingRetriesOnTheRefreshThatBringsTheSample(t *testing.T) {
	src := fakeSource{}
	pl, h := testPlugin(t, src, func(a *configv1.LoadAwareArgs) { a.OnMissingMetrics = configv1.LoadAwareMissingMetricsReject })
	pod := podReq("waiting", "500m", "")
	if s := runFilter(t, pl, pod, testNode("new-node")); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("status %v, want rejected for missing metrics", s)
	}
	pl.onRefresh(klog.Background(), map[string]sample{"new-node": fresh(100, 1)})
	if _, ok := h.activated["ns/waiting"]; !ok {
		t.Errorf("pod rejected for missing metrics not activated by the refresh that brings them; activated: %v", h.activated)
	}
}

// Node churn must not grow the annotation cache or the rejected set.
func TestMapsShrinkWithNodeChurn(t *testing.T) {
	src := newAnnotationSource("berth.io/node-usage")
	pl, _ := testPlugin(t, src, func(a *configv1.LoadAwareArgs) { a.Source = configv1.LoadAwareSourceNodeAnnotations })
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pl.nodeLister = corelisters.NewNodeLister(indexer)
	src.exists = func(name string) bool { // as New wires it
		_, err := pl.nodeLister.Get(name)
		return err == nil
	}
	hot := fmt.Sprintf(`{"cpu":"4","memory":"8Gi","timestamp":%q}`, now.Format(time.RFC3339))
	for i := range 1000 {
		ni := annotated(fmt.Sprintf("n%d", i), hot)
		if err := indexer.Add(ni.Node()); err != nil {
			t.Fatal(err)
		}
		if s := runFilter(t, pl, podReq(fmt.Sprintf("p%d", i), "1", ""), ni); s.IsSuccess() {
			t.Fatal("a full node passed")
		}
		// The node is deleted: the informer's handler forgets it...
		if err := indexer.Delete(ni.Node()); err != nil {
			t.Fatal(err)
		}
		src.forget(ni.Node().Name)
		// ...and a Filter on a snapshot taken before the deletion parses it again.
		runFilter(t, pl, podReq(fmt.Sprintf("late%d", i), "1", ""), ni)
	}
	pl.prune()
	if n := src.len(); n != 0 {
		t.Errorf("annotation cache holds %d nodes after every node was deleted, want 0", n)
	}
	if n := len(pl.rejected); n != 0 {
		t.Errorf("rejected holds %d pods under NodeAnnotations (the node hint requeues them), want 0", n)
	}
}

// A sample is fresh up to exactly metricsExpiration old, with or without a
// monotonic clock reading, and the oldest and newest timestamps a source
// can give are judged without overflow.
func TestSampleFreshnessAtItsBounds(t *testing.T) {
	pl := newPlugin(defaultArgs(t, nil), nil)
	exp := pl.expiration
	wall := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	mono := time.Now()
	for _, c := range []struct {
		name  string
		now   time.Time
		stamp time.Time
		want  sampleState
	}{
		{"exactly expiration old", wall, wall.Add(-exp), sampleFresh},
		{"a nanosecond older", wall, wall.Add(-exp - 1), sampleMissing},
		{"taken now", wall, wall, sampleFresh},
		{"from the future", wall, wall.Add(time.Hour), sampleFresh},
		{"year 1", wall, time.Time{}, sampleMissing},
		{"year 9999", wall, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), sampleFresh},
		{"monotonic, exactly expiration old", mono, mono.Add(-exp), sampleFresh},
		{"monotonic, a nanosecond older", mono, mono.Add(-exp - 1), sampleMissing},
		{"wall-clock sample, monotonic now", mono, mono.Round(0).Add(-exp - 1), sampleMissing},
	} {
		s := sample{cpuMilli: 1, timestamp: c.stamp}
		if got := classify(true, false, staleAt(s, true, pl.staleBefore(c.now)), pl.missingFilter, pl.staleFilter, pl.invalidFilter); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A node line judges a sample's age in Unix nanoseconds: for every bound
// and every timestamp a line can hold, the same as time.Time's Before,
// bounds outside the range of Unix nanoseconds and monotonic readings
// included.
func TestLineStalenessMatchesTime(t *testing.T) {
	wall := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	bounds := []time.Time{
		wall, time.Now(), wall.Add(-87600 * time.Hour), {}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
		minUnixNano, minUnixNano.Add(-1), minUnixNano.Add(1), maxUnixNano, maxUnixNano.Add(1), maxUnixNano.Add(-1),
	}
	for _, b := range bounds {
		stamps := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		if !b.Before(minUnixNano) && !b.After(maxUnixNano) {
			n := b.UnixNano()
			stamps = append(stamps, n)
			if n > math.MinInt64 {
				stamps = append(stamps, n-1)
			}
			if n < math.MaxInt64 {
				stamps = append(stamps, n+1)
			}
		}
		ns, all := unixNanoBound(b)
		for _, ts := range stamps {
			var l nodeLine
			l[2] = uint64(ts)
			if got, want := l.stale(ns, all), time.Unix(0, ts).Before(b); got != want {
				t.Errorf("bound %v, timestamp %d ns: stale %v, want %v", b, ts, got, want)
			}
		}
	}
}
