package offline

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// maxTiedNames caps the tied nodes an Outcome names (it counts them all):
// on a uniform, empty cluster every scored node ties.
const maxTiedNames = 20

// Score is how a node scored for a pod in the pod's last scheduling cycle:
// its total and each score plugin's weighted, normalised share (as the
// framework's RunScorePlugins returns them).
type Score struct {
	Total   int64         `json:"total"`
	Plugins []PluginScore `json:"plugins,omitempty"`
}

// PluginScore is one plugin's share of a Score.
type PluginScore struct {
	Plugin string `json:"plugin"`
	Score  int64  `json:"score"`
}

// Verdict is how one node (the node another simulation placed the pod on)
// fared in the pod's last scheduling cycle.
type Verdict struct {
	Node string `json:"node"`
	// Score is the node's score when it passed every filter and was scored.
	Score *Score `json:"score,omitempty"`
	// Rejected is the filter's status when a filter rejected the node:
	// "Plugin: reason".
	Rejected string `json:"rejected,omitempty"`
	// NotEvaluated: the node passed no filter and was not scored in that
	// cycle: the scheduler stopped filtering after enough feasible nodes
	// (percentageOfNodesToScore), a PreFilter result left it out, or the pod
	// went to its nominated or batch-hinted node without a search.
	NotEvaluated bool `json:"notEvaluated,omitempty"`
}

// Tied says whether v's node scored as high as the winner's total.
func (v *Verdict) Tied(winner *Score) bool {
	return v != nil && v.Score != nil && winner != nil && v.Score.Total == winner.Total
}

// cycle is what the recorder saw of one scheduling cycle of a pod.
type cycle struct {
	watch string // the node whose verdict to record

	mu       sync.Mutex // filters run in parallel
	rejected string     // the watched node's filter status
	filtered bool       // the watched node went through the filters

	scores []fwk.NodePluginScores // RunScorePlugins' result, until Reserve
	score  *Score                 // the chosen node's
	tied   []string
	ties   int
	other  *Score // the watched node's

	// rejections counts, in a cycle that found no node, the nodes each
	// filter status rejected ("Plugin: reason").
	rejections map[string]int
}

// recorder wraps a profile's framework to record, for every pod, what its
// last scheduling cycle scored: the node the scheduler picked, the nodes
// that scored as high (a tie the scheduler breaks by the order its filter
// workers finish in), and how one named node fared. Only the scheduling
// cycle's calls pass through it (schedule_one calls the profile's framework
// for PreFilter, Filter, Score and Reserve); preemption's dry runs call the
// framework directly and are not recorded.
type recorder struct {
	framework.Framework
	// watch names, per pod ("namespace/name"), the node whose verdict to
	// record (where another simulation placed the pod).
	watch map[string]string

	// cur is the running cycle (one at a time): read by every Filter call,
	// from the cycle's parallel workers, so without a lock.
	cur atomic.Pointer[cycle]

	mu     sync.Mutex
	cycles map[string]*cycle // each pod's last cycle
	// frozen: the simulation settled and its outcomes are being read; a
	// cycle started now (a late re-activation) no longer replaces a pod's
	// record.
	frozen atomic.Bool
}

func newRecorder(fw framework.Framework, watch map[string]string) *recorder {
	return &recorder{Framework: fw, watch: watch, cycles: map[string]*cycle{}}
}

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// RunPreFilterPlugins starts a cycle.
func (r *recorder) RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string]) {
	name := podName(pod)
	c := &cycle{watch: r.watch[name]}
	r.cur.Store(c)
	if !r.frozen.Load() {
		r.mu.Lock()
		r.cycles[name] = c
		r.mu.Unlock()
	}
	res, s, plugins := r.Framework.RunPreFilterPlugins(ctx, state, pod)
	if c.watch == "" {
		return res, s, plugins
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !s.IsSuccess():
		c.filtered, c.rejected = true, statusText(s)
	case !res.AllNodes() && !res.NodeNames.Has(c.watch):
		// A PreFilter narrowed the nodes (CELPolicy's label index,
		// NodeAffinity): the scheduler never filters the others. Its
		// diagnosis says only which plugins narrowed; the watched node's
		// Filter says why.
		c.filtered = true
		narrowed := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) "+strings.Join(sets.List(plugins), ", "))
		if ni, err := r.SnapshotSharedLister().NodeInfos().Get(c.watch); err == nil {
			narrowed = r.whyLeftOut(ctx, state, pod, ni, narrowed)
		}
		c.rejected = statusText(narrowed)
	}
	return res, s, plugins
}

// whyLeftOut is why a node a PreFilter's node set left out does not fit:
// its Filter plugins' status, or (were they to pass it) the diagnosis's
// status, which names only the PreFilter plugins.
func (r *recorder) whyLeftOut(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, diagnosis *fwk.Status) *fwk.Status {
	if fs := r.RunFilterPlugins(ctx, state, pod, ni); !fs.IsSuccess() {
		return fs
	}
	return diagnosis
}

// GetNodeHint gives no hint: every pod gets a full cycle, so that each
// placement has its scores and ties. OpportunisticBatching's hint reuses
// the sorted scores of the previous pod of the same signature when each
// such pod takes a node of its own, and names the node a full cycle would
// pick (up to ties); taking it only saves the filtering and scoring.
func (r *recorder) GetNodeHint(context.Context, *v1.Pod, fwk.PodSignature, fwk.CycleState, int64) string {
	return ""
}

// freeze keeps each pod's record as it is: the simulation has settled.
func (r *recorder) freeze() { r.frozen.Store(true) }

// statusText is a rejection as the scheduler's diagnosis words it, with the
// plugin that rejected.
func statusText(s *fwk.Status) string {
	if s.Plugin() == "" {
		return s.Message()
	}
	return s.Plugin() + ": " + s.Message()
}

// current is the running cycle.
func (r *recorder) current() *cycle { return r.cur.Load() }

// RunFilterPluginsWithNominatedPods records the watched node's status.
func (r *recorder) RunFilterPluginsWithNominatedPods(ctx context.Context, state fwk.CycleState, pod *v1.Pod, info fwk.NodeInfo) *fwk.Status {
	s := r.Framework.RunFilterPluginsWithNominatedPods(ctx, state, pod, info)
	if c := r.current(); c != nil && c.watch != "" && info.Node() != nil && info.Node().Name == c.watch {
		c.mu.Lock()
		c.filtered = true
		if !s.IsSuccess() {
			c.rejected = statusText(s)
		}
		c.mu.Unlock()
	}
	return s
}

// RunScorePlugins keeps the scores until Reserve names the node chosen
// (prioritizeNodes adds scheduler extenders' scores to them in place after
// this returns).
func (r *recorder) RunScorePlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) ([]fwk.NodePluginScores, *fwk.Status) {
	scores, s := r.Framework.RunScorePlugins(ctx, state, pod, nodes)
	if c := r.current(); c != nil && s.IsSuccess() {
		c.mu.Lock()
		c.scores = scores
		c.mu.Unlock()
	}
	return scores, s
}

// RunReservePluginsReserve learns the node chosen: it keeps that node's
// score, the nodes that scored as high and the watched node's score, and
// drops the rest.
func (r *recorder) RunReservePluginsReserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if c := r.current(); c != nil {
		c.mu.Lock()
		for i := range c.scores {
			switch c.scores[i].Name {
			case nodeName:
				c.score = scoreOf(&c.scores[i])
			case c.watch:
				c.other = scoreOf(&c.scores[i])
			}
		}
		if c.score != nil {
			for i := range c.scores {
				if n := c.scores[i].Name; n != nodeName && c.scores[i].TotalScore == c.score.Total {
					c.ties++
					if len(c.tied) < maxTiedNames {
						c.tied = append(c.tied, n)
					}
				}
			}
			sort.Strings(c.tied)
		}
		c.scores = nil
		c.mu.Unlock()
	}
	return r.Framework.RunReservePluginsReserve(ctx, state, pod, nodeName)
}

// RunPostFilterPlugins runs when the cycle found no node: it counts the
// nodes each status rejected, as the scheduler's diagnosis holds them. A
// node a PreFilter's node set left out carries only the plugins' names
// there; the node's Filter plugins are run (in parallel, as the cycle runs
// them) to say why — a rule's message rather than "didn't satisfy plugin(s)
// [CELPolicy]".
func (r *recorder) RunPostFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if c := r.current(); c != nil {
		if nodes, err := r.SnapshotSharedLister().NodeInfos().List(); err == nil {
			statuses := make([]*fwk.Status, len(nodes))
			r.Parallelizer().Until(ctx, len(nodes), func(i int) {
				st := m.Get(nodes[i].Node().Name)
				if !st.IsSuccess() && st.Plugin() == "" && st.Code() == fwk.UnschedulableAndUnresolvable {
					st = r.whyLeftOut(ctx, state, pod, nodes[i], st)
				}
				statuses[i] = st
			}, "simulateRejections")
			counts := map[string]int{}
			for _, st := range statuses {
				if !st.IsSuccess() {
					counts[statusText(st)]++
				}
			}
			c.mu.Lock()
			c.rejections = counts
			c.mu.Unlock()
		}
	}
	return r.Framework.RunPostFilterPlugins(ctx, state, pod, m)
}

// scoreOf copies a node's scores.
func scoreOf(s *fwk.NodePluginScores) *Score {
	out := &Score{Total: s.TotalScore, Plugins: make([]PluginScore, 0, len(s.Scores))}
	for _, p := range s.Scores {
		out.Plugins = append(out.Plugins, PluginScore{Plugin: p.Name, Score: p.Score})
	}
	return out
}

// fill adds what the pod's last cycle recorded to o.
func (r *recorder) fill(o *Outcome) {
	r.mu.Lock()
	c := r.cycles[o.Namespace+"/"+o.Name]
	r.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.Node != "" {
		o.Score, o.TiedWith, o.Ties = c.score, c.tied, c.ties
	} else {
		o.Rejections = c.rejections
	}
	if c.watch == "" || c.watch == o.Node {
		return
	}
	v := &Verdict{Node: c.watch, Score: c.other, Rejected: c.rejected}
	if v.Score == nil && v.Rejected == "" {
		// Filtered and passed but not scored (the only feasible node
		// needs no score) is not "not evaluated".
		v.NotEvaluated = !c.filtered
	}
	o.Other = v
}
