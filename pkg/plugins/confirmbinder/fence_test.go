package confirmbinder

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-scheduler/berth/internal/leadership"
)

// A leader paused past its lease wakes with a stale view: the node looks
// roomy (WhenTight would skip the confirmation) while another replica filled
// it meanwhile. While the process's fence holds, ConfirmBinder confirms
// every binding against the API, so the stale one is refused; once the
// fence has lifted, a roomy node is skipped again.
func TestAProcessThatStoodStillConfirmsEveryBinding(t *testing.T) {
	pod := st.MakePod().Namespace("ns").Name("small").UID("small").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	// Bound by the other replica while this one stood still: the
	// scheduler's snapshot (newTestPlugin's) has none of them.
	other := boundPod("other", map[v1.ResourceName]string{"cpu": "3500m"})
	pl, client, _ := newTestPlugin(t, nil, pod, other, liveNode())
	c := clocktesting.NewFakeClock(time.Now())
	pl.fence = leadership.NewFence(c)
	c.Step(25 * time.Second) // SIGSTOP ... SIGCONT
	if s := bind(t, pl, pod); s.IsSuccess() {
		t.Fatal("bound a pod over the node's CPU after standing still")
	}
	if n := countActions(client, "list", "pods"); n != 1 {
		t.Errorf("%d pod LISTs, want 1 (a confirmation)", n)
	}
	// The fence lifts after FenceHold of beats; a roomy node skips again.
	pl.fence.Beat()
	for elapsed := time.Duration(0); elapsed <= leadership.FenceHold; elapsed += leadership.FenceBeat {
		c.Step(leadership.FenceBeat)
		pl.fence.Beat()
	}
	pl, client, _ = newTestPlugin(t, nil, pod, liveNode())
	pl.fence = leadership.NewFence(c)
	if s := bind(t, pl, pod); !s.IsSuccess() {
		t.Fatal(s)
	}
	if n := countActions(client, "list", "pods"); n != 0 {
		t.Errorf("a roomy node was confirmed with the fence lifted: %d LISTs", n)
	}
}

// A pause that falls between the confirmation's reads and the Binding (the
// soak's 1,000-node run overcommitted two nodes as a paused leader woke)
// leaves a confirmation as stale as the cache: the binding is refused.
func TestAPauseDuringTheConfirmationRefusesTheBinding(t *testing.T) {
	pod := st.MakePod().Namespace("ns").Name("big").UID("big").Container("c").Req(map[v1.ResourceName]string{"cpu": "3700m"}).Obj()
	pl, client, _ := newTestPlugin(t, nil, pod, liveNode())
	c := clocktesting.NewFakeClock(time.Now())
	pl.fence = leadership.NewFence(c)
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		c.Step(25 * time.Second) // SIGSTOP ... SIGCONT while the LIST is answered
		return false, nil, nil
	})
	if s := bind(t, pl, pod); s.IsSuccess() {
		t.Fatal("bound on a confirmation taken before a pause")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			t.Errorf("a Binding was sent: %v", a)
		}
	}
}
