package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/ptr"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/berth-scheduler/berth/internal/snapshot"
)

const batchPoolConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: berth-sim
  plugins:
    multiPoint:
      enabled:
      - name: CELPolicy
  pluginConfig:
  - name: CELPolicy
    args:
      rules:
      - name: batch-on-batch-pool
        match: "pod.metadata.?labels.?tier.orValue('') == 'batch'"
        filter: "node.metadata.?labels.?pool.orValue('') == 'batch'"
        message: "batch pods run on the batch pool"
`

func item(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// teamNamespace is the namespace of simPod's pods.
func teamNamespace() *v1.Namespace {
	return &v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "team"}}
}

func simNode(name, pool, cpu string) *v1.Node {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
	return &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool, "kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{Capacity: alloc, Allocatable: alloc,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

func simPod(name, tier, node string, created int) *v1.Pod {
	return &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"tier": tier},
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1e9+created), 0))},
		Spec: v1.PodSpec{SchedulerName: "berth-sim", NodeName: node, Containers: []v1.Container{{Name: "app", Image: "app",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
}

const loadAwareConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: berth-sim
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
  pluginConfig:
  - name: LoadAware
    args:
      source: MetricsAPI
      usageThresholds: {cpu: 80}
`

func simulate(t *testing.T, mode Mode, objs ...runtime.Object) *Simulation {
	t.Helper()
	return simulateWith(t, batchPoolConfig, Plan{Mode: mode}, objs...)
}

func simulateWith(t *testing.T, config string, plan Plan, objs ...runtime.Object) *Simulation {
	t.Helper()
	cfg := loadConfig(t, config)
	snap := &snapshot.File{}
	snap.APIVersion, snap.Kind = snapshot.APIVersion, snapshot.Kind
	for _, o := range objs {
		snap.Items = append(snap.Items, item(t, o))
	}
	return simulateFile(t, cfg, snap, plan)
}

func loadConfig(t *testing.T, config string) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(klog.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func simulateFile(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, snap *snapshot.File, plan Plan) *Simulation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := Simulate(ctx, cfg, snap, plan)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

func outcomes(sim *Simulation) map[string]Outcome {
	m := map[string]Outcome{}
	for _, o := range sim.Outcomes {
		m[o.Name] = o
	}
	return m
}

func TestSimulatePlacesPendingPodsAsTheSchedulerWould(t *testing.T) {
	ns := teamNamespace()
	sim := simulate(t, ModePending, ns,
		simNode("web-1", "web", "4"), simNode("batch-1", "batch", "2"),
		simPod("running", "web", "web-1", 0),
		simPod("batch-a", "batch", "", 1), simPod("batch-b", "batch", "", 2), simPod("batch-c", "batch", "", 3),
		simPod("web-a", "web", "", 4))
	got := outcomes(sim)
	if len(got) != 4 {
		t.Fatalf("outcomes %+v, want the 4 pending pods (not the bound one)", sim.Outcomes)
	}
	placedOnBatch := 0
	for _, n := range []string{"batch-a", "batch-b", "batch-c"} {
		switch o := got[n]; o.Node {
		case "batch-1":
			placedOnBatch++
		case "":
			if !strings.Contains(o.Reason, "batch pods run on the batch pool") && !strings.Contains(o.Reason, "Insufficient cpu") {
				t.Errorf("%s pending with %q, want the rule's message or insufficient cpu", n, o.Reason)
			}
		default:
			t.Errorf("%s on %s: the rule allows only batch-1", n, o.Node)
		}
	}
	if placedOnBatch != 2 {
		t.Errorf("%d batch pods on batch-1 (2 CPUs), want 2: %+v", placedOnBatch, sim.Outcomes)
	}
	if got["web-a"].Node == "" {
		t.Errorf("web-a pending (%q), want it placed", got["web-a"].Reason)
	}
	if len(sim.Unmodelled) != 0 {
		t.Errorf("unmodelled %v", sim.Unmodelled)
	}
}

func TestSimulateReplacePlacesEveryPodAgainInCreationOrder(t *testing.T) {
	ns := teamNamespace()
	// Today two batch pods sit on web-1 (placed before the rule existed);
	// replaced under the rule, the first two created get batch-1's two
	// CPUs and the third stays pending.
	sim := simulate(t, ModeReplace, ns,
		simNode("web-1", "web", "4"), simNode("batch-1", "batch", "2"),
		simPod("batch-old", "batch", "web-1", 0), simPod("batch-mid", "batch", "web-1", 1), simPod("batch-new", "batch", "", 2))
	got := outcomes(sim)
	if got["batch-old"].Node != "batch-1" || got["batch-mid"].Node != "batch-1" {
		t.Errorf("outcomes %+v: want the two oldest batch pods on batch-1", sim.Outcomes)
	}
	if o := got["batch-new"]; o.Node != "" || !strings.Contains(o.Reason, "0/2 nodes are available") {
		t.Errorf("batch-new %+v: want it pending, with the scheduler's FailedScheduling message", o)
	}
}

func TestSimulateLeavesEndedPodsOutOfTheNodesRoom(t *testing.T) {
	ns := teamNamespace()
	// An evicted pod on the only node still names it and still has its
	// requests; the scheduler's informer never sees it (status.phase!=Failed).
	evicted := simPod("evicted", "web", "web-1", 0)
	evicted.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	evicted.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}
	sim := simulate(t, ModePending, ns, simNode("web-1", "web", "2"), evicted, simPod("web-a", "web", "", 1))
	if o := outcomes(sim)["web-a"]; o.Node != "web-1" {
		t.Errorf("web-a %+v: want it on web-1, whose only other pod ended", o)
	}
}

func TestSimulateReportsPreemptionVictims(t *testing.T) {
	ns := teamNamespace()
	low := simPod("low", "web", "web-1", 0)
	low.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	low.Status.Phase = v1.PodRunning
	high := simPod("high", "web", "", 1)
	prio := int32(1000)
	high.Spec.Priority = &prio
	sim := simulate(t, ModePending, ns, simNode("web-1", "web", "2"), low, high)
	got := outcomes(sim)
	if !got["low"].Preempted {
		t.Errorf("low %+v: want it reported as preempted", got["low"])
	}
	if got["high"].Node != "web-1" {
		t.Errorf("high %+v: want it on web-1 once low is gone", got["high"])
	}
}

func TestSimulateFeedsLoadAwareTheSnapshotsNodeMetrics(t *testing.T) {
	ns := teamNamespace()
	busy := &metricsv1beta1.NodeMetrics{TypeMeta: metav1.TypeMeta{APIVersion: "metrics.k8s.io/v1beta1", Kind: "NodeMetrics"},
		ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 10 * time.Second},
		Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("7600m"), v1.ResourceMemory: resource.MustParse("1Gi")}}
	idle := busy.DeepCopy()
	idle.Name = "idle"
	idle.Usage = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	// By requests the bigger busy node wins; by usage (95 %, over the 80 %
	// threshold) LoadAware keeps the pod off it.
	sim := simulateWith(t, loadAwareConfig, Plan{Mode: ModePending}, ns, simNode("busy", "web", "8"), simNode("idle", "web", "2"), busy, idle,
		simPod("web-a", "web", "", 1))
	if o := outcomes(sim)["web-a"]; o.Node != "idle" {
		t.Errorf("web-a %+v: want it on idle (busy's sampled usage is over LoadAware's threshold)", o)
	}
	if len(sim.Warnings) != 1 || !strings.Contains(sim.Warnings[0], "LoadAware (profiles berth-sim) reads node usage as the snapshot holds it") {
		t.Errorf("warnings %q, want one saying LoadAware's usage is the snapshot's", sim.Warnings)
	}
}

func TestSimulateDrainCordonsTheNodesAndPlacesTheirPodsElsewhere(t *testing.T) {
	ns := teamNamespace()
	ds := simPod("agent", "web", "web-1", 1)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
	foreign := simPod("foreign", "web", "web-1", 2)
	foreign.Spec.SchedulerName = "default-scheduler"
	// web-1 is the roomiest: without the cordon, the default profile's
	// LeastAllocated would send app back there.
	sim := simulateWith(t, batchPoolConfig, Plan{Mode: ModeDrain, Drain: []string{"web-1"}}, ns,
		simNode("web-1", "web", "8"), simNode("web-2", "web", "4"),
		simPod("app", "web", "web-1", 0), ds, foreign, simPod("stays", "web", "web-2", 3), simPod("waiting", "web", "", 4))
	got := outcomes(sim)
	if len(got) != 1 || got["app"].Node != "web-2" {
		t.Errorf("outcomes %+v: want only app, evicted from web-1 and placed on web-2 (the DaemonSet's pod, another scheduler's pod and web-2's pod stay; the pod pending before the drain is not its outcome)", sim.Outcomes)
	}
	want := []string{
		`pod team/app on drained node web-1 has no controller: kubectl drain fails unless --force, which deletes it for good (simulated as if replaced)`,
		`pod team/agent on drained node web-1 is a DaemonSet's: kubectl drain fails unless --ignore-daemonsets`,
		`pod team/foreign on drained node web-1 has no controller: kubectl drain fails unless --force, which deletes it for good (not simulated)`,
		`pod team/foreign on drained node web-1 is scheduled by "default-scheduler", which the configuration has no profile for`,
		`1 pods were pending before the drain: they are placed first`,
	}
	if len(sim.Warnings) != len(want) {
		t.Fatalf("warnings %q, want %d", sim.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(sim.Warnings[i], w) {
			t.Errorf("warning %d: %q, want it to start %q", i, sim.Warnings[i], w)
		}
	}
}

func TestSimulateDrainRefusesNodesNotInTheSnapshot(t *testing.T) {
	snap := &snapshot.File{}
	snap.Items = append(snap.Items, item(t, simNode("web-1", "web", "4")))
	for _, tc := range []struct {
		plan Plan
		want string
	}{
		{Plan{Mode: ModeDrain}, "drain mode needs the nodes to drain"},
		{Plan{Mode: ModeDrain, Drain: []string{"web-1", "web-9", "web-8"}}, "nodes to drain not in the snapshot: web-9, web-8"},
		{Plan{Mode: ModeReplace, Drain: []string{"web-1"}}, "only drain mode drains nodes"},
		{Plan{Mode: "evict"}, `mode "evict": pending, replace or drain`},
	} {
		if _, err := Simulate(context.Background(), nil, snap, tc.plan); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.plan, err, tc.want)
		}
	}
}

const nodeAnnotationsConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: berth-sim
  plugins:
    multiPoint:
      enabled:
      - name: LoadAware
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
  - name: LoadAware
    args:
      source: NodeAnnotations
      usageThresholds: {cpu: 80}
`

// usageAt is LoadAware's NodeAnnotations value: cpu used, sampled at at.
func usageAt(cpu string, at time.Time) map[string]string {
	return map[string]string{"berth.io/node-usage": fmt.Sprintf(`{"cpu":%q,"memory":"1Gi","timestamp":%q}`, cpu, at.UTC().Format(time.RFC3339))}
}

// A snapshot is read on its own clock: LoadAware's samples, a minute old
// when it was taken, are a minute old in the simulation however old the
// file is (their expiry is 3 minutes).
func TestSimulateReadsTheSnapshotOnItsOwnClock(t *testing.T) {
	cfg := loadConfig(t, nodeAnnotationsConfig)
	for _, age := range []time.Duration{0, time.Hour, 30 * 24 * time.Hour} {
		taken := time.Now().Add(-age).Truncate(time.Second)
		// By requests (MostAllocated) the small hot node wins; its usage
		// (3.9 of 4 CPUs) is over the threshold.
		hot, cool := simNode("hot", "web", "4"), simNode("cool", "web", "16")
		hot.Annotations = usageAt("3900m", taken.Add(-time.Minute))
		cool.Annotations = usageAt("500m", taken.Add(-time.Minute))
		snap := &snapshot.File{}
		snap.APIVersion, snap.Kind, snap.Taken = snapshot.APIVersion, snapshot.Kind, metav1.NewTime(taken)
		for _, o := range []runtime.Object{teamNamespace(), hot, cool, simPod("web-a", "web", "", 1)} {
			snap.Items = append(snap.Items, item(t, o))
		}
		if o := outcomes(simulateFile(t, cfg, snap, Plan{Mode: ModePending}))["web-a"]; o.Node != "cool" {
			t.Errorf("snapshot taken %v ago: web-a %+v, want it on cool (hot's sample, a minute old when taken, is over the threshold)", age, o)
		}
	}
}

// A pending pod whose claim waits for its first consumer (a
// WaitForFirstConsumer StorageClass, as most clouds' default and every new
// StatefulSet's) is placed, its volume provisioned on the node chosen, as
// the class's provisioner would; the run does not wait for a PV controller
// that does not run offline.
func TestSimulateProvisionsClaimsWaitingForTheirFirstConsumer(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "disk.csi.example.com", VolumeBindingMode: &wffc,
		AllowedTopologies: []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
			{Key: "topology.kubernetes.io/zone", Values: []string{"a", "b"}}}}}}
	claim := &v1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "data-db-0", UID: "uid-data-db-0", ResourceVersion: "500"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard"), AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	db := simPod("db-0", "web", "", 1)
	db.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
	// Zone c is not in the class's allowed topologies.
	inA, inC := simNode("node-a", "web", "2"), simNode("node-c", "web", "8")
	inA.Labels["topology.kubernetes.io/zone"], inC.Labels["topology.kubernetes.io/zone"] = "a", "c"
	sim := simulate(t, ModePending, teamNamespace(), inA, inC, class, claim, db)
	if o := outcomes(sim)["db-0"]; o.Node != "node-a" {
		t.Errorf("db-0 %+v: want it on node-a (node-c's zone is not in the class's allowedTopologies)", o)
	}
	want := "1 claims waiting for their first consumer were provisioned"
	found := false
	for _, w := range sim.Warnings {
		found = found || strings.Contains(w, want) && strings.Contains(w, "team/data-db-0 on node-a")
	}
	if !found {
		t.Errorf("warnings %q, want one saying %q and naming team/data-db-0 on node-a", sim.Warnings, want)
	}
}

// A claim waiting for its first consumer that an existing volume can take
// (a local volume, class without a provisioner) is bound to it as the PV
// controller would once VolumeBinding pre-binds the volume; the pod goes to
// the volume's node.
func TestSimulateBindsAnExistingVolumeToAClaimWaitingForItsFirstConsumer(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc}
	pv := &v1.PersistentVolume{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "local-b", ResourceVersion: "501"},
		Spec: v1.PersistentVolumeSpec{StorageClassName: "local", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("100Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disk"}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"node-b"}}}}}}}},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable}}
	claim := &v1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cache", UID: "uid-cache", ResourceVersion: "502"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"), AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("10Gi")}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	p := simPod("cache-0", "web", "", 1)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "cache"}}}}
	sim := simulate(t, ModePending, teamNamespace(), simNode("node-a", "web", "8"), simNode("node-b", "web", "2"), class, pv, claim, p)
	if o := outcomes(sim)["cache-0"]; o.Node != "node-b" {
		t.Errorf("cache-0 %+v: want it on node-b, the local volume's node", o)
	}
}

// A pod being deleted leaves the cluster within its grace period: it is
// left out, its room free, unless the plan keeps it.
func TestSimulateLeavesTerminatingPodsOut(t *testing.T) {
	leaving := simPod("leaving", "web", "web-1", 0)
	leaving.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	leaving.DeletionTimestamp = ptr.To(metav1.NewTime(time.Unix(1e9+10, 0)))
	leaving.Status.Phase = v1.PodRunning
	objs := []runtime.Object{teamNamespace(), simNode("web-1", "web", "2"), leaving, simPod("web-a", "web", "", 1)}
	sim := simulate(t, ModePending, objs...)
	if o := outcomes(sim)["web-a"]; o.Node != "web-1" {
		t.Errorf("web-a %+v: want it on web-1, whose only other pod is leaving", o)
	}
	if sim.Terminating != 1 || len(sim.Warnings) != 1 || !strings.HasPrefix(sim.Warnings[0], "1 pods being deleted were left out") {
		t.Errorf("terminating %d, warnings %q: want the one pod, said once", sim.Terminating, sim.Warnings)
	}
	kept := simulateWith(t, batchPoolConfig, Plan{Mode: ModePending, KeepTerminating: true}, objs...)
	if o := outcomes(kept)["web-a"]; o.Node != "" {
		t.Errorf("kept: web-a %+v, want it pending (the leaving pod holds web-1's 2 CPUs)", o)
	}
}

// Pods of schedulers the configuration has no profile for stay where they
// are, and are counted by scheduler.
func TestSimulateCountsThePodsOfOtherSchedulers(t *testing.T) {
	theirs := simPod("theirs", "web", "web-1", 0)
	theirs.Spec.SchedulerName = "default-scheduler"
	waiting := simPod("waiting", "web", "", 1)
	waiting.Spec.SchedulerName = "volcano"
	sim := simulate(t, ModeReplace, teamNamespace(), simNode("web-1", "web", "4"), theirs, waiting, simPod("ours", "web", "web-1", 2))
	if len(sim.Outcomes) != 1 || sim.Outcomes[0].Name != "ours" {
		t.Errorf("outcomes %+v, want only ours", sim.Outcomes)
	}
	if want := map[string]int{"default-scheduler": 1, "volcano": 1}; !maps.Equal(sim.OtherSchedulers, want) {
		t.Errorf("other schedulers %v, want %v", sim.OtherSchedulers, want)
	}
}

// Replace mode places DaemonSets' pods first (their controller makes them
// as a node joins), then by priority, then by age: a young DaemonSet pod
// or a young critical pod is not left pending behind the apps.
func TestSimulateReplacePlacesDaemonSetPodsThenByPriority(t *testing.T) {
	app := simPod("app", "web", "web-1", 0)
	app.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1500m")
	agent := simPod("agent", "web", "web-1", 5)
	agent.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("500m")
	agent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
	// Pinned to its node, as the DaemonSet controller pins its pods.
	agent.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"web-1"}}}}}}}}
	critical := simPod("critical", "web", "web-2", 6)
	critical.Spec.Priority = ptr.To(int32(2000000000))
	critical.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	old := simPod("old", "web", "web-2", 1)
	old.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	// web-1 (2 CPUs): the agent, then the app. web-2 (2 CPUs): critical,
	// younger than old, is placed first.
	sim := simulate(t, ModeReplace, teamNamespace(), simNode("web-1", "web", "2"), simNode("web-2", "web", "2"), app, agent, critical, old)
	got := outcomes(sim)
	for name, want := range map[string]string{"agent": "web-1", "app": "web-1", "critical": "web-2", "old": ""} {
		if got[name].Node != want || got[name].Preempted {
			t.Errorf("%s %+v, want node %q (not preempted)", name, got[name], want)
		}
	}
}

// A deadline ends the simulation with what was placed by then: the pods
// not placed say so. With a deadline that passes at once nothing is placed
// in replace mode; with a generous one the run ends on its own.
func TestSimulateStopsAtItsDeadlineWithWhatWasPlaced(t *testing.T) {
	objs := []runtime.Object{teamNamespace(), simNode("web-1", "web", "8")}
	for i := range 3 {
		objs = append(objs, simPod(fmt.Sprintf("web-%d", i), "web", "web-1", i))
	}
	sim := simulateWith(t, batchPoolConfig, Plan{Mode: ModeReplace, Timeout: time.Nanosecond}, objs...)
	if !sim.TimedOut {
		t.Error("a deadline of 1ns: TimedOut false, want true")
	}
	if len(sim.Outcomes) != 3 {
		t.Fatalf("outcomes %+v, want the 3 pods", sim.Outcomes)
	}
	for _, o := range sim.Outcomes {
		if o.Node != "" || o.Preempted || o.Reason != notPlacedInTime {
			t.Errorf("%s %+v, want it not placed, reason %q", o.Name, o, notPlacedInTime)
		}
	}
	sim = simulateWith(t, batchPoolConfig, Plan{Mode: ModeReplace, Timeout: time.Minute}, objs...)
	if sim.TimedOut {
		t.Error("a deadline of a minute: TimedOut true, want false")
	}
	for _, o := range sim.Outcomes {
		if o.Node != "web-1" {
			t.Errorf("%s %+v, want it on web-1", o.Name, o)
		}
	}
}

// A configuration with extenders is refused unless the plan says to call
// them; called, their filter runs and their bind never does.
func TestSimulateCallsExtendersOnlyWhenAskedAndNeverTheirBind(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		mu.Unlock()
		var args extenderv1.ExtenderArgs
		_ = json.NewDecoder(r.Body).Decode(&args)
		switch r.URL.Path {
		case "/filter":
			// Keeps web-2 only.
			_ = json.NewEncoder(w).Encode(extenderv1.ExtenderFilterResult{NodeNames: ptr.To([]string{"web-2"})})
		default:
			http.Error(w, "not simulated", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	config := batchPoolConfig + fmt.Sprintf(`extenders:
- urlPrefix: %s
  filterVerb: filter
  bindVerb: bind
  nodeCacheCapable: true
`, srv.URL)
	cfg := loadConfig(t, config)
	snap := &snapshot.File{}
	for _, o := range []runtime.Object{teamNamespace(), simNode("web-1", "web", "8"), simNode("web-2", "web", "2"), simPod("web-a", "web", "", 1)} {
		snap.Items = append(snap.Items, item(t, o))
	}
	if _, err := Simulate(context.Background(), cfg, snap, Plan{Mode: ModePending}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--call-extenders") {
		t.Errorf("without CallExtenders: error %v, want a configuration error naming --call-extenders", err)
	}
	if len(calls) != 0 {
		t.Errorf("without CallExtenders the extender was called: %v", calls)
	}
	sim := simulateFile(t, cfg, snap, Plan{Mode: ModePending, CallExtenders: true})
	if o := outcomes(sim)["web-a"]; o.Node != "web-2" {
		t.Errorf("web-a %+v, want it on web-2, the only node the extender's filter keeps", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["/filter"] == 0 || calls["/bind"] != 0 {
		t.Errorf("extender calls %v, want filter called and bind never", calls)
	}
	if cfg.Extenders[0].BindVerb != "bind" {
		t.Error("the caller's configuration was changed")
	}
}

// gpuCluster is a node with one device of driver gpu.example.com, its class
// and a template that asks for one.
func gpuCluster(node string) []runtime.Object {
	class := &resourcev1.DeviceClass{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	slice := &resourcev1.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
	template := &resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	return []runtime.Object{class, slice, template}
}

// gpuPod is a pod whose claim "gpu" is made from the one-gpu template.
func gpuPod(name, node string) *v1.Pod {
	p := simPod(name, "web", node, 0)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

// A pod whose GPU claim is made from a template, placed again in replace
// mode, keeps its claim (named in its status), which no longer holds the
// device for it: the pod goes back to the only node with a device. A
// pending pod with no claim yet gets one made from its template, as the
// resourceclaim controller would.
func TestSimulatePlacesPodsWithClaimsFromTemplates(t *testing.T) {
	bound := gpuPod("trainer", "gpu-1")
	bound.Status = v1.PodStatus{Phase: v1.PodRunning, ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("trainer-gpu-x7k2p")}}}
	claim := &resourcev1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "trainer-gpu-x7k2p", UID: "claim-uid", ResourceVersion: "4711",
			Annotations:     map[string]string{resourcev1.PodResourceClaimAnnotation: "gpu"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "trainer", UID: bound.UID, Controller: ptr.To(true)}}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "gpu-1", Device: "gpu-0"}}},
				NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"gpu-1"}}}}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "trainer", UID: bound.UID}}}}
	objs := append([]runtime.Object{teamNamespace(), simNode("cpu-1", "web", "8"), simNode("gpu-1", "web", "2"), bound, claim}, gpuCluster("gpu-1")...)
	sim := simulate(t, ModeReplace, objs...)
	if o := outcomes(sim)["trainer"]; o.Node != "gpu-1" {
		t.Errorf("replace: trainer %+v, want it on gpu-1, the only node with a device", o)
	}
	// A pod older than trainer that waited for a GPU is placed first in
	// replace mode: it gets the device, which trainer's claim released.
	older := gpuPod("older", "")
	older.CreationTimestamp = metav1.NewTime(bound.CreationTimestamp.Add(-time.Hour))
	older.UID = "uid-older"
	sim = simulate(t, ModeReplace, append(objs, older)...)
	if got := outcomes(sim); got["older"].Node != "gpu-1" || got["trainer"].Node != "" {
		t.Errorf("replace: older %+v, trainer %+v: want older on gpu-1 (trainer's claim released its device) and trainer pending", got["older"], got["trainer"])
	}

	objs = append([]runtime.Object{teamNamespace(), simNode("cpu-1", "web", "8"), simNode("gpu-1", "web", "2"), gpuPod("new", "")}, gpuCluster("gpu-1")...)
	sim = simulate(t, ModePending, objs...)
	if o := outcomes(sim)["new"]; o.Node != "gpu-1" {
		t.Errorf("pending: new %+v, want it on gpu-1 with a claim made from its template", o)
	}
}

func TestParseNodeCopies(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want NodeCopies
		err  string
	}{
		{in: "gpu-1=3", want: NodeCopies{Template: "gpu-1", Count: 3}},
		{in: "gpu-1=2:pool=new,topology.kubernetes.io/zone=b", want: NodeCopies{Template: "gpu-1", Count: 2, Labels: map[string]string{"pool": "new", "topology.kubernetes.io/zone": "b"}}},
		{in: "gpu-1", err: "want TEMPLATE=N"},
		{in: "gpu-1=0", err: "at least 1"},
		{in: "gpu-1=3x", err: "want TEMPLATE=N"},
		{in: "=3", err: "want TEMPLATE=N"},
		{in: "gpu-1=3:pool", err: `label "pool" is not KEY=VALUE`},
	} {
		got, err := ParseNodeCopies(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got.Template != tc.want.Template || got.Count != tc.want.Count || !maps.Equal(got.Labels, tc.want.Labels)):
			t.Errorf("%q: %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
}

// daemonPod is a DaemonSet's pod pinned to node, as its controller makes it.
func daemonPod(name, node string) *v1.Pod {
	p := simPod(name, "web", node, 0)
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("500m")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	p.Status.Phase = v1.PodRunning
	return p
}

// "Would one more of these nodes place my pending pod, and where?": a copy
// of a full node, with the DaemonSet pod its controller would run on it.
func TestSimulateAddsCopiesOfANode(t *testing.T) {
	busy := simPod("busy", "web", "big", 0)
	busy.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("6")
	waiting := simPod("waiting", "web", "", 1)
	waiting.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("4")
	objs := []runtime.Object{teamNamespace(), simNode("big", "web", "8"), busy, daemonPod("agent-big", "big"), waiting}
	if o := outcomes(simulate(t, ModePending, objs...))["waiting"]; o.Node != "" {
		t.Fatalf("without a copy: waiting %+v, want it pending", o)
	}
	sim := simulateWith(t, batchPoolConfig, Plan{Mode: ModePending, AddNodes: []NodeCopies{{Template: "big", Count: 2, Labels: map[string]string{"pool": "batch"}}}}, objs...)
	if o := outcomes(sim)["waiting"]; o.Node != "big-sim-1" && o.Node != "big-sim-2" {
		t.Errorf("waiting %+v, want it on a copy of big", o)
	}
	pods := map[string]int{}
	for _, n := range sim.Nodes {
		pods[n.Node] = n.Pods
	}
	if pods["big-sim-1"]+pods["big-sim-2"] != 3 || pods["big"] != 2 {
		t.Errorf("pods per node %v, want big's two, each copy its DaemonSet pod and one of them waiting", pods)
	}
}

// "Can I drop this node?": its pods are placed again elsewhere, its
// DaemonSet pod goes with it.
func TestSimulateRemovesNodes(t *testing.T) {
	objs := []runtime.Object{teamNamespace(), simNode("web-1", "web", "4"), simNode("web-2", "web", "4"),
		simPod("app", "web", "web-1", 0), daemonPod("agent-1", "web-1"), daemonPod("agent-2", "web-2")}
	sim := simulateWith(t, batchPoolConfig, Plan{Mode: ModePending, RemoveNodes: []string{"web-1"}}, objs...)
	got := outcomes(sim)
	if len(got) != 1 || got["app"].Node != "web-2" {
		t.Errorf("outcomes %+v, want app on web-2 and nothing else placed", sim.Outcomes)
	}
	for _, n := range sim.Nodes {
		if n.Node == "web-1" {
			t.Errorf("nodes %+v: web-1 removed", sim.Nodes)
		}
	}
	if _, err := Simulate(context.Background(), nil, &snapshot.File{Items: []*unstructured.Unstructured{item(t, simNode("web-1", "web", "4"))}},
		Plan{Mode: ModePending, RemoveNodes: []string{"web-9"}, AddNodes: []NodeCopies{{Template: "web-8", Count: 1}}}); err == nil ||
		!strings.Contains(err.Error(), "nodes to copy not in the snapshot: web-8") || !strings.Contains(err.Error(), "nodes to remove not in the snapshot: web-9") {
		t.Errorf("unknown nodes: error %v, want both named", err)
	}
}

// In replace mode a copy's DaemonSet pods are placed again like their
// originals: pinned to the copy, they take its room first.
func TestSimulateAddsCopiesWithTheirDaemonSetPodsInReplaceMode(t *testing.T) {
	objs := []runtime.Object{teamNamespace(), simNode("big", "web", "8"), daemonPod("agent-big", "big")}
	sim := simulateWith(t, batchPoolConfig, Plan{Mode: ModeReplace, AddNodes: []NodeCopies{{Template: "big", Count: 1}}}, objs...)
	got := outcomes(sim)
	if got["agent-big"].Node != "big" || got["agent-big-big-sim-1"].Node != "big-sim-1" {
		t.Errorf("outcomes %+v, want the DaemonSet pod on big and its copy on big-sim-1", sim.Outcomes)
	}
	if !slices.Equal(sim.AddedNodes, []string{"big-sim-1"}) {
		t.Errorf("added nodes %v, want big-sim-1", sim.AddedNodes)
	}
}

// A CELPolicy rule that reads an annotation the snapshot left out is
// warned of: the simulation decides without it.
func TestSimulateWarnsOfAnnotationsARuleReadsThatTheSnapshotLacks(t *testing.T) {
	config := strings.Replace(batchPoolConfig, `match: "pod.metadata.?labels.?tier.orValue('') == 'batch'"`,
		`match: "pod.metadata.?annotations[?'team.example/tier'].orValue('') == 'batch'"`, 1)
	cfg := loadConfig(t, config)
	for _, kept := range [][]string{nil, {"team.example/tier"}} {
		snap := &snapshot.File{}
		snap.KeptAnnotations = kept
		for _, o := range []runtime.Object{teamNamespace(), simNode("web-1", "web", "4")} {
			snap.Items = append(snap.Items, item(t, o))
		}
		sim := simulateFile(t, cfg, snap, Plan{Mode: ModePending})
		warned := slices.ContainsFunc(sim.Warnings, func(w string) bool {
			return strings.Contains(w, "reads annotation team.example/tier, which the snapshot does not hold")
		})
		if warned != (kept == nil) {
			t.Errorf("kept %v: warnings %q, want a warning only when the annotation was not kept", kept, sim.Warnings)
		}
	}
}
