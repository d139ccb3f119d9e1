package elasticquota

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-scheduler/berth/internal/leadership"
)

// The soak's paused-leader fault (SIGSTOP past the lease, SIGCONT) bound a
// pod over its namespace's max: the process woke with a stale view while
// another replica had bound meanwhile. ElasticQuota's PreBind refuses to
// bind a quota namespace's pod while the process's fence holds, and binds
// once it has beaten for FenceHold; pods of namespaces without a quota are
// not its business (PreBindPreFlight skips them).
func TestPreBindWaitsAfterTheProcessStoodStill(t *testing.T) {
	cpu := func(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(s)} }
	pl, _, _ := newTestPlugin(t, nil, nil, eq("a", cpu("4"), cpu("4")))
	c := clocktesting.NewFakeClock(time.Now())
	pl.fence = leadership.NewFence(c)
	ctx := context.Background()
	p := pod("a", "p", "1", 0, "")
	// The quota informer syncs on its own (newTestPlugin waits for pods).
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.shared.mgr.hasQuota("a"), nil
	}); err != nil {
		t.Fatal("the quota of namespace a never reached the plugin")
	}

	// Unfenced, PreBindPreFlight skips (no nomination written for it).
	for _, q := range []*v1.Pod{p, pod("free", "q", "1", 0, "")} {
		if _, s := pl.PreBindPreFlight(ctx, nil, q, "n1"); !s.IsSkip() {
			t.Errorf("PreBindPreFlight of %s in a running process: %v, want Skip", q.Name, s)
		}
		if s := pl.PreBind(ctx, nil, q, "n1"); !s.IsSuccess() {
			t.Fatalf("PreBind of %s in a running process: %v", q.Name, s)
		}
	}
	c.Step(25 * time.Second) // SIGSTOP ... SIGCONT
	for name, s := range map[string]*fwk.Status{
		"PreBindPreFlight": func() *fwk.Status { _, s := pl.PreBindPreFlight(ctx, nil, p, "n1"); return s }(),
		"PreBind":          pl.PreBind(ctx, nil, p, "n1"),
	} {
		if s.Code() != fwk.Error || !strings.Contains(s.Message(), "stood still for 25s") {
			t.Fatalf("%s on waking: %v, want an Error saying the process stood still", name, s)
		}
	}
	if s := pl.PreBind(ctx, nil, pod("free", "q", "1", 0, ""), "n1"); !s.IsSuccess() {
		t.Errorf("PreBind of a pod without a quota on waking: %v, want Success (not ElasticQuota's business)", s)
	}
	pl.fence.Beat()
	for elapsed := time.Duration(0); elapsed <= leadership.FenceHold; elapsed += leadership.FenceBeat {
		c.Step(leadership.FenceBeat)
		pl.fence.Beat()
	}
	if s := pl.PreBind(ctx, nil, p, "n1"); !s.IsSuccess() {
		t.Fatalf("PreBind after the hold: %v", s)
	}
}
