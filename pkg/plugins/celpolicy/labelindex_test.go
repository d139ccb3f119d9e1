package celpolicy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestLabelQueryOf(t *testing.T) {
	for _, tc := range []struct {
		filter string
		terms  []labelTerm // nil: not indexable
		exact  bool
	}{
		{"'gpu' in node.metadata.labels", []labelTerm{{key: "gpu"}}, true},
		{"node.metadata.labels.?pool.orValue('') == 'gpu'", []labelTerm{{key: "pool", values: []string{"gpu"}}}, true},
		{"'gpu' == node.metadata.?labels.?pool.orValue('none')", []labelTerm{{key: "pool", values: []string{"gpu"}}}, true},
		{"node.metadata.labels[?'topology.kubernetes.io/zone'].orValue('') in ['a', 'b']", []labelTerm{{key: "topology.kubernetes.io/zone", values: []string{"a", "b"}}}, true},
		{"'gpu' in node.metadata.labels && node.metadata.labels.?tier.orValue('') == 'x' && !node.spec.unschedulable",
			[]labelTerm{{key: "gpu"}, {key: "tier", values: []string{"x"}}}, false},
		{"'gpu' in node.metadata.labels && !('spot' in node.metadata.labels)", []labelTerm{{key: "gpu"}}, false},
		// Not indexable: a default that is one of the values (nodes without the label pass),
		// negations, disjunctions, other fields, the pod or nodeInfo.
		{"node.metadata.labels.?pool.orValue('gpu') == 'gpu'", nil, false},
		{"node.metadata.labels.?pool.orValue('') in ['', 'a']", nil, false},
		{"!('gpu' in node.metadata.labels)", nil, false},
		{"'gpu' in node.metadata.labels || 'tpu' in node.metadata.labels", nil, false},
		{"node.metadata.labels['pool'] == 'gpu'", nil, false},
		{"node.metadata.name == 'n1'", nil, false},
		{"'gpu' in node.metadata.annotations", nil, false},
		{"node.metadata.labels.?pool.orValue('') == pod.metadata.?labels.?pool.orValue('')", nil, false},
		{"'gpu' in node.metadata.labels && nodeInfo.podCount < 10", nil, false},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			pl := newPlugin(t, config.CELPolicyRule{Name: "r", Filter: tc.filter})
			q := pl.rules[0].query
			if tc.terms == nil {
				if q != nil {
					t.Fatalf("indexed as %+v, want not indexable", q.terms)
				}
				return
			}
			if q == nil {
				t.Fatal("not indexed")
			}
			if diff := cmp.Diff(tc.terms, q.terms, cmp.AllowUnexported(labelTerm{})); diff != "" {
				t.Errorf("terms (-want +got):\n%s", diff)
			}
			if q.exact != tc.exact {
				t.Errorf("exact = %v, want %v", q.exact, tc.exact)
			}
		})
	}
}

// The label index's answer agrees with evaluating the filters on every node
// of random clusters: PreFilter names a node if and only if the plain
// evaluation lets it pass the indexed rules (where those are exact; a
// superset where a rule also reads more than labels), across label changes,
// node additions and removals between cycles.
func TestLabelIndexMatchesEvaluation(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 5000))
	keys := []string{"gpu", "pool", "zone", "tier"}
	values := []string{"a", "b", "c"}
	randTerm := func() string {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(5) {
		case 0:
			return fmt.Sprintf("'%s' in node.metadata.labels", k)
		case 1:
			return fmt.Sprintf("node.metadata.labels.?%s.orValue('') == '%s'", k, values[rng.IntN(len(values))])
		case 2:
			return fmt.Sprintf("node.metadata.?labels.?%s.orValue('none') in ['%s', '%s']", k, values[rng.IntN(len(values))], values[rng.IntN(len(values))])
		case 3:
			return fmt.Sprintf("!('%s' in node.metadata.labels)", k)
		default:
			return fmt.Sprintf("'%s' == node.metadata.labels[?'%s'].orValue('')", values[rng.IntN(len(values))], k)
		}
	}
	randLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				l[k] = values[rng.IntN(len(values))]
			}
		}
		return l
	}
	_, ctx := ktesting.NewTestContext(t)
	pod := st.MakePod().Namespace("ns").Name("p").UID("p").Obj()
	indexedCycles := 0
	for trial := range 60 {
		var rules []config.CELPolicyRule
		for r := range 1 + rng.IntN(3) {
			terms := make([]string, 1+rng.IntN(3))
			for i := range terms {
				terms[i] = randTerm()
			}
			rules = append(rules, config.CELPolicyRule{Name: fmt.Sprintf("r%d", r), Filter: strings.Join(terms, " && ")})
		}
		pl := newPlugin(t, rules...)
		var nodes []*v1.Node
		for i := range 20 + rng.IntN(60) {
			nodes = append(nodes, labelled(fmt.Sprintf("n%d-%d", trial, i), randLabels()))
		}
		list := snapshotList(nodes)
		for cycle := range 6 {
			// Between cycles the snapshot changes: labels of some nodes (new
			// objects, same list), or nodes added and removed (a new list).
			switch cycle % 3 {
			case 1:
				for range 1 + rng.IntN(5) {
					i := rng.IntN(len(nodes))
					n := nodes[i].DeepCopy()
					n.Labels = randLabels()
					nodes[i] = n
					list[i].(*framework.NodeInfo).SetNode(n)
				}
			case 2:
				nodes = slices.Delete(nodes, 0, rng.IntN(3))
				nodes = append(nodes, labelled(fmt.Sprintf("n%d-new%d", trial, cycle), randLabels()))
				list = snapshotList(nodes)
			}
			state := framework.NewCycleState()
			res, status := pl.PreFilter(ctx, state, pod, list)
			want, exact := sets.New[string](), true
			for _, ni := range list {
				if filterResult(t, pl, pod, ni.(*framework.NodeInfo)).IsSuccess() {
					want.Insert(ni.Node().Name)
				}
			}
			for _, r := range pl.rules {
				exact = exact && (r.query == nil || r.query.exact)
			}
			var got sets.Set[string]
			switch {
			case status.Code() == fwk.UnschedulableAndUnresolvable:
				got = sets.New[string]()
			case !status.IsSuccess():
				t.Fatalf("PreFilter: %v", status)
			case res.AllNodes():
				continue // no rule indexed
			default:
				got = res.NodeNames
			}
			indexedCycles++
			if !got.IsSuperset(want) {
				t.Fatalf("trial %d cycle %d, rules %v: index left out nodes that pass: %v", trial, cycle, rules, sets.List(want.Difference(got)))
			}
			allIndexed := true
			for _, r := range pl.rules {
				allIndexed = allIndexed && r.query != nil
			}
			if exact && allIndexed && !got.Equal(want) {
				t.Fatalf("trial %d cycle %d, rules %v: index named nodes that fail: %v", trial, cycle, rules, sets.List(got.Difference(want)))
			}
		}
	}
	if indexedCycles < 100 {
		t.Errorf("only %d cycles used the index", indexedCycles)
	}
}

// snapshotList is a snapshot's node list.
func snapshotList(nodes []*v1.Node) []fwk.NodeInfo {
	list := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		list[i] = nodeInfo(n)
	}
	return list
}

func labelled(name string, labels map[string]string) *v1.Node {
	n := st.MakeNode().Name(name).Obj()
	n.Labels = labels
	return n
}
