package main

import (
	"strings"
	"testing"
	"time"

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
