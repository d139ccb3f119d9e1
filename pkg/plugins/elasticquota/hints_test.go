package elasticquota

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func unstructuredEQ(t *testing.T, e *schedv1alpha1.ElasticQuota) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestQueueingHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	m := newManager()
	m.setQuota("a", newQuota(eq("a", rl("cpu", "4"), nil), nil))
	m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), nil), nil))
	pl := &ElasticQuota{shared: &shared{mgr: m}}
	waiting := pod("a", "waiting", "1", 0, "")

	old := eq("b", rl("cpu", "4"), nil)
	statusOnly := old.DeepCopy()
	statusOnly.Status.Used = rl("cpu", "2")
	grown := old.DeepCopy()
	grown.Spec.Min = rl("cpu", "6")
	// The hint also applies the change at once (wantTotalMin): the
	// scheduler's informer may deliver it before ElasticQuota's own, and the
	// requeued pod must not be checked against the old quota.
	for _, tc := range []struct {
		name         string
		old, new     any
		want         fwk.QueueingHint
		wantTotalMin int64
	}{
		{"quota created", nil, unstructuredEQ(t, old), fwk.Queue, 8000},
		{"status written (unstructured, as the scheduler's dynamic informer hands it)", unstructuredEQ(t, old), unstructuredEQ(t, statusOnly), fwk.QueueSkip, 8000},
		{"min grown elsewhere: more to borrow", unstructuredEQ(t, old), unstructuredEQ(t, grown), fwk.Queue, 10000},
		{"typed objects", grown, old, fwk.Queue, 8000},
		{"quota deleted", unstructuredEQ(t, old), nil, fwk.Queue, 4000},
	} {
		got, err := pl.isSchedulableAfterQuotaChange(logger, waiting, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
		if m.totalMin[v1.ResourceCPU] != tc.wantTotalMin {
			t.Errorf("%s: total min %dm, want %dm", tc.name, m.totalMin[v1.ResourceCPU], tc.wantTotalMin)
		}
	}
	m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), nil), nil))

	for _, tc := range []struct {
		name    string
		deleted string
		want    fwk.QueueingHint
	}{
		{"own namespace", "a", fwk.Queue},
		{"another namespace with a quota: the totals borrowing draws on change", "b", fwk.Queue},
		{"namespace without a quota", "free", fwk.QueueSkip},
	} {
		got, err := pl.isSchedulableAfterPodDeletion(logger, waiting, pod(tc.deleted, "gone", "1", 0, "n"), nil)
		if err != nil || got != tc.want {
			t.Errorf("pod deleted, %s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestCheckCRD(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if err := checkCRD(ctx, fakeEQClient(), time.Second); err != nil {
		t.Errorf("CRD served: %v", err)
	}
	c := fakeEQClient()
	c.Resources = nil
	err := checkCRD(ctx, c, time.Second)
	if err == nil {
		t.Fatal("CRD missing: want an error")
	}
	const want = "install the CRD from manifests/crds/scheduling.x-k8s.io_elasticquotas.yaml"
	if got := err.Error(); !strings.Contains(got, want) {
		t.Errorf("error %q does not say %q", got, want)
	}
}

func TestSignPod(t *testing.T) {
	pl := &ElasticQuota{}
	frags, st := pl.SignPod(t.Context(), pod("a", "p", "1", 0, ""))
	if !st.IsSuccess() || len(frags) != 0 {
		t.Errorf("SignPod = %v, %v; want no fragment and success, so batching stays on", frags, st)
	}
}

// PostFilter runs even when another PreFilter plugin rejected the pod before
// ElasticQuota's PreFilter ran: it must take the quota arithmetic itself.
func TestPostFilterWithoutPreFilterState(t *testing.T) {
	nodes := []*v1.Node{node("n1", "2")}
	pl, _, _ := newTestPlugin(t, nodes, []*v1.Pod{pod("a", "a-low", "2", 0, "n1")},
		eq("a", rl("cpu", "2"), rl("cpu", "8")))
	state := framework.NewCycleState()
	// The evaluator then looks the pod up in the cluster (not there: "not
	// found"); what matters is that ElasticQuota did not fail on its state.
	_, st := pl.PostFilter(t.Context(), state, pod("a", "p", "2", 10, ""), framework.NewDefaultNodeToStatus())
	if strings.Contains(st.Message(), string(stateKey)) {
		t.Fatalf("PostFilter without PreFilter state: %v", st)
	}
	if _, err := readState(state); err != nil {
		t.Errorf("PostFilter did not record the quota arithmetic: %v", err)
	}
}
