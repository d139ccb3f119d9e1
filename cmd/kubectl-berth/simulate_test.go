package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/berth-scheduler/berth/internal/offline"
)

func score(total int64, plugins ...offline.PluginScore) *offline.Score {
	return &offline.Score{Total: total, Plugins: plugins}
}

func TestSimulateDiffTellsTiesFromMovesAndSaysWhy(t *testing.T) {
	current := &offline.Simulation{
		Outcomes: []offline.Outcome{
			{Namespace: "team", Name: "tied", Node: "n1", Score: score(150)},
			{Namespace: "team", Name: "moved", Node: "n1", Score: score(150)},
			{Namespace: "team", Name: "refused", Node: "n1"},
			{Namespace: "team", Name: "same", Node: "n2"},
			{Namespace: "team", Name: "tied-then-rejected", Node: "n1", Score: score(150), Ties: 1, TiedWith: []string{"n2"}},
			{Namespace: "team", Name: "tied-then-unseen", Node: "n1", Score: score(150), Ties: 1, TiedWith: []string{"n2"}},
			{Namespace: "team", Name: "refused-at-permit", Node: "n1", Score: score(150)},
			// Its scheduler has a profile in current.yaml only (renamed or
			// dropped in proposed.yaml).
			{Namespace: "team", Name: "current-only", SchedulerName: "batch", Node: "n2"},
		},
		Gangs: []offline.GangUse{{Namespace: "team", Name: "g", MinMember: 2, Bound: 2}},
	}
	proposed := &offline.Simulation{
		Outcomes: []offline.Outcome{
			{Namespace: "team", Name: "tied", Node: "n2", Score: score(150), Other: &offline.Verdict{Node: "n1", Score: score(150)}},
			{Namespace: "team", Name: "moved", Node: "n2",
				Score: score(190, offline.PluginScore{Plugin: "CELPolicy", Score: 100}, offline.PluginScore{Plugin: "NodeResourcesFit", Score: 90}),
				Other: &offline.Verdict{Node: "n1", Score: score(150, offline.PluginScore{Plugin: "CELPolicy", Score: 0}, offline.PluginScore{Plugin: "NodeResourcesFit", Score: 150})}},
			{Namespace: "team", Name: "refused", Reason: "0/2 nodes are available", Other: &offline.Verdict{Node: "n1", Rejected: "CELPolicy: batch pods run on the batch pool"},
				Rejections: map[string]int{"CELPolicy: batch pods run on the batch pool": 2}},
			{Namespace: "team", Name: "same", Node: "n2"},
			// A tie under current, but proposed rejects n1: a move.
			{Namespace: "team", Name: "tied-then-rejected", Node: "n2", Score: score(150), Other: &offline.Verdict{Node: "n1", Rejected: "CELPolicy: no"}},
			// A tie under current; proposed did not evaluate n1.
			{Namespace: "team", Name: "tied-then-unseen", Node: "n2", Score: score(150), Other: &offline.Verdict{Node: "n1", NotEvaluated: true}},
			// Scored n1, then refused at Permit: the scheduler's message.
			{Namespace: "team", Name: "refused-at-permit", Reason: "waiting for the gang", Other: &offline.Verdict{Node: "n1", Score: score(150)}},
		},
		Gangs: []offline.GangUse{{Namespace: "team", Name: "g", MinMember: 2, Bound: 1}},
	}
	r := &simulateReport{Configs: []string{"current.yaml", "proposed.yaml"}}
	r.fill([]*offline.Simulation{current, proposed})
	got := map[string]simulatedPod{}
	for _, p := range r.Pods {
		got[p.Name] = p
	}
	if p := got["tied"]; p.Change != "tie" {
		t.Errorf("tied: change %q (%s), want tie: n1 scored as high as n2", p.Change, p.Why)
	}
	if p := got["moved"]; p.Change != "moved" || !strings.Contains(p.Why, "n2 scored 190, n1 150 (CELPolicy +100, NodeResourcesFit -60)") {
		t.Errorf("moved: %q %q, want moved, with the plugins' differences, largest first", p.Change, p.Why)
	}
	if p := got["refused"]; p.Change != "newly-pending" || p.Why != "n1 rejected: CELPolicy: batch pods run on the batch pool" {
		t.Errorf("refused: %q %q, want newly-pending, with the filter that rejected n1", p.Change, p.Why)
	}
	if p := got["tied-then-rejected"]; p.Change != "moved" || p.Why != "n1 rejected: CELPolicy: no" {
		t.Errorf("tied-then-rejected: %q %q, want moved: proposed rejects n1, whatever current's tie", p.Change, p.Why)
	}
	if p := got["tied-then-unseen"]; p.Change != "tie" {
		t.Errorf("tied-then-unseen: %q %q, want tie: proposed has no verdict on n1, current tied it with n2", p.Change, p.Why)
	}
	if p := got["refused-at-permit"]; p.Change != "newly-pending" || p.Why != "waiting for the gang" {
		t.Errorf("refused-at-permit: %q %q, want newly-pending with the scheduler's message", p.Change, p.Why)
	}
	if p := got["current-only"]; p.Change != "newly-pending" || p.Why != `proposed.yaml has no profile "batch": no scheduler would place it` || !p.Outcomes[1].NotSimulated {
		t.Errorf("current-only: %q %q %+v, want newly pending, not simulated under proposed.yaml: no profile would place it", p.Change, p.Why, p.Outcomes)
	}
	if p := got["same"]; p.Change != "" {
		t.Errorf("same: %q, want no change", p.Change)
	}
	if r.Totals.Moved != 2 || r.Totals.Ties != 2 || r.Totals.NewlyPending != 3 || r.Totals.GangsNoLongerFitting != 1 ||
		!slices.Equal(r.Totals.Pending, []int{0, 2}) || !slices.Equal(r.Totals.NoProfile, []int{0, 1}) {
		t.Errorf("totals %+v, want 2 moved, 2 ties, 3 newly pending (one of no profile), 1 gang no longer fitting", r.Totals)
	}
	if len(r.Totals.PendingReasons) != 1 || r.Totals.PendingReasons[0].Pods[1] != 1 || r.Totals.PendingReasons[0].Nodes[1] != 2 {
		t.Errorf("pending reasons %+v, want the rule's: 1 pod, 2 nodes under proposed.yaml", r.Totals.PendingReasons)
	}
	var out bytes.Buffer
	if err := r.printTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 moved, 3 newly pending, 0 newly placed, 0 newly preempted; 2 ties", "gangs no longer fitting: 1 of 1: team/g (2 → 1 of 2 bound)",
		"proposed.yaml: 5 placed, 2 pending, 1 of no profile of it (nothing would place them)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "team" {
			rows[f[1]] = f[2]
		}
	}
	if rows["tied"] != "tie" || rows["moved"] != "moved" || rows["same"] != "" {
		t.Errorf("table rows %v, want tied as tie, moved as moved, same not listed:\n%s", rows, out.String())
	}
}

// A bound pod that only the second config's run preempts has no outcome in
// the first run: it stayed where it was there, which is not "no profile".
func TestSimulateDiffTellsAnUntouchedPodFromOneOfNoProfile(t *testing.T) {
	current := &offline.Simulation{Profiles: []string{"berth"},
		Outcomes: []offline.Outcome{{Namespace: "team", Name: "web", SchedulerName: "berth", Node: "n1"}}}
	proposed := &offline.Simulation{Profiles: []string{"berth"},
		Outcomes: []offline.Outcome{{Namespace: "team", Name: "web", SchedulerName: "berth", Node: "n1"},
			{Namespace: "team", Name: "victim", SchedulerName: "berth", Preempted: true}}}
	r := &simulateReport{Configs: []string{"current.yaml", "proposed.yaml"}}
	r.fill([]*offline.Simulation{current, proposed})
	for _, p := range r.Pods {
		if p.Name == "victim" && (p.Change != "newly-preempted" || !p.Outcomes[0].Untouched || p.Outcomes[0].NotSimulated) {
			t.Errorf("victim: %q %+v, want newly preempted, untouched under current.yaml", p.Change, p.Outcomes)
		}
	}
	if !slices.Equal(r.Totals.NoProfile, []int{0, 0}) || !slices.Equal(r.Totals.Pending, []int{0, 0}) || !slices.Equal(r.Totals.Placed, []int{2, 1}) {
		t.Errorf("totals %+v, want nothing of no profile or pending; 2 placed under current.yaml (victim where it was), 1 under proposed.yaml", r.Totals)
	}
	if r.Totals.NewlyPreempted != 1 {
		t.Errorf("newly preempted %d, want 1", r.Totals.NewlyPreempted)
	}
}

// simulate follows kubectl's conventions: -o yaml through cli-runtime's
// printers, an object with apiVersion and kind; no kubeconfig flags, as it
// reaches no cluster.
func TestSimulatePrintsAnObjectAndTakesNoKubeconfigFlags(t *testing.T) {
	r := &simulateReport{Snapshot: "cluster.json.gz", Mode: offline.ModePending, Configs: []string{"current.yaml"}}
	r.fill([]*offline.Simulation{{Outcomes: []offline.Outcome{{Namespace: "team", Name: "web", Node: "n1"}}}})
	pf := newPrintFlags()
	pf.output = "yaml"
	printer, err := pf.printer()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := r.object()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printer.PrintObj(obj, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apiVersion: simulate.berth.dev/v1alpha1", "kind: SimulationReport", "snapshot: cluster.json.gz", "node: n1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, out.String())
		}
	}
	root := newRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	for _, name := range []string{"simulate", "validate"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"kubeconfig", "context", "namespace"} {
			if cmd.Flags().Lookup(flag) != nil || cmd.InheritedFlags().Lookup(flag) != nil {
				t.Errorf("%s offers --%s, which it would not use", name, flag)
			}
		}
	}
	if cmd, _, _ := root.Find([]string{"explain"}); cmd.Flags().Lookup("namespace") == nil {
		t.Error("explain lacks --namespace")
	}
}
