package offline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/berth-scheduler/berth/internal/snapshot"
)

// BenchmarkSimulate simulates a snapshot of 1,000 nodes and 10,000 pods
// under manifests/examples/all-plugins.yaml (every Berth plugin), in both
// modes and in replace mode as a second configuration's run (every pod
// compared with another node), once each (-benchtime 1x), and reports the
// process's peak RSS. BERTH_SIM_NODES and BERTH_SIM_PODS set other sizes
// (the README's 5,000 nodes and 50,000 pods).
// Run: go test -run '^$' -bench Simulate -benchtime 1x ./internal/offline
func BenchmarkSimulate(b *testing.B) {
	klog.SetLogger(logr.Discard())
	cfg, err := LoadConfig(klog.Background(), filepath.Join("..", "..", "manifests", "examples", "all-plugins.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	nodes, pods := sizeFromEnv(b, "BERTH_SIM_NODES", 1000), sizeFromEnv(b, "BERTH_SIM_PODS", 10000)
	snap := &snapshot.File{}
	snap.APIVersion, snap.Kind = snapshot.APIVersion, snapshot.Kind
	add := func(obj any) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			b.Fatal(err)
		}
		snap.Items = append(snap.Items, &unstructured.Unstructured{Object: m})
	}
	add(&v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "bench"}})
	for i := range nodes {
		alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")}
		name := fmt.Sprintf("node-%04d", i)
		add(&v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}},
			Status:     v1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}})
	}
	for i := range pods {
		name := fmt.Sprintf("pod-%05d", i)
		add(&v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: k8stypes.UID(name),
				Labels: map[string]string{"tier": []string{"web", "batch"}[i%2]}, CreationTimestamp: metav1.NewTime(time.Unix(int64(1e9+i), 0))},
			Spec: v1.PodSpec{SchedulerName: "berth-all", Containers: []v1.Container{{Name: "app", Image: "app",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			Status: v1.PodStatus{Phase: v1.PodPending}})
	}
	// A second configuration's run compares every pod with the node the
	// first put it on (here: an arbitrary one).
	compare := map[string]string{}
	for i := range pods {
		compare[fmt.Sprintf("bench/pod-%05d", i)] = fmt.Sprintf("node-%04d", (i*7)%nodes)
	}
	for _, plan := range []Plan{{Mode: ModePending}, {Mode: ModeReplace}, {Mode: ModeReplace, Compare: compare}} {
		name := string(plan.Mode)
		if plan.Compare != nil {
			name += "+compare"
		}
		b.Run(fmt.Sprintf("%s/%dNodes_%dPods", name, nodes, pods), func(b *testing.B) {
			for b.Loop() {
				start := time.Now()
				sim, err := Simulate(context.Background(), cfg, snap, plan)
				if err != nil {
					b.Fatal(err)
				}
				placed := 0
				for _, o := range sim.Outcomes {
					if o.Node != "" {
						placed++
					}
				}
				if placed != pods {
					b.Fatalf("%d of %d pods placed", placed, pods)
				}
				b.ReportMetric(time.Since(start).Seconds(), "s/simulation")
			}
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// sizeFromEnv is the positive number the environment variable holds, or
// otherwise.
func sizeFromEnv(b *testing.B, name string, otherwise int) int {
	v := os.Getenv(name)
	if v == "" {
		return otherwise
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// peakRSSMiB is the process's peak resident set (VmHWM), in MiB.
func peakRSSMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
