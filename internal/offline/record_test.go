package offline

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// webPrefersBatchPool is batchPoolConfig with a score rule for web pods
// (appended to its rules).
const webPrefersBatchPool = batchPoolConfig + `      - name: web-prefers-batch-pool
        match: "pod.metadata.?labels.?tier.orValue('') == 'web'"
        score: "node.metadata.?labels.?pool.orValue('') == 'batch' ? 100 : 0"
`

func TestSimulateReportsTheNodesThatTiedWithTheChosenOne(t *testing.T) {
	sim := simulate(t, ModePending, teamNamespace(),
		simNode("web-1", "web", "4"), simNode("web-2", "web", "4"), simNode("web-3", "web", "2"),
		simPod("web-a", "web", "", 1))
	o := outcomes(sim)["web-a"]
	if o.Node != "web-1" && o.Node != "web-2" {
		t.Fatalf("web-a on %q (%s): want one of the two equal 4-CPU nodes", o.Node, o.Reason)
	}
	other := map[string]string{"web-1": "web-2", "web-2": "web-1"}[o.Node]
	if o.Score == nil || o.Score.Total == 0 || len(o.Score.Plugins) == 0 {
		t.Fatalf("no score recorded for the chosen node: %+v", o)
	}
	if o.Ties != 1 || len(o.TiedWith) != 1 || o.TiedWith[0] != other {
		t.Errorf("ties %d %v, want 1 [%s] (two equal nodes; web-3 has less room and scores lower)", o.Ties, o.TiedWith, other)
	}
}

func TestSimulateSaysHowTheComparedNodeFared(t *testing.T) {
	objs := []runtime.Object{teamNamespace(),
		simNode("web-1", "web", "4"), simNode("batch-1", "batch", "4"),
		simPod("web-a", "web", "", 1), simPod("batch-a", "batch", "", 2)}
	// Where another configuration put them: web-a on web-1, batch-a on web-1.
	plan := Plan{Mode: ModePending, Compare: map[string]string{"team/web-a": "web-1", "team/batch-a": "web-1"}}
	got := outcomes(simulateWith(t, webPrefersBatchPool, plan, objs...))

	web := got["web-a"]
	if web.Node != "batch-1" {
		t.Fatalf("web-a on %q (%s), want batch-1 (rule web-prefers-batch-pool)", web.Node, web.Reason)
	}
	if web.Other == nil || web.Other.Node != "web-1" || web.Other.Score == nil {
		t.Fatalf("web-a's compared node: %+v, want web-1 with its score", web.Other)
	}
	if web.Other.Tied(web.Score) || web.Other.Score.Total >= web.Score.Total {
		t.Errorf("web-1 scored %d, batch-1 %d: want web-1 lower", web.Other.Score.Total, web.Score.Total)
	}
	if d := pluginScore(web.Score, "CELPolicy") - pluginScore(web.Other.Score, "CELPolicy"); d <= 0 {
		t.Errorf("CELPolicy gave batch-1 %d more than web-1, want more: %+v vs %+v", d, web.Score, web.Other.Score)
	}

	batch := got["batch-a"]
	if batch.Node != "batch-1" || batch.Other == nil {
		t.Fatalf("batch-a on %q, compared %+v: want batch-1, and web-1's verdict", batch.Node, batch.Other)
	}
	if !strings.Contains(batch.Other.Rejected, "CELPolicy") || !strings.Contains(batch.Other.Rejected, "batch pods run on the batch pool") {
		t.Errorf("web-1's verdict for batch-a %+v, want rejected by CELPolicy with the rule's message", batch.Other)
	}
}

func pluginScore(s *Score, plugin string) int64 {
	for _, p := range s.Plugins {
		if p.Plugin == plugin {
			return p.Score
		}
	}
	return 0
}

func TestSimulateCountsWhatKeptAPodPending(t *testing.T) {
	sim := simulate(t, ModePending, teamNamespace(),
		simNode("web-1", "web", "4"), simNode("web-2", "web", "4"), simNode("batch-1", "batch", "1"),
		simPod("batch-a", "batch", "", 1), simPod("batch-b", "batch", "", 2))
	got := outcomes(sim)
	var pending Outcome
	for _, n := range []string{"batch-a", "batch-b"} {
		if got[n].Node == "" {
			pending = got[n]
		}
	}
	if pending.Name == "" {
		t.Fatalf("no batch pod pending: %+v (batch-1 has room for one)", sim.Outcomes)
	}
	want := map[string]int{"CELPolicy: batch pods run on the batch pool": 2, "NodeResourcesFit: Insufficient cpu": 1}
	if len(pending.Rejections) != len(want) {
		t.Fatalf("rejections %v, want %v", pending.Rejections, want)
	}
	for reason, n := range want {
		if pending.Rejections[reason] != n {
			t.Errorf("rejections %v, want %v", pending.Rejections, want)
		}
	}
}

func TestSimulateTotalsNodesQuotasAndGangs(t *testing.T) {
	quota := &schedv1alpha1.ElasticQuota{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "ElasticQuota"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "team"},
		Spec:       schedv1alpha1.ElasticQuotaSpec{Min: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, Max: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("10")}}}
	group := &schedv1alpha1.PodGroup{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	member := simPod("g-0", "web", "web-1", 3)
	member.Labels[schedv1alpha1.PodGroupLabel] = "g"
	sim := simulate(t, ModePending, teamNamespace(), quota, group,
		simNode("web-1", "web", "4"), simNode("batch-1", "batch", "2"),
		simPod("running", "web", "web-1", 0), member, simPod("web-a", "web", "", 1))
	cpu := map[string]int64{}
	for _, n := range sim.Nodes {
		cpu[n.Node] = n.CPURequested
	}
	if cpu["web-1"]+cpu["batch-1"] != 3000 {
		t.Errorf("nodes %+v, want 3 CPUs requested in all (running, g-0, web-a)", sim.Nodes)
	}
	if len(sim.Quotas) != 1 {
		t.Fatalf("quotas %+v, want team's", sim.Quotas)
	}
	q := sim.Quotas[0]
	if u, b := q.Used[v1.ResourceCPU], q.Borrowed[v1.ResourceCPU]; u.Cmp(resource.MustParse("3")) != 0 || b.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("quota %+v, want 3 CPUs used, 2 borrowed above its min of 1", q)
	}
	if b := q.Borrowed[v1.ResourcePods]; b.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("quota %+v, want 3 pods borrowed: pods has a max and no min (a min of 0)", q)
	}
	if len(sim.Gangs) != 1 || sim.Gangs[0].Bound != 1 || sim.Gangs[0].Fits() {
		t.Errorf("gangs %+v, want g with 1 of its 3 members bound, not fitting", sim.Gangs)
	}
}

// Identical pods that each fill a node are what OpportunisticBatching hints
// for: a hinted pod skips filtering and scoring. The simulation takes no
// hint, so every placement has its scores and ties.
func TestSimulateScoresEveryPlacementEvenWhereTheSchedulerWouldBatch(t *testing.T) {
	objs := []runtime.Object{teamNamespace()}
	for i, cpu := range []string{"1", "1", "1", "1"} {
		objs = append(objs, simNode(fmt.Sprintf("web-%d", i), "web", cpu))
	}
	for i := range 3 {
		objs = append(objs, simPod(fmt.Sprintf("web-%d", i), "web", "", i))
	}
	// Without default spreading constraints: PodTopologySpread signs pods
	// only then, and batching needs every plugin's signature.
	config := batchPoolConfig + `  - name: PodTopologySpread
    args:
      defaultingType: List
`
	sim := simulateWith(t, config, Plan{Mode: ModePending}, objs...)
	for _, o := range sim.Outcomes {
		if o.Node == "" {
			t.Errorf("%s pending: %s", o.Name, o.Reason)
			continue
		}
		if o.Score == nil {
			t.Errorf("%s on %s without scores (a hinted placement?)", o.Name, o.Node)
		}
	}
}
