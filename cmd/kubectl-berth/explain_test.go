package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

func TestPrintTablePlaced(t *testing.T) {
	r := &explain.Result{Profile: "berth", Time: metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Outcome: explain.OutcomePlaced, Nodes: 3,
		Placed: &explain.Placed{Node: "a", Scored: true, Feasible: 2, ScoredNodes: 2, Rank: 1, Top: []explain.NodeScore{
			{Node: "a", Total: 300, Plugins: map[string]int64{"LoadAware": 200, "NodeResourcesFit": 100}},
			{Node: "b", Total: 250, Plugins: map[string]int64{"LoadAware": 100, "NodeResourcesFit": 150}},
		}},
		Rejections: []explain.Rejection{{Plugin: "TaintToleration", Nodes: 1, Reasons: []explain.ReasonCount{{Reason: "node(s) had untolerated taint(s)", Nodes: 1}}}},
	}
	var out strings.Builder
	if err := printTable(&out, "ns/p", r); err != nil {
		t.Fatal(err)
	}
	want := `Pod ns/p placed on a by profile berth at 2026-12-01T12:00:00Z (2 of 3 nodes feasible).
Rank 1 of 2 scored nodes.

   NODE  TOTAL  LoadAware  NodeResourcesFit
*  a     300    200        100
   b     250    100        150

REJECTED BY      NODES  REASON
TaintToleration  1      node(s) had untolerated taint(s) (1)
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPrintTablePendingGangMember(t *testing.T) {
	r := &explain.Result{Profile: "berth-native-gangs", Time: metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Outcome: explain.OutcomePending, Nodes: 3,
		PodGroup: "ml/trainer", GroupFailure: "pod group is unschedulable, minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"}
	var out strings.Builder
	if err := printTable(&out, "ml/trainer-0", r); err != nil {
		t.Fatal(err)
	}
	want := `Pod ml/trainer-0 is pending with its pod group ml/trainer (profile berth-native-gangs, at 2026-12-01T12:00:00Z).
Scheduler: pod group is unschedulable, minCount (4) cannot be satisfied: 3 scheduled, 0 remaining
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPrintTablePlacedNotBound(t *testing.T) {
	r := &explain.Result{Profile: "berth-all", Time: metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Outcome: explain.OutcomePending, Nodes: 3,
		Rejection: "0/3 nodes are available: 1 pod group ml/trainer: 3/4 members placed, gang timed out."}
	var out strings.Builder
	if err := printTable(&out, "ml/trainer-0", r); err != nil {
		t.Fatal(err)
	}
	want := `Pod ml/trainer-0 is pending: a cycle placed it and it was not bound (profile berth-all, at 2026-12-01T12:00:00Z).
Scheduler: 0/3 nodes are available: 1 pod group ml/trainer: 3/4 members placed, gang timed out.
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A decision explained from the pod's condition (by a leader that took
// over from the one that made it) says so, in the scheduler's words.
func TestPrintTableDecisionFromTheCondition(t *testing.T) {
	r := &explain.Result{Profile: "berth-all", Time: metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Outcome: explain.OutcomePending, Nodes: 3,
		Decision: "0/3 nodes are available: 3 Insufficient cpu."}
	var out strings.Builder
	if err := printTable(&out, "ns/p", r); err != nil {
		t.Fatal(err)
	}
	want := `Pod ns/p is pending; explained from its condition, as the cycle that decided left no explanation (profile berth-all, at 2026-12-01T12:00:00Z).
Scheduler: 0/3 nodes are available: 3 Insufficient cpu.
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPrintTablePlacedUnexplained(t *testing.T) {
	r := &explain.Result{Profile: "berth-all", Time: metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Outcome: explain.OutcomePlaced, Nodes: 3,
		Placed: &explain.Placed{Node: "n1", Unexplained: "not explained: over the explanation budget (maxPerMinute)"}}
	var out strings.Builder
	if err := printTable(&out, "ns/p", r); err != nil {
		t.Fatal(err)
	}
	want := "Pod ns/p placed on n1 by profile berth-all at 2026-12-01T12:00:00Z; not explained: over the explanation budget (maxPerMinute).\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestHowToAsk(t *testing.T) {
	for _, tc := range []struct {
		node  string
		asked bool
		want  string
	}{
		{"", false, "kubectl annotate pod -n ns p explain.berth.dev/request=true"},
		{"n1", false, "was placed on n1 without asking"},
		{"", true, "asks for an explanation but has none yet"},
	} {
		var out strings.Builder
		howToAsk(&out, "ns", "p", tc.node, tc.asked)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("node %q asked %v: %q, want it to contain %q", tc.node, tc.asked, out.String(), tc.want)
		}
	}
}

func TestExplanationObjectPrintsAsAnObject(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "trainer-0"}}
	raw := `{"version":"` + explain.ResultVersion + `","profile":"berth","outcome":"Pending","nodes":3,"nearest":[{"node":"a","plugin":"NodeResourcesFit","short":{"cpu":"1"}}]}`
	obj, err := explanationObject(pod, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		format, want string
	}{
		{"jsonpath={.nodes} {.nearest[0].node} {.metadata.namespace}", "3 a ml"},
		{"name", "explanation.explain.berth.dev/trainer-0\n"},
	} {
		pf := newPrintFlags()
		pf.output = tc.format
		p, err := pf.printer()
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		var out strings.Builder
		if err := p.PrintObj(obj, &out); err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if out.String() != tc.want {
			t.Errorf("-o %s: %q, want %q", tc.format, out.String(), tc.want)
		}
	}
	pf := newPrintFlags()
	pf.output = "go-template={{.nodes}}"
	if _, err := pf.printer(); err == nil || !strings.Contains(err.Error(), "allowed formats are: json,jsonpath,") {
		t.Errorf("-o go-template: %v, want kubectl's error listing the formats", err)
	}
	if _, err := explanationObject(pod, "{"); err == nil || !strings.Contains(err.Error(), "ml/trainer-0") {
		t.Errorf("a broken annotation: %v, want an error naming the pod", err)
	}
}

func TestPendingColumns(t *testing.T) {
	rj := []explain.Rejection{{Plugin: "TaintToleration", Nodes: 1}, {Plugin: "NodeResourcesFit", Nodes: 2}}
	if got, want := rejectedBy(rj), "NodeResourcesFit (2), TaintToleration (1)"; got != want {
		t.Errorf("rejectedBy: %q, want %q", got, want)
	}
	if rj[0].Plugin != "TaintToleration" {
		t.Errorf("rejectedBy reordered its argument: %v", rj)
	}
	if got, want := nearest([]explain.Nearest{{Node: "a", Short: map[string]string{"memory": "1Gi", "cpu": "500m"}}}), "a (short 1Gi memory, 500m cpu)"; got != want {
		t.Errorf("nearest: %q, want %q", got, want)
	}
	if got := nearest(nil) + " " + rejectedBy(nil); got != "<none> <none>" {
		t.Errorf("empty: %q", got)
	}
}
