package celpolicy

import (
	"context"
	"math"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/noderecord"
)

// A node's line (noderecord.Line) holds what Filter and Score read of its
// state for the rules that do not read the pod, in one cache line read in
// the order the framework visits the nodes, instead of the nodeState it was
// made from (a heap object the CPU cannot prefetch):
//
//	word 0      the NodeInfo generation of the state
//	word 1      the address of its Node object (held by the nodeState stored with the line)
//	word 2      bit 63: a line; bits 2i..2i+1: rule i's filter outcome (i < lineFilterRules);
//	            bits 30+2i..31+2i: rule i's score outcome
//	words 3..6  the scores of rules 0 to 3 (float64 bits)
//
// A pod whose matched rules include one the line cannot hold (a filter or
// score that reads the pod, or a rule past those counts) takes the
// nodeState path for that extension point.
type nodeLine noderecord.Line

const (
	lineFilterRules = 15
	lineScoreRules  = 4
	lineStored      = uint64(1) << 63
	lineScoreShift  = 2 * lineFilterRules
	lineFirstScore  = 3
)

// The layout fits in a line (a negative constant does not convert to uint:
// a change that overflows it does not compile).
const (
	_ = uint(63 - 2*lineScoreShift)                              // two outcome fields below the stored bit
	_ = uint(noderecord.Words - lineFirstScore - lineScoreRules) // the scores within the words
)

// filterInLine reports whether the line holds rule i's filter outcome.
func filterInLine(i int, r *compiledRule) bool {
	return i < lineFilterRules && !r.filter.readsPod()
}

// scoreInLine reports whether the line holds rule i's score.
func scoreInLine(i int, r *compiledRule) bool {
	return i < lineScoreRules && !r.score.readsPod()
}

func (l *nodeLine) filter(i int) outcome { return outcome(l[2] >> (2 * i) & 3) }

func (l *nodeLine) scoreOK(i int) outcome { return outcome(l[2] >> (lineScoreShift + 2*i) & 3) }

func (l *nodeLine) score(i int) float64 { return math.Float64frombits(l[lineFirstScore+i]) }

// lineOf is the line of a node state.
func (pl *CELPolicy) lineOf(s *nodeState) noderecord.Line {
	l := nodeLine{uint64(s.generation), uint64(uintptr(unsafe.Pointer(s.nodeObj))), lineStored}
	for i := range min(len(pl.rules), lineFilterRules) {
		l[2] |= uint64(s.filter[i]) << (2 * i)
		l[2] |= uint64(s.scoreOK[i]) << (lineScoreShift + 2*i)
		if i < lineScoreRules {
			l[lineFirstScore+i] = math.Float64bits(s.score[i])
		}
	}
	return noderecord.Line(l)
}

// lineFor returns the line of one of the snapshot's own NodeInfos, building
// its state when the line is stale (as nodeStateFor does); false for a
// NodeInfo the records do not hold, or in a PodGroup cycle when a rule reads
// nodeInfo (see nodeStateFor).
func (pl *CELPolicy) lineFor(ctx context.Context, state fwk.CycleState, ni fwk.NodeInfo) (nodeLine, bool) {
	if pl.needNodeInfo && state.IsPodGroupSchedulingCycle() {
		return nodeLine{}, false
	}
	ref, ok := pl.records.Find(ni)
	if !ok {
		return nodeLine{}, false
	}
	l, version, ok := ref.Read()
	node := ni.Node()
	// The Node object first: it is in the NodeInfo's first cache line,
	// which the framework reads before it runs the Filter plugins (the
	// node's name, for nominated pods); the generation lies in another,
	// beside Allocatable, which upstream plugins read for their own needs
	// and which no rule here needs unless it reads nodeInfo.
	if ok && l[2]&lineStored != 0 && (pl.cache.byNode && uintptr(l[1]) == uintptr(unsafe.Pointer(node)) ||
		int64(l[0]) == ni.GetGeneration()) {
		return nodeLine(l), true
	}
	if s := ref.Record(); s != nil && pl.cache.valid(s, ni.GetGeneration(), node) {
		return nodeLine(pl.lineOf(s)), true // the line was being written
	}
	s := pl.buildNodeState(ctx, ni)
	l = pl.lineOf(s)
	ref.Store(version, s, l)
	return nodeLine(l), true
}
