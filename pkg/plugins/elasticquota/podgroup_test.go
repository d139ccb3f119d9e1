package elasticquota

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A pod group's scheduling cycle (GenericWorkload, schedule_one_podgroup)
// reserves each member to see whether the whole group fits, then reverts
// them all, and reserves the feasible ones again, out of the group's cycle,
// for binding. ElasticQuota counts a simulated member for the group's
// admission (so the group is admitted whole), but status.used must never
// show a reservation that is reverted: a status write between the two
// published it.
func TestAPodGroupCyclesReservationsCountForAdmissionButAreNotReported(t *testing.T) {
	pl, _, _ := newTestPlugin(t, []*v1.Node{node("n1", "16")}, nil, eq("a", rl("cpu", "4"), rl("cpu", "8")))
	m := pl.shared.mgr
	ctx := context.Background()
	reported := func(step string, want string) {
		t.Helper()
		used, _ := m.usedOf("a")
		if got := used[v1.ResourceCPU]; got.Cmp(rl("cpu", want)[v1.ResourceCPU]) != 0 {
			t.Errorf("%s: status.used cpu %s, want %s", step, got.String(), want)
		}
	}
	admitted := func(step string, want int64) {
		t.Helper()
		if got := m.nsUsed["a"][v1.ResourceCPU]; got != want {
			t.Errorf("%s: admission counts %dm, want %dm", step, got, want)
		}
	}
	groupCycle := framework.NewCycleState()
	groupCycle.SetPodGroupSchedulingCycle(framework.NewCycleState())
	member := pod("a", "member", "2", 0, "")

	m.takeDirty()
	if s := pl.Reserve(ctx, groupCycle, member, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	admitted("a member reserved in the group's cycle", 2000)
	reported("a member reserved in the group's cycle", "0")
	if d := m.takeDirty(); len(d) != 0 {
		t.Errorf("namespaces %v marked for a status write by a simulated reservation", d)
	}
	pl.Unreserve(ctx, groupCycle, member, "n1")
	admitted("the group's cycle reverted", 0)

	// The binding cycle reserves it again, out of the group's cycle.
	if s := pl.Reserve(ctx, framework.NewCycleState(), member, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	admitted("reserved for binding", 2000)
	reported("reserved for binding", "2")

	// A simulated reservation that the informer then sees bound is real.
	other := pod("a", "other", "1", 0, "")
	pl.Reserve(ctx, groupCycle, other, "n1")
	reported("another member reserved in the group's cycle", "2")
	bound := other.DeepCopy()
	bound.Spec.NodeName = "n1"
	m.observe(bound)
	admitted("the other member seen bound", 3000)
	reported("the other member seen bound", "3")

	// One reserved again for binding without being reverted first (1.37.2
	// reverts before it binds; a later release might not): the binding
	// reservation is real, and a late revert of the group's try leaves it.
	third := pod("a", "third", "1", 0, "")
	pl.Reserve(ctx, groupCycle, third, "n1")
	pl.Reserve(ctx, framework.NewCycleState(), third, "n1")
	admitted("the third reserved for binding", 4000)
	reported("the third reserved for binding", "4")
	pl.Unreserve(ctx, groupCycle, third, "n1")
	admitted("the group's late revert of the third", 4000)
	reported("the group's late revert of the third", "4")
	// A binding cycle's Unreserve (the bind failed) does drop it.
	pl.Unreserve(ctx, framework.NewCycleState(), third, "n1")
	admitted("the third's binding failed", 3000)
	reported("the third's binding failed", "3")
}
