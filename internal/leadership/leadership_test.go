package leadership

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// A real client-go leader elector drives the state: nothing before it is
// created, configured once it is, leading while it holds the lease.
func TestStateFollowsALeaderElector(t *testing.T) {
	if c, l := State(); c || l {
		t.Fatalf("before any elector: configured %v, leading %v; want neither", c, l)
	}
	client := fake.NewClientset()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: "kube-scheduler", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 100 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(started) }, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, l := State(); !c || l {
		t.Fatalf("elector created: configured %v, leading %v; want configured, not leading", c, l)
	}
	// A writer told when the process comes to lead: not while it waits
	// for the lease, once when it takes it.
	allowedPoll = 10 * time.Millisecond
	w := NewWriter(ctx, func() bool { return true })
	took := make(chan struct{}, 2)
	w.OnAllowed(ctx, func() { took <- struct{}{} })
	time.Sleep(100 * time.Millisecond) // ten looks, none of them leading
	if len(took) != 0 {
		t.Fatal("OnAllowed called before the process led")
	}
	go le.Run(ctx)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the elector never led")
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, l := State(); !l; _, l = State() {
		if time.Now().After(deadline) {
			t.Fatal("leading never reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-took:
	case <-time.After(10 * time.Second):
		t.Fatal("OnAllowed never called after the process took the lease")
	}
	time.Sleep(100 * time.Millisecond) // ten looks, all leading
	if len(took) != 0 {
		t.Fatal("OnAllowed called again while the process kept leading")
	}
}
