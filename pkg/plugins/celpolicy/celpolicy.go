// Package celpolicy implements CELPolicy: scheduling rules written as CEL
// expressions in the scheduler configuration (match, filter, score), compiled
// at start-up and evaluated against a per-node cache at run time.
package celpolicy

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/lru"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/cyclestate"
	"github.com/berth-scheduler/berth/internal/noderecord"
	"github.com/berth-scheduler/berth/internal/podupdate"
)

// CELPolicy evaluates the configured rules. It holds no per-pod state between
// cycles; per-node values are cached by NodeInfo generation.
type CELPolicy struct {
	env   *celEnv
	rules []*compiledRule
	// needNode / needNodeInfo: some expression reads that variable, so the
	// per-node state must carry its value.
	needNode, needNodeInfo bool
	// podProj, nodeProj: the fields of pods and nodes the rules can read,
	// the only ones converted to CEL.
	podProj, nodeProj *projection
	cache             *nodeCache
	// records holds the states of the snapshot's nodes in list order, found
	// by the NodeInfo (Filter and Score's path); cache is the by-name path
	// of the NodeInfos the records do not know (copies, no list yet).
	records noderecord.Table[nodeState]
	// preFilter, preScore: the states last written, read by Filter and
	// Score without the CycleState's map (cyclestate).
	preFilter cyclestate.Last[*preFilterState]
	preScore  cyclestate.Last[*preScoreState]
	// index answers the filters that only read node labels (nil: none do).
	index    *labelIndex
	counters []ruleCounters
	// matches holds recent pods' match results by UID: the scheduling queue
	// signs a pod when it is added or updated, and PreFilter runs later,
	// after a burst of other pods perhaps; this saves the second evaluation.
	matches *lru.Cache
	// snapshot tells the scheduler's NodeInfos from the copies preemption and
	// nominated pods make (nil in unit tests without a handle); nodeLister
	// tells nodes that still exist (a late Filter must not re-cache a deleted one).
	snapshot   fwk.SharedLister
	nodeLister corelisters.NodeLister
	// lastNodeVals memoises the CEL values of the nodes of the last node
	// event: its queueing hint runs once per pending pod with the same objects.
	lastNodeVals atomic.Pointer[nodeVals]
}

// matchCacheSize bounds the match results kept between SignPod and PreFilter.
const matchCacheSize = 4096

// podMatch is a pod's match result at one resourceVersion; immutable.
type podMatch struct {
	resourceVersion string
	state           *preFilterState
}

// nodeVals is the CEL value of one node event's old and new Node objects.
type nodeVals struct {
	oldNode, newNode *v1.Node
	oldVal, newVal   ref.Val
}

type ruleCounters struct {
	match, filter, score exprCounters
	clamped              metrics.CounterMetric
}

var (
	_ fwk.PreFilterPlugin   = &CELPolicy{}
	_ fwk.FilterPlugin      = &CELPolicy{}
	_ fwk.PreScorePlugin    = &CELPolicy{}
	_ fwk.ScorePlugin       = &CELPolicy{}
	_ fwk.EnqueueExtensions = &CELPolicy{}
	_ fwk.SignPlugin        = &CELPolicy{}
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "CELPolicy"

	preFilterStateKey = "PreFilter" + Name
	preScoreStateKey  = "PreScore" + Name

	// signFragmentKey names CELPolicy's part of a pod's signature (KEP-5598).
	signFragmentKey = Name + ".matchedRules"

	// ErrReasonRuleError is logged with a rule's evaluation error.
	ErrReasonRuleError = "CELPolicy rule could not be evaluated"
)

// Name returns the plugin's name.
func (pl *CELPolicy) Name() string { return Name }

// New compiles every rule; any error stops the scheduler at start-up.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.CELPolicyArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type CELPolicyArgs, got %T", obj)
	}
	if err := validation.ValidateCELPolicyArgs(nil, args); err != nil {
		return nil, err
	}
	env, err := getEnv()
	if err != nil {
		return nil, err
	}
	rules, errs := compileRules(env, nil, args)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	registerMetrics()
	pl := &CELPolicy{env: env, rules: rules, counters: make([]ruleCounters, len(rules)), matches: lru.New(matchCacheSize)}
	pl.podProj, pl.nodeProj = projections(rules)
	for i, r := range rules {
		policy := string(config.CELFailurePolicyFail)
		if r.ignoreErrors {
			policy = string(config.CELFailurePolicyIgnore)
		}
		pl.counters[i] = ruleCounters{
			match:   newExprCounters(r.name, "match", policy),
			filter:  newExprCounters(r.name, "filter", policy),
			score:   newExprCounters(r.name, "score", policy),
			clamped: clampedScores.WithLabelValues(r.name),
		}
		pl.needNode = pl.needNode || r.filter.readsNode() || r.score.readsNode()
		pl.needNodeInfo = pl.needNodeInfo || r.filter.readsNodeInfo() || r.score.readsNodeInfo()
	}
	pl.cache = newNodeCache(!pl.needNodeInfo)
	// The profile's tables share each node's block of lines (LoadAware's
	// line beside this one).
	pl.records.Join(noderecord.GroupFor(h))
	var queries []*labelQuery
	for _, r := range rules {
		if r.query = labelQueryOf(r.filter); r.query != nil {
			queries = append(queries, r.query)
		}
	}
	if len(queries) > 0 {
		pl.index = newLabelIndex(queries)
	}
	if h != nil {
		pl.snapshot = h.SnapshotSharedLister()
	}
	if h != nil && h.SharedInformerFactory() != nil {
		pl.nodeLister = h.SharedInformerFactory().Core().V1().Nodes().Lister()
		// Forget deleted nodes so that the cache does not grow with node churn.
		_, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if n, _, err := schedutil.As[*v1.Node](obj, nil); err == nil {
					pl.cache.remove(n.Name)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("watching node deletions: %w", err)
		}
	}
	klog.FromContext(ctx).V(2).Info("CELPolicy rules compiled", "rules", len(rules))
	return pl, nil
}

// activation feeds the three variables to a program without building a map.
type activation struct {
	pod, node, nodeInfo ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	var v ref.Val
	switch name {
	case varPod:
		v = a.pod
	case varNode:
		v = a.node
	case varNodeInfo:
		v = a.nodeInfo
	}
	return v, v != nil
}

func (a *activation) Parent() interpreter.Activation { return nil }

// activations are reused by the per-node evaluations of pod-reading rules
// (an activation passed to cel-go escapes: one allocation per node otherwise).
var activations = sync.Pool{New: func() any { return &activation{} }}

func getActivation(pod, node, nodeInfo ref.Val) *activation {
	a := activations.Get().(*activation)
	a.pod, a.node, a.nodeInfo = pod, node, nodeInfo
	return a
}

// putActivation returns a; cel-go keeps no reference to an activation once
// Eval has returned.
func putActivation(a *activation) {
	*a = activation{}
	activations.Put(a)
}

// evalBool runs a bool expression and counts the result.
func evalBool(x *expr, act *activation, c *exprCounters) (bool, error) {
	v, _, err := x.prg.Eval(act)
	if err != nil {
		c.errs.Inc()
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		c.errs.Inc()
		return false, fmt.Errorf("expected bool, got %s", v.Type().TypeName())
	}
	if b {
		c.isTrue.Inc()
	} else {
		c.isFalse.Inc()
	}
	return bool(b), nil
}

// evalScore runs a number expression, counts it and clamps it to [0, 100].
func evalScore(x *expr, act *activation, c *ruleCounters) (float64, error) {
	v, _, err := x.prg.Eval(act)
	if err != nil {
		c.score.errs.Inc()
		return 0, err
	}
	var f float64
	switch n := v.(type) {
	case types.Int:
		f = float64(n)
	case types.Uint:
		f = float64(n)
	case types.Double:
		f = float64(n)
	default:
		c.score.errs.Inc()
		return 0, fmt.Errorf("expected a number, got %s", v.Type().TypeName())
	}
	c.score.value.Inc()
	switch {
	case math.IsNaN(f) || f < 0:
		c.clamped.Inc()
		f = 0
	case f > float64(fwk.MaxScore):
		c.clamped.Inc()
		f = float64(fwk.MaxScore)
	}
	return f, nil
}

// preFilterState is what PreFilter learns of the pod once per cycle.
type preFilterState struct {
	pod ref.Val
	// matched are the indexes of the rules whose match selects the pod.
	matched []int
	// filters says whether a matched rule has a filter.
	filters bool
	// lineFilters: every matched rule's filter is in a node's line (see
	// nodeline.go), so Filter reads nothing else of the node.
	lineFilters bool
	// indexed are the matched rules whose filter the label index answers.
	indexed []*compiledRule
	// failed is the first rule whose match failed under policy Fail:
	// PreFilter rejects the pod with its error reason.
	failed *compiledRule
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// matchPod evaluates every rule's match for pod. It runs once per cycle and
// from queueing hints.
func (pl *CELPolicy) matchPod(logger klog.Logger, pod *v1.Pod) (*preFilterState, error) {
	podVal, err := pl.env.podVal(pod, pl.podProj)
	if err != nil {
		return nil, err
	}
	s := &preFilterState{pod: podVal, lineFilters: true}
	act := &activation{pod: podVal}
	for i, r := range pl.rules {
		if r.match != nil {
			ok, err := evalBool(r.match, act, &pl.counters[i].match)
			if err != nil {
				pl.counters[i].match.errsPolicy.Inc()
				logger.V(4).Info(ErrReasonRuleError, "rule", r.name, "expression", "match", "pod", klog.KObj(pod), "err", err)
				if r.ignoreErrors {
					continue
				}
				// Policy Fail: the rule rejects every node.
				if s.failed == nil {
					s.failed = r
				}
				continue
			}
			if !ok {
				continue
			}
		}
		s.matched = append(s.matched, i)
		s.filters = s.filters || r.filter != nil
		s.lineFilters = s.lineFilters && (r.filter == nil || filterInLine(i, r))
		if r.query != nil {
			s.indexed = append(s.indexed, r)
		}
	}
	return s, nil
}

// matchPodOnce is matchPod, reusing the result for the same pod and
// resourceVersion (a pod without one, as in unit tests, is always matched).
// Results are kept only for pods whose matched rules do not read the pod in
// filter or score, which then need no CEL value of the pod: an entry is a few
// indexes, whatever the pod's size.
func (pl *CELPolicy) matchPodOnce(logger klog.Logger, pod *v1.Pod) (*preFilterState, error) {
	if pod.ResourceVersion != "" {
		if v, ok := pl.matches.Get(pod.UID); ok {
			if m := v.(*podMatch); m.resourceVersion == pod.ResourceVersion {
				return m.state, nil
			}
		}
	}
	s, err := pl.matchPod(logger, pod)
	if err == nil && pod.ResourceVersion != "" && !pl.readsPod(s) {
		kept := *s
		kept.pod = nil
		pl.matches.Add(pod.UID, &podMatch{resourceVersion: pod.ResourceVersion, state: &kept})
	}
	return s, err
}

// readsPod reports whether a rule the pod matched reads the pod in its filter or score.
func (pl *CELPolicy) readsPod(s *preFilterState) bool {
	for _, i := range s.matched {
		if r := pl.rules[i]; r.filter.readsPod() || r.score.readsPod() {
			return true
		}
	}
	return false
}

// PreFilter evaluates the rules' match expressions once for the pod. A pod
// that no rule with a filter matches is skipped by Filter. When a matched
// rule's filter reads nothing but node labels, the label index answers it
// for the cycle's snapshot: the PreFilterResult names exactly the nodes
// whose labels can pass, so no plugin filters or scores the others.
func (pl *CELPolicy) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !state.IsPodGroupSchedulingCycle() {
		// A PodGroup cycle filters a snapshot it changes (see nodeStateFor).
		pl.records.Sync(nodes)
	}
	s, err := pl.matchPodOnce(klog.FromContext(ctx), pod)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	pl.preFilter.Write(state, preFilterStateKey, s)
	if s.failed != nil {
		// A match that fails under policy Fail rejects the pod on every node.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, s.failed.errorReason)
	}
	if !s.filters {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if len(s.indexed) > 0 && len(nodes) > 0 {
		return pl.indexedNodes(klog.FromContext(ctx), pod, s, nodes)
	}
	return nil, nil
}

// indexedNodes is the PreFilterResult of the pod's label-only filters.
func (pl *CELPolicy) indexedNodes(logger klog.Logger, pod *v1.Pod, s *preFilterState, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	queries := make([]*labelQuery, len(s.indexed))
	for i, r := range s.indexed {
		queries[i] = r.query
	}
	names := pl.index.candidates(nodes, queries)
	logger.V(5).Info("CELPolicy label index", "pod", klog.KObj(pod), "nodes", names.Len(), "of", len(nodes))
	if names.Len() == 0 {
		indexResults.WithLabelValues("no_nodes").Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, s.indexed[0].rejectReason)
	}
	indexResults.WithLabelValues("narrowed").Inc()
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// PreFilterExtensions returns nil: the rules' view of a node comes from the
// NodeInfo passed to Filter, which preemption already adjusts.
func (pl *CELPolicy) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// nodeStateFor returns the node's cached state, building it when the
// NodeInfo's generation has moved. Expressions that do not read the pod are
// evaluated here, once per node generation for all pods.
func (pl *CELPolicy) nodeStateFor(ctx context.Context, state fwk.CycleState, ni fwk.NodeInfo) *nodeState {
	node := ni.Node()
	if pl.needNodeInfo && state.IsPodGroupSchedulingCycle() {
		// A PodGroup cycle assumes its members into the snapshot's NodeInfos
		// and keeps their generation (Snapshot.AssumePod), then forgets them
		// the same way: a state keyed by generation would be stale both
		// during the cycle and after it. Rules that read nodeInfo are
		// evaluated afresh in such a cycle, and the result is kept nowhere.
		return pl.buildNodeState(ctx, ni)
	}
	if ref, ok := pl.records.Find(ni); ok {
		// One of the snapshot's own NodeInfos: its record, or a new one.
		version := ref.Version()
		if s := ref.Record(); s != nil && pl.cache.valid(s, ni.GetGeneration(), node) {
			return s
		}
		s := pl.buildNodeState(ctx, ni)
		ref.Store(version, s, pl.lineOf(s))
		return s
	}
	if s := pl.cache.get(node.Name, ni.GetGeneration(), node); s != nil {
		return s
	}
	s := pl.buildNodeState(ctx, ni)
	if pl.cacheable(ni) {
		pl.cache.put(node.Name, s)
	}
	return s
}

// buildNodeState evaluates the expressions that do not read the pod on ni.
func (pl *CELPolicy) buildNodeState(ctx context.Context, ni fwk.NodeInfo) *nodeState {
	node := ni.Node()
	s := newNodeState(len(pl.rules))
	s.generation, s.nodeObj = ni.GetGeneration(), node
	if pl.needNode {
		nv, err := pl.env.nodeVal(node, pl.nodeProj)
		if err != nil {
			nv = types.WrapErr(err)
		}
		s.node = nv
	}
	if pl.needNodeInfo {
		s.info = pl.env.env.CELTypeAdapter().NativeToValue(nodeInfoFacts(ni))
	}
	act := &activation{node: s.node, nodeInfo: s.info}
	for i, r := range pl.rules {
		if r.filter != nil && !r.filter.readsPod() {
			ok, err := evalBool(r.filter, act, &pl.counters[i].filter)
			s.filter[i] = pl.filterOutcome(ctx, i, ok, err, node)
		}
		if r.score != nil && !r.score.readsPod() {
			v, err := evalScore(r.score, act, &pl.counters[i])
			s.score[i], s.scoreOK[i] = v, pl.scoreOutcome(ctx, i, err, node)
		}
	}
	return s
}

// cacheable reports whether a state built for ni should replace the cached
// one: ni is the scheduler's own NodeInfo (not a copy that preemption or
// nominated pods made, whose newer generation would otherwise evict the
// real node's state and leave it rebuilt on every lookup), and the node
// still exists (a Filter on a snapshot older than the node's deletion must
// not bring it back into the cache). Without a handle (unit tests) it is
// the newest generation that is kept.
func (pl *CELPolicy) cacheable(ni fwk.NodeInfo) bool {
	name := ni.Node().Name
	if pl.nodeLister != nil {
		if _, err := pl.nodeLister.Get(name); err != nil {
			return false
		}
	}
	if pl.snapshot == nil || !pl.needNodeInfo {
		// Without nodeInfo rules a copy shares the Node object: same state.
		return true
	}
	real, err := pl.snapshot.NodeInfos().Get(name)
	return err != nil || real.GetGeneration() == ni.GetGeneration()
}

// The logger is taken from ctx only for an error: Filter and Score run for
// every node, and the context's values are a chain to walk.
func (pl *CELPolicy) filterOutcome(ctx context.Context, i int, ok bool, err error, node *v1.Node) outcome {
	switch {
	case err != nil:
		pl.counters[i].filter.errsPolicy.Inc()
		klog.FromContext(ctx).V(4).Info(ErrReasonRuleError, "rule", pl.rules[i].name, "expression", "filter", "node", klog.KObj(node), "err", err)
		if pl.rules[i].ignoreErrors {
			return outcomePass
		}
		return outcomeError
	case ok:
		return outcomePass
	default:
		return outcomeReject
	}
}

func (pl *CELPolicy) scoreOutcome(ctx context.Context, i int, err error, node *v1.Node) outcome {
	if err == nil {
		return outcomePass
	}
	pl.counters[i].score.errsPolicy.Inc()
	klog.FromContext(ctx).V(4).Info(ErrReasonRuleError, "rule", pl.rules[i].name, "expression", "score", "node", klog.KObj(node), "err", err)
	if pl.rules[i].ignoreErrors {
		return outcomeNone
	}
	return outcomeError
}

// rejection is the status for a node that rule i rejects. Rules that read
// nodeInfo may pass once pods are removed, so preemption is allowed to try.
func (pl *CELPolicy) rejection(r *compiledRule, o outcome) *fwk.Status {
	code := fwk.UnschedulableAndUnresolvable
	if r.filterCodeRes {
		code = fwk.Unschedulable
	}
	if o == outcomeError {
		return fwk.NewStatus(code, r.errorReason)
	}
	return fwk.NewStatus(code, r.rejectReason)
}

// Filter rejects the node if a matched rule's filter is false (or fails under
// policy Fail). Outcomes of filters that do not read the pod come from the
// node cache; only pod-reading filters are evaluated here.
func (pl *CELPolicy) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := pl.preFilter.Read(state, preFilterStateKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.lineFilters {
		if l, ok := pl.lineFor(ctx, state, nodeInfo); ok {
			for _, i := range s.matched {
				if r := pl.rules[i]; r.filter != nil {
					if o := l.filter(i); o == outcomeReject || o == outcomeError {
						return pl.rejectNode(ctx, pod, nodeInfo, r, o)
					}
				}
			}
			return nil
		}
	}
	ns := pl.nodeStateFor(ctx, state, nodeInfo)
	for _, i := range s.matched {
		r := pl.rules[i]
		if r.filter == nil {
			continue
		}
		o := ns.filter[i]
		if r.filter.readsPod() {
			act := getActivation(s.pod, ns.node, ns.info)
			ok, err := evalBool(r.filter, act, &pl.counters[i].filter)
			putActivation(act)
			o = pl.filterOutcome(ctx, i, ok, err, nodeInfo.Node())
		}
		if o == outcomeReject || o == outcomeError {
			return pl.rejectNode(ctx, pod, nodeInfo, r, o)
		}
	}
	return nil
}

// rejectNode logs and returns rule r's rejection of the node.
func (pl *CELPolicy) rejectNode(ctx context.Context, pod *v1.Pod, nodeInfo fwk.NodeInfo, r *compiledRule, o outcome) *fwk.Status {
	if logger := klog.FromContext(ctx); logger.V(5).Enabled() {
		logger.V(5).Info("Node rejected by CELPolicy rule", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "rule", r.name)
	}
	return pl.rejection(r, o)
}

// preScoreState holds the matched rules that have a score.
type preScoreState struct {
	pod         ref.Val
	scored      []int
	totalWeight int64
	// lineScores: every scored rule's score is in a node's line.
	lineScores bool
}

func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore keeps the matched rules that score; a pod without any is skipped.
func (pl *CELPolicy) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := pl.preFilter.Read(state, preFilterStateKey)
	if err != nil {
		// CELPolicy may be enabled for scoring only; match the pod here then.
		if s, err = pl.matchPod(klog.FromContext(ctx), pod); err != nil {
			return fwk.AsStatus(err)
		}
	}
	ps := &preScoreState{pod: s.pod, lineScores: true}
	for _, i := range s.matched {
		if r := pl.rules[i]; r.score != nil {
			ps.scored = append(ps.scored, i)
			ps.totalWeight += r.weight
			ps.lineScores = ps.lineScores && scoreInLine(i, r)
		}
	}
	if len(ps.scored) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	pl.preScore.Write(state, preScoreStateKey, ps)
	return nil
}

// Score is the weighted average of the matched rules' scores. A rule that
// fails under policy Fail scores 0 on that node; under Ignore it is left out
// of that node's average.
func (pl *CELPolicy) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.preScore.Read(state, preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	var sum float64
	weight := s.totalWeight
	if s.lineScores {
		if l, ok := pl.lineFor(ctx, state, nodeInfo); ok {
			for _, i := range s.scored {
				switch l.scoreOK(i) {
				case outcomePass:
					sum += l.score(i) * float64(pl.rules[i].weight)
				case outcomeNone: // Ignore: leave the rule out for this node
					weight -= pl.rules[i].weight
				}
			}
			if weight <= 0 {
				return 0, nil
			}
			return int64(math.Round(sum / float64(weight))), nil
		}
	}
	ns := pl.nodeStateFor(ctx, state, nodeInfo)
	for _, i := range s.scored {
		r := pl.rules[i]
		v, o := ns.score[i], ns.scoreOK[i]
		if r.score.readsPod() {
			act := getActivation(s.pod, ns.node, ns.info)
			var err error
			v, err = evalScore(r.score, act, &pl.counters[i])
			putActivation(act)
			o = pl.scoreOutcome(ctx, i, err, nodeInfo.Node())
		}
		switch o {
		case outcomePass:
			sum += v * float64(r.weight)
		case outcomeNone: // Ignore: leave the rule out for this node
			weight -= r.weight
		}
	}
	if weight <= 0 {
		return 0, nil
	}
	return int64(math.Round(sum / float64(weight))), nil
}

// ScoreExtensions returns nil: scores are already in [0, MaxNodeScore].
func (pl *CELPolicy) ScoreExtensions() fwk.ScoreExtensions { return nil }

// SignPod lets the scheduler reuse results across pods with equal signatures
// (KEP-5598). The result depends on the pod only through the set of rules
// that match it, unless a matched rule's filter or score reads the pod.
func (pl *CELPolicy) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	s, err := pl.matchPodOnce(klog.FromContext(ctx), pod)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	names := make([]string, 0, len(s.matched))
	for _, i := range s.matched {
		r := pl.rules[i]
		if r.filter.readsPod() || r.score.readsPod() {
			return nil, fwk.NewStatus(fwk.Unschedulable, "CELPolicy rule "+r.name+" reads the pod")
		}
		names = append(names, r.name)
	}
	if s.failed != nil {
		names = append(names, "failed:"+s.failed.name)
	}
	sort.Strings(names)
	return []fwk.SignFragment{{Key: signFragmentKey, Value: names}}, nil
}

// EventsToRegister returns the events that can make a rejected pod
// schedulable: a node added or changed (labels, taints, allocatable, anything
// a rule may read), the pod itself changed (a rule's match or a pod-reading
// filter may now let it through), and an assigned pod removed or scaled
// down when a rule reads nodeInfo (named first under filter, CELPolicy may be
// the only plugin a full node's status names, so it must requeue on what
// frees room).
func (pl *CELPolicy) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint | fwk.UpdateNodeAllocatable | fwk.UpdateNodeAnnotation | fwk.UpdateNodeCondition}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: pl.isSchedulableAfterPodUpdate},
	}
	if pl.needNodeInfo {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}, QueueingHintFn: pl.isSchedulableAfterPodDeleted,
		})
	}
	return events, nil
}

// isSchedulableAfterPodUpdate requeues a pod CELPolicy rejected when the pod
// itself changed in a way its rules can see: the rules it matches (or a
// failing match) changed, or a rule it matches reads the pod in its filter.
// It evaluates the matches of the old and the new pod, nothing on nodes.
func (pl *CELPolicy) isSchedulableAfterPodUpdate(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if newPod.UID != pod.UID || podupdate.OnlyBerthAnnotations(oldPod, newPod) {
		// Explain's write of its result is not a change a rule reads.
		return fwk.QueueSkip, nil
	}
	before, err := pl.matchPod(logger, oldPod)
	if err != nil {
		return fwk.Queue, err
	}
	after, err := pl.matchPod(logger, newPod)
	if err != nil {
		return fwk.Queue, err
	}
	if !slices.Equal(before.matched, after.matched) || before.failed != after.failed {
		logger.V(5).Info("Pod change changes the CELPolicy rules it matches", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	for _, i := range after.matched {
		if pl.rules[i].filter.readsPod() {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterNodeChange requeues the pod only if the node change can
// be what lets it through CELPolicy: the new node passes every matched
// filter that can be checked without the scheduler's view of the node, and
// the old one did not (as upstream's NodeAffinity decides). Filters that read
// nodeInfo are assumed to pass; they make an added node, or a change of its
// allocatable, count as a possible cause.
func (pl *CELPolicy) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, node, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	s, err := pl.matchPod(logger, pod)
	if err != nil {
		return fwk.Queue, err
	}
	if s.failed != nil {
		return fwk.QueueSkip, nil
	}
	oldVal, newVal, err := pl.nodeValsFor(oldNode, node)
	if err != nil {
		return fwk.Queue, err
	}
	passes, readsInfo := pl.passesNodeFilters(s, newVal)
	if !passes {
		logger.V(5).Info("Node change does not make the pod schedulable for CELPolicy", "pod", klog.KObj(pod), "node", klog.KObj(node))
		return fwk.QueueSkip, nil
	}
	if oldNode == nil {
		return fwk.Queue, nil
	}
	if readsInfo && !equality.Semantic.DeepEqual(oldNode.Status.Allocatable, node.Status.Allocatable) {
		return fwk.Queue, nil
	}
	if passedBefore, _ := pl.passesNodeFilters(s, oldVal); !passedBefore {
		return fwk.Queue, nil
	}
	logger.V(5).Info("Node passed CELPolicy before the change too", "pod", klog.KObj(pod), "node", klog.KObj(node))
	return fwk.QueueSkip, nil
}

// passesNodeFilters evaluates the pod's matched filters that do not read
// nodeInfo on node; readsInfo says whether a matched filter reads nodeInfo.
func (pl *CELPolicy) passesNodeFilters(s *preFilterState, node ref.Val) (passes, readsInfo bool) {
	act := &activation{pod: s.pod, node: node}
	for _, i := range s.matched {
		r := pl.rules[i]
		if r.filter == nil {
			continue
		}
		if r.filter.readsNodeInfo() {
			readsInfo = true
			continue
		}
		ok, err := evalBool(r.filter, act, &pl.counters[i].filter)
		if err != nil && !r.ignoreErrors || err == nil && !ok {
			return false, readsInfo
		}
	}
	return true, readsInfo
}

// nodeValsFor converts a node event's objects to CEL once for all the pods
// whose hints the event runs; nil without rules that read node.
func (pl *CELPolicy) nodeValsFor(oldNode, newNode *v1.Node) (ref.Val, ref.Val, error) {
	if !pl.needNode {
		return nil, nil, nil
	}
	if v := pl.lastNodeVals.Load(); v != nil && v.oldNode == oldNode && v.newNode == newNode {
		return v.oldVal, v.newVal, nil
	}
	v := &nodeVals{oldNode: oldNode, newNode: newNode}
	var err error
	if v.newVal, err = pl.env.nodeVal(newNode, pl.nodeProj); err != nil {
		return nil, nil, err
	}
	if oldNode != nil {
		if v.oldVal, err = pl.env.nodeVal(oldNode, pl.nodeProj); err != nil {
			return nil, nil, err
		}
	}
	pl.lastNodeVals.Store(v)
	return v.oldVal, v.newVal, nil
}

// isSchedulableAfterPodDeleted requeues the pod when a matched filter reads
// nodeInfo, whose requested/free/podCount the deletion (or a scale-down)
// changes.
func (pl *CELPolicy) isSchedulableAfterPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if _, _, err := schedutil.As[*v1.Pod](oldObj, nil); err != nil {
		return fwk.Queue, err
	}
	s, err := pl.matchPod(logger, pod)
	if err != nil {
		return fwk.Queue, err
	}
	for _, i := range s.matched {
		if pl.rules[i].filter.readsNodeInfo() {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}
