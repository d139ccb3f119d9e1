package main

import (
	"testing"

	"github.com/google/pprof/profile"
)

// profSample builds a profile sample whose stack is fns, leaf first.
func profSample(fns ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1}}
	for _, fn := range fns {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: fn}}}})
	}
	return s
}

func TestInCycleLeavesTheHarnessOut(t *testing.T) {
	cycle := profSample("runtime.mapaccess1_faststr", "github.com/berth-scheduler/berth/internal/slotmap.(*Map[...]).Load",
		"k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunFilterPluginsWithNominatedPods",
		"k8s.io/kubernetes/pkg/scheduler.(*Scheduler).findNodesThatPassFilters.func1", "k8s.io/client-go/util/workqueue.ParallelizeUntil.func1")
	harness := profSample("go.yaml.in/yaml/v2.(*parser).node", "sigs.k8s.io/yaml.Unmarshal",
		"k8s.io/kubernetes/test/integration/scheduler_perf.getPodSpecFromFile", "k8s.io/client-go/util/workqueue.ParallelizeUntil.func1")
	if !inCycle(cycle) {
		t.Error("a Filter worker's sample is not in the cycle")
	}
	if inCycle(harness) {
		t.Error("the harness's pod-creation worker (same ParallelizeUntil) counted in the cycle")
	}
	if got := phaseOf(frames(cycle)); got != "RunFilterPluginsWithNominatedPods" {
		t.Errorf("phase %q, want the outermost framework call", got)
	}
	if got := leafOf(frames(cycle)); got != "Berth internal/slotmap" {
		t.Errorf("leaf %q, want the first frame outside the runtime: Berth internal/slotmap", got)
	}
	alloc := profSample("runtime.gcAssistAlloc", "runtime.mallocgc", "github.com/berth-scheduler/berth/pkg/plugins/loadaware.(*LoadAware).Filter")
	if got := leafOf(frames(alloc)); got != "GC assists (runtime.gcAssistAlloc)" {
		t.Errorf("leaf %q, want the GC assist apart", got)
	}
}

func TestStdlib(t *testing.T) {
	for fn, want := range map[string]bool{
		"runtime.mapaccess1_faststr":                                         true,
		"internal/runtime/maps.newarray":                                     true,
		"sync.(*Mutex).Lock":                                                 true,
		"k8s.io/apimachinery/pkg/util/sets.Set[...].Has":                     false,
		"github.com/berth-scheduler/berth/internal/slotmap.(*Map[...]).Load": false,
	} {
		if got := stdlib(fn); got != want {
			t.Errorf("stdlib(%q) = %v, want %v", fn, got, want)
		}
	}
}
