package loadaware

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/berth-scheduler/berth/apis/config"
	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeSource serves fixed samples.
type fakeSource map[string]sample

func (f fakeSource) sample(node *v1.Node) (sample, bool) {
	s, ok := f[node.Name]
	return s, ok
}

// version is constant: tests that change a fakeSource's samples do not use
// the node records (they pass PreFilter no node list).
func (f fakeSource) version() uint64 { return 0 }

// activator records Activate calls; the rest of the handle is unused.
type activator struct {
	fwk.Handle
	activated map[string]*v1.Pod
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	if a.activated == nil {
		a.activated = map[string]*v1.Pod{}
	}
	for k, p := range pods {
		a.activated[k] = p
	}
}

func defaultArgs(t testing.TB, mutate func(*configv1.LoadAwareArgs)) *config.LoadAwareArgs {
	t.Helper()
	v1args := &configv1.LoadAwareArgs{}
	if mutate != nil {
		mutate(v1args)
	}
	configv1.SetDefaults_LoadAwareArgs(v1args)
	args := &config.LoadAwareArgs{}
	if err := configv1.Convert_v1_LoadAwareArgs_To_config_LoadAwareArgs(v1args, args, nil); err != nil {
		t.Fatal(err)
	}
	return args
}

func testPlugin(t testing.TB, src usageSource, mutate func(*configv1.LoadAwareArgs)) (*LoadAware, *activator) {
	t.Helper()
	registerMetrics()
	h := &activator{}
	pl := newPlugin(defaultArgs(t, mutate), h)
	pl.source = src
	pl.now = func() time.Time { return now }
	return pl, h
}

// node has 4 CPU and 8Gi allocatable.
func testNode(name string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110"}).Obj())
	return ni
}

func podReq(name, cpu, mem string) *v1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Container("c")
	req := map[v1.ResourceName]string{}
	if cpu != "" {
		req["cpu"] = cpu
	}
	if mem != "" {
		req["memory"] = mem
	}
	if len(req) > 0 {
		w = w.Req(req)
	}
	return w.Obj()
}

func runFilter(t *testing.T, pl *LoadAware, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
		return s
	}
	return pl.Filter(ctx, state, pod, ni)
}

func runScore(t *testing.T, pl *LoadAware, pod *v1.Pod, ni fwk.NodeInfo) int64 {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, pod, nil)
	if s := pl.PreScore(ctx, state, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	v, s := pl.Score(ctx, state, pod, ni)
	if !s.IsSuccess() {
		t.Fatal(s)
	}
	return v
}

func fresh(cpuMilli, memGi int64) sample {
	return sample{cpuMilli: cpuMilli, memBytes: memGi << 30, timestamp: now.Add(-10 * time.Second)}
}

func TestFilterThresholds(t *testing.T) {
	tests := []struct {
		name   string
		sample *sample
		pod    *v1.Pod
		mutate func(*configv1.LoadAwareArgs)
		want   fwk.Code
		reason string
	}{
		{name: "idle node", sample: &sample{cpuMilli: 100, memBytes: 1 << 30, timestamp: now}, pod: podReq("p", "1", "1Gi"), want: fwk.Success},
		// 2800m + 500m = 3300m of 4000m = 82.5% > 80%
		{name: "cpu over 80%", sample: ptr(fresh(2800, 1)), pod: podReq("p", "500m", "1Gi"), want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonCPU},
		// 2700m + 500m = 80% exactly: allowed
		{name: "cpu at 80%", sample: ptr(fresh(2700, 1)), pod: podReq("p", "500m", "1Gi"), want: fwk.Success},
		// 6Gi + 1Gi = 87.5% > 85%
		{name: "memory over 85%", sample: ptr(fresh(100, 6)), pod: podReq("p", "100m", "1Gi"), want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonMemory},
		{name: "threshold 0 turns cpu off", sample: ptr(fresh(3900, 1)), pod: podReq("p", "500m", "1Gi"),
			mutate: func(a *configv1.LoadAwareArgs) { a.UsageThresholds = map[v1.ResourceName]int64{v1.ResourceCPU: 0} }, want: fwk.Success},
		{name: "custom threshold", sample: ptr(fresh(1800, 1)), pod: podReq("p", "500m", "1Gi"),
			mutate: func(a *configv1.LoadAwareArgs) { a.UsageThresholds = map[v1.ResourceName]int64{v1.ResourceCPU: 50} }, want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonCPU},
		// No requests: default estimate 250m; 3000m + 250m = 81.25%
		{name: "default estimate for a pod without requests", sample: ptr(fresh(3000, 1)), pod: podReq("p", "", ""), want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonCPU},
		{name: "missing metrics, Allow", pod: podReq("p", "1", "1Gi"), want: fwk.Success},
		{name: "missing metrics, Reject", pod: podReq("p", "1", "1Gi"),
			mutate: func(a *configv1.LoadAwareArgs) { a.OnMissingMetrics = configv1.LoadAwareMissingMetricsReject }, want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonNoMetrics},
		{name: "stale metrics, Allow", sample: &sample{cpuMilli: 3900, timestamp: now.Add(-4 * time.Minute)}, pod: podReq("p", "1", "1Gi"), want: fwk.Success},
		{name: "stale metrics, Reject", sample: &sample{cpuMilli: 100, timestamp: now.Add(-4 * time.Minute)}, pod: podReq("p", "1", "1Gi"),
			mutate: func(a *configv1.LoadAwareArgs) { a.OnMissingMetrics = configv1.LoadAwareMissingMetricsReject }, want: fwk.UnschedulableAndUnresolvable, reason: ErrReasonNoMetrics},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := fakeSource{}
			if tc.sample != nil {
				src["n1"] = *tc.sample
			}
			pl, _ := testPlugin(t, src, tc.mutate)
			got := runFilter(t, pl, tc.pod, testNode("n1"))
			if got.Code() != tc.want {
				t.Fatalf("code = %v (%v), want %v", got.Code(), got.Reasons(), tc.want)
			}
			if tc.reason != "" {
				if diff := cmp.Diff([]string{tc.reason}, got.Reasons()); diff != "" {
					t.Errorf("reasons (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDaemonSetPodsAreExempt(t *testing.T) {
	pl, _ := testPlugin(t, fakeSource{"n1": fresh(3999, 7)}, nil)
	ds := st.MakePod().Namespace("kube-system").Name("agent").UID("agent").Container("c").
		OwnerReference("agent", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}).Obj()
	if got := runFilter(t, pl, ds, testNode("n1")); got.Code() != fwk.Skip {
		t.Errorf("DaemonSet pod: %v, want Skip", got.Code())
	}
	if got := runFilter(t, pl, podReq("p", "1", ""), testNode("n1")); got.IsSuccess() {
		t.Error("an ordinary pod passed a node at 100% CPU")
	}
}

func TestBurstIsEstimatedUntilTheNextSample(t *testing.T) {
	src := fakeSource{"n1": fresh(1000, 1)}
	pl, _ := testPlugin(t, src, nil)
	_, ctx := ktesting.NewTestContext(t)
	ni := testNode("n1")
	// 1000m measured; each pod 500m. Threshold 3200m: four pods fit (3000m + 500m > 3200m rejects the 5th).
	placed := 0
	for i := range 10 {
		pod := podReq("burst-"+string(rune('a'+i)), "500m", "100Mi")
		if s := runFilter(t, pl, pod, ni); !s.IsSuccess() {
			break
		}
		state := framework.NewCycleState()
		pl.PreFilter(ctx, state, pod, nil)
		pl.Reserve(ctx, state, pod, "n1")
		placed++
	}
	if placed != 4 {
		t.Fatalf("placed %d pods before the estimate filled the node, want 4", placed)
	}
	if got := pl.tracker.pending("n1", src["n1"].timestamp); got.cpuMilli != 2000 {
		t.Errorf("pending cpu = %d, want 2000", got.cpuMilli)
	}
	// A newer sample does not include pods that are not running yet: their
	// estimates stay.
	src["n1"] = sample{cpuMilli: 3000, memBytes: 1 << 30, timestamp: now.Add(time.Second)}
	pl.onRefresh(klog.Background(), src)
	if n := pl.tracker.len(); n != 4 {
		t.Errorf("tracker holds %d pods after a newer sample taken before they ran, want 4", n)
	}
	// Once they have run for the grace period before a sample, it includes them.
	for i := range 4 {
		pl.tracker.add(types.UID("burst-"+string(rune('a'+i))), assignedPod{node: "n1", startedAt: now.Add(2 * time.Second)})
	}
	src["n1"] = sample{cpuMilli: 3000, memBytes: 1 << 30, timestamp: now.Add(2*time.Second + time.Minute)}
	pl.onRefresh(klog.Background(), src)
	if n := pl.tracker.len(); n != 0 {
		t.Errorf("tracker holds %d pods after a sample taken a grace period after they started, want 0", n)
	}
	// Unreserve forgets a pod whose binding failed.
	pod := podReq("late", "100m", "")
	pl.Reserve(ctx, framework.NewCycleState(), pod, "n1")
	pl.Unreserve(ctx, framework.NewCycleState(), pod, "n1")
	if n := pl.tracker.len(); n != 0 {
		t.Errorf("tracker holds %d pods after Unreserve, want 0", n)
	}
}

func TestScore(t *testing.T) {
	src := fakeSource{"cool": fresh(400, 1), "hot": fresh(3000, 6)}
	pl, _ := testPlugin(t, src, nil)
	pod := podReq("p", "400m", "1Gi")
	cool, hot := runScore(t, pl, pod, testNode("cool")), runScore(t, pl, pod, testNode("hot"))
	// cool: cpu 800/4000 -> 80, memory 2/8 -> 75: 78 (rounded avg of 80 and 75 = 77.5 -> integer division 77)
	if cool != 77 {
		t.Errorf("cool score = %d, want 77", cool)
	}
	if hot >= cool {
		t.Errorf("hot node scored %d >= cool node %d", hot, cool)
	}
	// Without metrics, Score falls back to requested resources.
	missing := testNode("unknown")
	missing.AddPod(podReq("existing", "2", "4Gi"))
	// cpu (2000+400)/4000 -> 40, memory 5/8 -> 38: (40+38)/2 = 39
	if got := runScore(t, pl, pod, missing); got != 39 {
		t.Errorf("score without metrics = %d, want 39", got)
	}
	// Weights: memory only.
	plMem, _ := testPlugin(t, src, func(a *configv1.LoadAwareArgs) {
		a.ResourceWeights = map[v1.ResourceName]int64{v1.ResourceCPU: 0, v1.ResourceMemory: 2}
	})
	if got := runScore(t, plMem, pod, testNode("cool")); got != 75 {
		t.Errorf("memory-only score = %d, want 75", got)
	}
}

func TestMetricsAPISourceRefresh(t *testing.T) {
	client := metricsfake.NewSimpleClientset()
	ts := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{{
			ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Timestamp: ts, Window: metav1.Duration{Duration: 15 * time.Second},
			Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("2Gi")},
		}}}, nil
	})
	registerMetrics()
	refreshes := 0
	src := newMetricsAPISource(client, 5*time.Second, func(klog.Logger, map[string]sample) { refreshes++ })
	_, ctx := ktesting.NewTestContext(t)
	if err := src.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := src.sample(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	want := sample{cpuMilli: 1500, memBytes: 2 << 30, timestamp: ts.Time}
	if !ok || got != want {
		t.Fatalf("sample = %+v, %v; want %+v", got, ok, want)
	}
	// A failed list keeps the snapshot.
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("metrics API unavailable")
	})
	if err := src.refresh(ctx); err == nil {
		t.Fatal("want an error from the failing list")
	}
	if got, ok := src.sample(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); !ok || got != want {
		t.Errorf("after a failed refresh sample = %+v, %v; want the previous one", got, ok)
	}
	if refreshes != 1 {
		t.Errorf("onRefresh ran %d times, want 1", refreshes)
	}
}

func TestRefreshLoopStopsWithTheScheduler(t *testing.T) {
	client := metricsfake.NewSimpleClientset()
	src := newMetricsAPISource(client, 5*time.Second, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go src.run(ctx)
	cancel()
	select {
	case <-src.done:
	case <-time.After(10 * time.Second):
		t.Fatal("refresh loop still running 10s after its context was cancelled")
	}
}

func TestRejectedPodsAreActivatedOnRefresh(t *testing.T) {
	src := fakeSource{"n1": fresh(3900, 1)}
	pl, h := testPlugin(t, src, nil)
	pod := podReq("waiting", "500m", "")
	if s := runFilter(t, pl, pod, testNode("n1")); s.IsSuccess() {
		t.Fatal("hot node passed")
	}
	pl.onRefresh(klog.Background(), map[string]sample{"n1": fresh(100, 1)})
	if _, ok := h.activated["ns/waiting"]; !ok {
		t.Errorf("rejected pod not activated after a refresh; activated: %v", h.activated)
	}
	h.activated = nil
	pl.onRefresh(klog.Background(), map[string]sample{"n1": fresh(100, 1)})
	if len(h.activated) != 0 {
		t.Errorf("pods activated twice: %v", h.activated)
	}
}

func TestAnnotationSource(t *testing.T) {
	src := newAnnotationSource("berth.io/node-usage")
	registerMetrics()
	node := st.MakeNode().Name("n1").Annotation("berth.io/node-usage", `{"cpu":"1500m","memory":"3Gi","timestamp":"2026-11-29T11:59:50Z"}`).Obj()
	node.ResourceVersion = "1"
	got, ok := src.sample(node)
	want := sample{cpuMilli: 1500, memBytes: 3 << 30, timestamp: time.Date(2026, 11, 29, 11, 59, 50, 0, time.UTC)}
	if !ok || got.cpuMilli != want.cpuMilli || got.memBytes != want.memBytes || !got.timestamp.Equal(want.timestamp) {
		t.Fatalf("sample = %+v, %v; want %+v", got, ok, want)
	}
	// An annotation that does not decode is an invalid sample (never better
	// than a valid one), not a missing one.
	for _, bad := range []string{`not json`, `{"cpu":"1"}`, `{"cpu":"lots","memory":"1Gi","timestamp":"2026-11-29T11:59:50Z"}`} {
		n := node.DeepCopy()
		n.Annotations["berth.io/node-usage"] = bad
		n.ResourceVersion = bad
		if s, ok := src.sample(n); !ok || !s.invalid {
			t.Errorf("annotation %q: sample %+v, %v; want an invalid sample", bad, s, ok)
		}
	}
	if _, ok := src.sample(st.MakeNode().Name("n2").Obj()); ok {
		t.Error("a node without the annotation has a sample")
	}
}

func TestValidateRejectsBadArgs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	args := defaultArgs(t, func(a *configv1.LoadAwareArgs) {
		a.UsageThresholds = map[v1.ResourceName]int64{v1.ResourceCPU: 120, "nvidia.com/gpu": 50}
		a.MetricsRefreshInterval = &metav1.Duration{Duration: time.Second}
	})
	_, err := New(ctx, args, nil)
	if err == nil {
		t.Fatal("New accepted bad args")
	}
	for _, want := range []string{"usageThresholds[cpu]: Invalid value: 120", `usageThresholds[nvidia.com/gpu]: Unsupported value`, "metricsRefreshInterval: Invalid value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestAnnotationHint(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl, _ := testPlugin(t, newAnnotationSource("berth.io/node-usage"), nil)
	mk := func(cpu, rv string) *v1.Node {
		n := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi"}).
			Annotation("berth.io/node-usage", `{"cpu":"`+cpu+`","memory":"1Gi","timestamp":"2026-11-29T11:59:50Z"}`).Obj()
		n.ResourceVersion = rv
		return n
	}
	pod := podReq("p", "500m", "")
	if got, _ := pl.isSchedulableAfterAnnotation(logger, pod, nil, mk("3900m", "1")); got != fwk.QueueSkip {
		t.Errorf("still hot: %v, want QueueSkip", got)
	}
	if got, _ := pl.isSchedulableAfterAnnotation(logger, pod, nil, mk("500m", "2")); got != fwk.Queue {
		t.Errorf("cooled: %v, want Queue", got)
	}
}

func TestSignPod(t *testing.T) {
	pl, _ := testPlugin(t, fakeSource{}, nil)
	_, ctx := ktesting.NewTestContext(t)
	sign := func(p *v1.Pod) []fwk.SignFragment {
		frags, s := pl.SignPod(ctx, p)
		if !s.IsSuccess() {
			t.Fatalf("SignPod(%s) = %v, want success: LoadAware must keep batching on", p.Name, s)
		}
		return frags
	}
	a, b := sign(podReq("a", "500m", "1Gi")), sign(podReq("b", "500m", "1Gi"))
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("pods with the same estimate signed differently (-a,+b):\n%s", diff)
	}
	if diff := cmp.Diff(a, sign(podReq("c", "1", "1Gi"))); diff == "" {
		t.Error("pods with different estimates signed alike")
	}
	ds := st.MakePod().Namespace("ns").Name("ds").UID("ds").Container("c").Req(map[v1.ResourceName]string{"cpu": "500m", "memory": "1Gi"}).
		OwnerReference("agent", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}).Obj()
	if diff := cmp.Diff(a, sign(ds)); diff == "" {
		t.Error("a DaemonSet pod signed like an ordinary pod with the same estimate")
	}
}

func TestPodDeletedHint(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl, _ := testPlugin(t, fakeSource{"n1": fresh(1000, 1)}, nil) // sampled 10s before now
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []string{"n1", "n2"} { // n2 has no sample
		if err := indexer.Add(testNode(n).Node()); err != nil {
			t.Fatal(err)
		}
	}
	pl.nodeLister = corelisters.NewNodeLister(indexer)
	deleted := func(scheduledAgo time.Duration, node string) *v1.Pod {
		p := podReq("gone", "1", "")
		p.Spec.NodeName = node
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-scheduledAgo))}}
		// Running since shortly after it was scheduled.
		p.Status.Phase = v1.PodRunning
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-scheduledAgo + time.Second))}}})
		}
		return p
	}
	notStarted := deleted(5*time.Minute, "n1")
	notStarted.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want fwk.QueueingHint
	}{
		// Not in the tracker either way: the hint must not depend on it (the
		// pod informer's handler may already have forgotten the pod).
		{"assigned after the sample: its estimate is freed", deleted(2*time.Second, "n1"), fwk.Queue},
		{"included in the sample: nothing changes until the next one", deleted(5*time.Minute, "n1"), fwk.QueueSkip},
		{"running for less than the grace period before the sample: its estimate is freed", deleted(time.Minute, "n1"), fwk.Queue},
		{"never started: its estimate is freed", notStarted, fwk.Queue},
		{"node without a sample: Score uses requests", deleted(5*time.Minute, "n2"), fwk.Queue},
		{"node unknown to the lister", deleted(5*time.Minute, "n3"), fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterPodDeleted(logger, podReq("pending", "1", ""), tc.pod, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("hint = %v, want %v", got, tc.want)
			}
		})
	}
}

// pending's shortcut (a sample older than every pod's inclusion counts all
// of them) agrees with checking each pod, on random pods and sample times.
func TestTrackerPendingMatchesEachPod(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 18))
	base := now
	for trial := range 500 {
		tr := newTracker(time.Duration(rng.IntN(60)) * time.Second)
		var pods []assignedPod
		for i := range 1 + rng.IntN(6) {
			p := assignedPod{node: "n", est: estimate{cpuMilli: int64(1 + rng.IntN(1000)), memBytes: int64(1 + rng.IntN(1<<30))},
				at: base.Add(time.Duration(rng.IntN(120)) * time.Second)}
			if rng.IntN(2) == 0 {
				p.startedAt = p.at.Add(time.Duration(rng.IntN(60)) * time.Second)
			}
			pods = append(pods, p)
			tr.add(types.UID(fmt.Sprintf("p%d", i)), p)
		}
		since := base.Add(time.Duration(rng.IntN(240)) * time.Second)
		var want estimate
		for _, p := range pods {
			if !p.includedBy(since, tr.grace) {
				want.cpuMilli += p.est.cpuMilli
				want.memBytes += p.est.memBytes
			}
		}
		if got := tr.pending("n", since); got != want {
			t.Fatalf("trial %d: pending = %+v, each pod says %+v (pods %+v, since %s)", trial, got, want, pods, since)
		}
	}
}
