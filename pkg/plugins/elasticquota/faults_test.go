package elasticquota

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// withVersion is eq with a UID and resourceVersion, as the API server serves it.
func withVersion(e *schedv1alpha1.ElasticQuota, uid, rv string) *schedv1alpha1.ElasticQuota {
	e.UID, e.ResourceVersion = types.UID(uid), rv
	return e
}

// The scheduler's dynamic informer may deliver a quota event after
// ElasticQuota's own informer has already applied a newer state: the hint must
// never put the older state back.
func TestStaleQuotaEventsAreNotApplied(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	waiting := pod("a", "waiting", "1", 0, "")
	newPl := func(cur *schedv1alpha1.ElasticQuota) (*ElasticQuota, *manager) {
		m := newManager()
		m.setQuota("a", newQuota(cur, nil))
		return &ElasticQuota{shared: &shared{mgr: m}}, m
	}
	minCPU := func(m *manager) int64 {
		q := m.quotas["a"]
		if q == nil {
			return -1
		}
		return q.min[v1.ResourceCPU]
	}

	t.Run("two quick spec edits: the older edit arrives last", func(t *testing.T) {
		// Own informer is at rv 12 (min 6); the dynamic one delivers 10 -> 11 (min 5).
		pl, m := newPl(withVersion(eq("a", rl("cpu", "6"), nil), "u1", "12"))
		o := withVersion(eq("a", rl("cpu", "4"), nil), "u1", "10")
		n := withVersion(eq("a", rl("cpu", "5"), nil), "u1", "11")
		if _, err := pl.isSchedulableAfterQuotaChange(logger, waiting, unstructuredEQ(t, o), unstructuredEQ(t, n)); err != nil {
			t.Fatal(err)
		}
		if got := minCPU(m); got != 6000 {
			t.Errorf("min cpu %dm after a stale update, want 6000m (the newer spec)", got)
		}
		// A newer one is applied.
		newer := withVersion(eq("a", rl("cpu", "7"), nil), "u1", "13")
		if _, err := pl.isSchedulableAfterQuotaChange(logger, waiting, unstructuredEQ(t, o), unstructuredEQ(t, newer)); err != nil {
			t.Fatal(err)
		}
		if got := minCPU(m); got != 7000 {
			t.Errorf("min cpu %dm after a newer update, want 7000m", got)
		}
	})
	t.Run("replace --force: the old object's deletion arrives after the new one is known", func(t *testing.T) {
		pl, m := newPl(withVersion(eq("a", rl("cpu", "6"), nil), "u2", "20"))
		old := withVersion(eq("a", rl("cpu", "4"), nil), "u1", "15")
		if _, err := pl.isSchedulableAfterQuotaChange(logger, waiting, unstructuredEQ(t, old), nil); err != nil {
			t.Fatal(err)
		}
		if got := minCPU(m); got != 6000 {
			t.Errorf("min cpu %dm after the old object's deletion, want 6000m (the new object stays)", got)
		}
	})
	t.Run("replace --force: the old object's creation arrives after the new one is known", func(t *testing.T) {
		pl, m := newPl(withVersion(eq("a", rl("cpu", "6"), nil), "u2", "20"))
		old := withVersion(eq("a", rl("cpu", "4"), nil), "u1", "9")
		if _, err := pl.isSchedulableAfterQuotaChange(logger, waiting, nil, unstructuredEQ(t, old)); err != nil {
			t.Fatal(err)
		}
		if got := minCPU(m); got != 6000 {
			t.Errorf("min cpu %dm after the old object's creation, want 6000m", got)
		}
	})
	t.Run("the deletion of the governing object is applied", func(t *testing.T) {
		cur := withVersion(eq("a", rl("cpu", "6"), nil), "u2", "20")
		pl, m := newPl(cur)
		if _, err := pl.isSchedulableAfterQuotaChange(logger, waiting, unstructuredEQ(t, cur), nil); err != nil {
			t.Fatal(err)
		}
		if got := minCPU(m); got != -1 {
			t.Errorf("min cpu %dm after the deletion, want no quota", got)
		}
	})
}

// The reclaim rule (scheduler-plugins' and Kueue's): a pod of another
// namespace is a victim while that namespace is above its min in a resource
// the preemptor needs, counting the victims already taken; what a victim
// frees in other resources is a side effect (a pod is indivisible).
func TestReclaimNeverTakesABorrowerBelowMin(t *testing.T) {
	for _, tc := range []struct {
		name string
		// borrower runs pods of 1 CPU / 1Gi under its quota; the preemptor's
		// namespace has its own quota and asks for preemptorReq.
		borrower, preemptorNS      string
		borrowerMin, borrowerMax   v1.ResourceList
		preemptorMin, preemptorMax v1.ResourceList
		pods                       int
		preemptorReq               map[v1.ResourceName]string
		want                       int
		why                        string
	}{
		{
			// The case: min {cpu 2, memory 12Gi}, six pods: 4 CPU
			// borrowed, 6Gi of the memory min unused.
			name: "a borrower below its memory min gives back the CPU it borrowed", borrower: "a", preemptorNS: "b",
			borrowerMin: rl("cpu", "2", "memory", "12Gi"), borrowerMax: rl("cpu", "6", "memory", "24Gi"),
			preemptorMin: rl("cpu", "4", "memory", "12Gi"), preemptorMax: rl("cpu", "8", "memory", "24Gi"),
			pods: 6, preemptorReq: map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"},
			want: 4, why: "a borrows 4 CPU, and the memory it frees below its min is a side effect",
		},
		{
			// The second case: d (min 2 CPU / 4Gi) runs four pods;
			// c (min 2 CPU, no memory) asks for CPU: d goes back to 2 CPU.
			name: "exactly at its memory min, a borrower still gives back CPU", borrower: "d", preemptorNS: "c",
			borrowerMin: rl("cpu", "2", "memory", "4Gi"), borrowerMax: rl("cpu", "8", "memory", "8Gi"),
			preemptorMin: rl("cpu", "2"), preemptorMax: rl("cpu", "8"),
			pods: 4, preemptorReq: map[v1.ResourceName]string{v1.ResourceCPU: "1"},
			want: 2, why: "d is 2 CPU over its min",
		},
		{
			// e borrows memory only: a CPU preemptor takes none of its pods.
			name: "a namespace at its min in the resources the preemptor needs gives nothing", borrower: "e", preemptorNS: "f",
			borrowerMin: rl("cpu", "4", "memory", "1Gi"), borrowerMax: rl("cpu", "8", "memory", "8Gi"),
			preemptorMin: rl("cpu", "4"), preemptorMax: rl("cpu", "8"),
			pods: 4, preemptorReq: map[v1.ResourceName]string{v1.ResourceCPU: "1"},
			want: 0, why: "e uses exactly its CPU min",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager()
			m.setQuota(tc.borrower, newQuota(eq(tc.borrower, tc.borrowerMin, tc.borrowerMax), nil))
			m.setQuota(tc.preemptorNS, newQuota(eq(tc.preemptorNS, tc.preemptorMin, tc.preemptorMax), nil))
			var all []*preemption.DomainVictim
			for i := range tc.pods {
				name := fmt.Sprintf("%s%d", tc.borrower, i)
				p := st.MakePod().Namespace(tc.borrower).Name(name).UID(tc.borrower + "/" + name).Node("n").
					Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj()
				m.observe(p)
				all = append(all, victim(p))
			}
			p := st.MakePod().Namespace(tc.preemptorNS).Name("p").UID(tc.preemptorNS + "/p").Req(tc.preemptorReq).Obj()
			if got := names(eligibleVictims(m, m.snapshot(p, podRequest(p), 0), all, true)); len(got) != tc.want {
				t.Errorf("got victims %v, want %d: %s", got, tc.want, tc.why)
			}
		})
	}
}

// Victims chosen by one preemption count as leaving for the next at once,
// before the informer sees them deleted: preemptions of several pods in a
// row (or concurrently) take a borrower back to its min, never below. Each
// of the two ways a victim becomes leaving is tested alone: markPreempted
// (PostFilter, from the victims the evaluator chose) and the DisruptionTarget
// condition the preemption writes before it deletes.
func TestConcurrentReclaimsStopAtMin(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(m *manager, victim *v1.Pod)
	}{
		{"chosen victims marked by PostFilter", func(m *manager, victim *v1.Pod) { m.markPreempted([]*v1.Pod{victim}) }},
		{"the DisruptionTarget patch seen by the informer", func(m *manager, victim *v1.Pod) {
			patched := victim.DeepCopy()
			patched.Status.Conditions = append(patched.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
				Reason: v1.PodReasonPreemptionByScheduler, LastTransitionTime: metav1.NewTime(m.now())})
			m.observe(patched)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager()
			m.setQuota("a", newQuota(eq("a", rl("cpu", "2"), rl("cpu", "6")), nil))
			m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), rl("cpu", "8")), nil))
			var all []*preemption.DomainVictim
			for i := range 6 {
				p := pod("a", fmt.Sprintf("a%d", i), "1", 100, "n")
				m.observe(p)
				all = append(all, victim(p))
			}
			taken := 0
			for i := range 6 {
				// The victims stay on the node until they are deleted: every
				// preemption sees all six.
				p := pod("b", fmt.Sprintf("b%d", i), "1", 1000, "")
				vs := eligibleVictims(m, m.snapshot(p, podRequest(p), 1000), all, true)
				var chosen *v1.Pod
				for _, v := range vs {
					if c := v.Pods()[0].GetPod(); !m.pods[c.UID].leaving {
						chosen = c // the evaluator would not pick a leaving pod twice: eligibleVictims must not offer it as new room
					}
				}
				if chosen == nil || len(vs) == 0 {
					continue
				}
				tc.mark(m, chosen)
				taken++
			}
			if taken != 4 {
				t.Errorf("six preemptions in a row took %d of a's pods, want 4 (a borrows 4 CPU over its 2-CPU min)", taken)
			}
		})
	}
}

// A victim whose deletion never comes (the preemption's API call failed)
// counts as leaving for leavingGrace only: then its usage counts again and
// reclaim may choose it again.
func TestPreemptedVictimThatStaysCountsAgain(t *testing.T) {
	m := newManager()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	m.setQuota("a", newQuota(eq("a", rl("cpu", "2"), rl("cpu", "6")), nil))
	v := pod("a", "a0", "1", 100, "n")
	m.observe(v)
	m.markPreempted([]*v1.Pod{v})
	if got := m.nsLeaving["a"]["cpu"]; got != 1000 {
		t.Fatalf("leaving %dm right after the preemption, want 1000m", got)
	}
	now = now.Add(leavingGrace)
	m.expirePreempted()
	if got := m.nsLeaving["a"]["cpu"]; got != 0 {
		t.Errorf("leaving %dm %s after a preemption whose deletion never came, want 0", got, leavingGrace)
	}
	if m.preempted.Len() != 0 {
		t.Errorf("%d victims still tracked", m.preempted.Len())
	}
}

// PostFilter learns the chosen node's victims from the log the evaluator's
// per-node dry runs write into their clones of the cycle state.
func TestVictimLogSeesThroughStateClones(t *testing.T) {
	nodes := []*v1.Node{node("n1", "4"), node("n2", "4")}
	pods := []*v1.Pod{pod("a", "a-1", "2", 0, "n1"), pod("a", "a-2", "2", 0, "n1"), pod("a", "a-3", "2", 0, "n2"), pod("a", "a-4", "2", 0, "n2")}
	pl, f, infos := newTestPlugin(t, nodes, pods, eq("a", rl("cpu", "2"), rl("cpu", "8")), eq("b", rl("cpu", "4"), rl("cpu", "8")))
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	log := &victimLog{byNode: map[string][]*v1.Pod{}}
	state.Write(victimsKey, log)
	preemptor := pod("b", "p", "2", 0, "")
	if _, status, _ := f.RunPreFilterPlugins(ctx, state, preemptor); !status.IsSuccess() && status.Code() != fwk.Unschedulable {
		t.Fatalf("PreFilter: %v", status)
	}
	candidates, _, err := pl.evaluator.DryRunPreemption(ctx, state, preemptor, infos, nil, 0, int32(len(infos)))
	if err != nil || len(candidates) != 2 {
		t.Fatalf("candidates %v, %v: want one per node", candidates, err)
	}
	for _, c := range candidates {
		if got := log.on(c.Name()); len(got) != len(c.Victims().Pods) || len(got) == 0 {
			t.Errorf("log on %s: %d victims, the candidate has %d", c.Name(), len(got), len(c.Victims().Pods))
		}
	}
}

// discoveryServer answers discovery of scheduling.x-k8s.io/v1alpha1: with
// status code fail for the first failures requests, then with the resource.
func discoveryServer(t *testing.T, failures int32, fail int) *httptest.Server {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= failures {
			w.WriteHeader(fail)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: schedv1alpha1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "elasticquotas", Namespaced: true, Kind: "ElasticQuota"}},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func clientFor(t *testing.T, host string) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A control plane boots in any order: an API server that does not answer yet
// is not a missing CRD.
func TestCheckCRDWaitsForAnUnreachableAPIServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	t.Run("answers after two failures: start-up goes on", func(t *testing.T) {
		srv := discoveryServer(t, 2, http.StatusServiceUnavailable)
		if err := checkCRD(ctx, clientFor(t, srv.URL), 30*time.Second); err != nil {
			t.Errorf("got %v, want nil once the API server answers", err)
		}
	})
	t.Run("never answers: the error says so, not 'install the CRD'", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // nothing listens there now
		err := checkCRD(ctx, clientFor(t, url), 2*time.Second)
		if err == nil {
			t.Fatal("want an error")
		}
		if msg := err.Error(); !strings.Contains(msg, "not reachable within 2s") || strings.Contains(msg, "install the CRD") {
			t.Errorf("error %q: want it to say the API server was not reachable, not to install the CRD", msg)
		}
	})
	t.Run("the group is not served: install the CRD, at once", func(t *testing.T) {
		srv := discoveryServer(t, 1000, http.StatusNotFound)
		start := time.Now()
		err := checkCRD(ctx, clientFor(t, srv.URL), 30*time.Second)
		if err == nil || !strings.Contains(err.Error(), "install the CRD") {
			t.Errorf("got %v, want the install-the-CRD refusal", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s: a 404 is an answer, not a reason to retry", d)
		}
	})
}

// Namespace churn must not grow the usage maps.
func TestUsageMapsShrinkWithNamespaceChurn(t *testing.T) {
	m := newManager()
	var pods []*v1.Pod
	for i := range 1000 {
		ns := fmt.Sprintf("ns-%d", i)
		if i%2 == 0 {
			m.setQuota(ns, newQuota(eq(ns, rl("cpu", "1"), nil), nil))
		}
		p := pod(ns, "p", "500m", 0, "n")
		m.observe(p)
		leaving := p.DeepCopy()
		leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		m.observe(leaving)
		pods = append(pods, p)
		pending := pod(ns, "nominated", "1", 0, "")
		pending.Status.NominatedNodeName = "n"
		m.observe(pending)
		pods = append(pods, pending)
	}
	for _, p := range pods {
		m.forgetPod(p.UID)
	}
	for i := 0; i < 1000; i += 2 {
		m.setQuota(fmt.Sprintf("ns-%d", i), nil)
	}
	if len(m.nsUsed) != 0 || len(m.nsLeaving) != 0 || len(m.pods) != 0 || len(m.nominated) != 0 || len(m.quotas) != 0 {
		t.Errorf("after deleting every namespace: nsUsed %d, nsLeaving %d, pods %d, nominated %d, quotas %d; want all 0",
			len(m.nsUsed), len(m.nsLeaving), len(m.pods), len(m.nominated), len(m.quotas))
	}
}

// The rule ElasticQuota offers other plugins' dry runs judges the
// preemptors together (second review of #26 item 1): a gang whose members
// together stay within their team's min may reclaim; one that would go past
// it may not, though each member alone would stay within it.
func TestDryRunRuleJudgesTheGangWhole(t *testing.T) {
	var pods []*v1.Pod
	for i := range 6 {
		pods = append(pods, pod("a", fmt.Sprintf("a%d", i), "1", 100, "n1"))
	}
	pl, _, _ := newTestPlugin(t, []*v1.Node{node("n1", "6")}, pods, eq("a", rl("cpu", "2"), rl("cpu", "8")), eq("b", rl("cpu", "4"), rl("cpu", "8")))
	gang := func(n int) []*v1.Pod {
		var g []*v1.Pod
		for i := range n {
			g = append(g, pod("b", fmt.Sprintf("b%d", i), "1", 1000, ""))
		}
		return g
	}
	if !pl.rule(gang(4)).Eligible(pods[0]) {
		t.Error("a gang of 4 within b's min of 4 may not reclaim from a, which borrows 4")
	}
	if pl.rule(gang(5)).Eligible(pods[0]) {
		t.Error("a gang of 5 past b's min of 4 may reclaim: each member alone is within the min, the gang is not")
	}
	v := pl.rule(gang(4))
	for _, p := range pods[:4] {
		if !v.Eligible(p) {
			t.Fatalf("%s not eligible before a is back at its min", p.Name)
		}
		v.Take(p)
	}
	if v.Eligible(pods[4]) {
		t.Error("a fifth victim would take a below its min")
	}
	v.Release(pods[3])
	if !v.Eligible(pods[4]) {
		t.Error("a released victim's room is not given back")
	}
}

// A gang member already nominated by an earlier preemption is one of the
// preemptors, not a nominated pod besides them: the rule must not count it
// twice (third review of #26 item 1).
func TestDryRunRuleCountsNominatedMembersOnce(t *testing.T) {
	var pods []*v1.Pod
	for i := range 6 {
		pods = append(pods, pod("a", fmt.Sprintf("a%d", i), "1", 100, "n1"))
	}
	pl, _, _ := newTestPlugin(t, []*v1.Node{node("n1", "6")}, pods, eq("a", rl("cpu", "2"), rl("cpu", "8")), eq("b", rl("cpu", "4"), rl("cpu", "8")))
	var gang []*v1.Pod
	for i := range 4 {
		gang = append(gang, pod("b", fmt.Sprintf("b%d", i), "1", 1000, ""))
	}
	nominated := gang[0].DeepCopy()
	nominated.Status.NominatedNodeName = "n1"
	pl.shared.mgr.observe(nominated)
	// b1 is the member being scheduled now; b0 is nominated.
	if !pl.rule([]*v1.Pod{gang[1], gang[0], gang[2], gang[3]}).Eligible(pods[0]) {
		t.Error("the gang of 4 within b's min of 4 may not reclaim once one member is nominated: it was counted twice")
	}
}
