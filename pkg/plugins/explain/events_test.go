package explain

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// A pod explained as pending and then, minutes later at most, as placed
// must show both Explained events, the placement's last. client-go's events
// broadcaster folds an event into the series of an earlier one of the same
// regarding object, reason and action, keeping the earlier note: with one
// action for both, the placement's "placed on ..." was counted into the
// pending event's series and never shown (make demo saw a bound gang member
// whose latest Explained event said it fit no node).
func TestPlacementEventIsNotFoldedIntoThePendingOne(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-2", UID: "u-train-2"}}
	cs := kubefake.NewClientset(pod)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	f, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "berth", frameworkruntime.WithClientSet(cs), frameworkruntime.WithEventRecorder(broadcaster.NewRecorder(scheme.Scheme, "berth-scheduler")))
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(ctx, f)
	logger := klog.FromContext(ctx)
	if err := w.write(ctx, logger, item{pod: pod, result: &Result{Version: ResultVersion, Outcome: OutcomePending}, summary: "fits none of 14 nodes"}, false); err != nil {
		t.Fatal(err)
	}
	if err := w.write(ctx, logger, item{pod: pod, result: &Result{Version: ResultVersion, Outcome: OutcomePlaced}, summary: "placed on gang-2"}, true); err != nil {
		t.Fatal(err)
	}

	var notes []string
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Reason == ReasonExplained {
				notes = append(notes, e.Note)
			}
		}
		return len(notes) == 2, nil
	}); err != nil {
		t.Fatalf("Explained events %q, want the pending one and the placement's", notes)
	}
	if !strings.Contains(strings.Join(notes, "|"), "placed on gang-2") {
		t.Errorf("Explained events %q: the placement's is missing", notes)
	}
}
