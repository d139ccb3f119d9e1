package explain

import (
	"encoding/json"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations: a pod asks with AnnotationRequest "true"; its explanation
// is written to AnnotationResult.
const (
	AnnotationRequest = "explain.berth.dev/request"
	AnnotationResult  = "explain.berth.dev/result"

	// ResultVersion names the JSON schema of Result.
	ResultVersion = "explain.berth.dev/v1alpha1"
	// MaxResultBytes bounds the annotation whatever the cluster's size.
	MaxResultBytes = 16 << 10

	// Outcomes.
	OutcomePlaced  = "Placed"
	OutcomePending = "Pending"

	// redacted stands for the name of a node other than the pod's own with
	// redactNodes.
	redacted = "(redacted)"

	maxReasonsPerPlugin = 5
	maxReasonLen        = 256
)

// Result is one explanation, the JSON of the pod's AnnotationResult.
type Result struct {
	Version string      `json:"version"`
	Profile string      `json:"profile"`
	Time    metav1.Time `json:"time"`
	Outcome string      `json:"outcome"`
	// PodGroup names ("namespace/name") the Kubernetes PodGroup
	// (spec.schedulingGroup) the pod was placed with: its PodGroup cycle
	// placed the members one after another, each counting those before it.
	PodGroup string `json:"podGroup,omitempty"`
	// GroupFailure is, for a member of a PodGroup its cycle could not place
	// whole, why, in the scheduler's words (the member's PodScheduled
	// condition: its own filter message, or the group's).
	GroupFailure string `json:"groupFailure,omitempty"`
	// Rejection is, for a pod a cycle placed and then did not bind (a
	// Permit plugin rejected it: a gang member whose gang timed out or was
	// released; its binding failed), why, in the scheduler's words (its
	// PodScheduled condition). No PostFilter ran for it.
	Rejection string `json:"rejection,omitempty"`
	// Decision is, for a pending pod whose decision no cycle of the
	// replica that wrote this explained (the replica that led before it
	// made it, and the explanation it had queued went with it), that
	// decision in the scheduler's words (its PodScheduled condition). The
	// writer ran no cycle for it: no rejections by plugin, no nearest
	// nodes; its next cycle's explanation replaces this one.
	Decision string `json:"decision,omitempty"`
	// Nodes is how many nodes the cycle's snapshot held.
	Nodes int `json:"nodes"`
	// Placed is set for a pod the cycle placed (explained at Reserve).
	Placed *Placed `json:"placed,omitempty"`
	// Rejections counts, per plugin, the nodes it rejected, with its most
	// frequent reasons.
	Rejections []Rejection `json:"rejections,omitempty"`
	// Nearest are, for a pending pod, the nodes rejected for resources
	// closest to fitting, with what they lack.
	Nearest []Nearest `json:"nearest,omitempty"`
	// Truncated: details were dropped to stay under MaxResultBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// Placed explains the choice of a node.
type Placed struct {
	Node string `json:"node"`
	// Unexplained says why the placement is recorded without an
	// explanation (the budget was spent); nothing below is set then.
	Unexplained string `json:"unexplained,omitempty"`
	// Scored: the cycle scored the feasible nodes. It does not when one
	// node is feasible (the only one that fits, the pod's nominated node,
	// or a node given by opportunistic batching); NotScored says which.
	Scored    bool   `json:"scored"`
	NotScored string `json:"notScored,omitempty"`
	// Feasible is how many nodes passed Filter; ScoredNodes how many the
	// cycle scored (percentageOfNodesToScore may stop it early).
	Feasible    int `json:"feasible"`
	ScoredNodes int `json:"scoredNodes,omitempty"`
	// Rank is the chosen node's place among the scored nodes by total (1 is
	// first; ties share the place); Note says why it is not 1.
	Rank int    `json:"rank,omitempty"`
	Note string `json:"note,omitempty"`
	// Top are the best-scored nodes (the chosen one always included), each
	// plugin's score weighted as the cycle summed it.
	Top []NodeScore `json:"top,omitempty"`
}

// NodeScore is one node's total and per-plugin weighted scores.
type NodeScore struct {
	Node    string           `json:"node"`
	Total   int64            `json:"total"`
	Plugins map[string]int64 `json:"plugins"`
}

// Rejection is one plugin's rejections.
type Rejection struct {
	Plugin  string        `json:"plugin"`
	Nodes   int           `json:"nodes"`
	Reasons []ReasonCount `json:"reasons"`
}

// ReasonCount is a reason and how many nodes got it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// Nearest is a node rejected for resources and what it lacks.
type Nearest struct {
	Node   string `json:"node"`
	Plugin string `json:"plugin"`
	// Short maps each resource the node lacks to the amount.
	Short map[string]string `json:"short"`
}

// rejections tallies, per plugin, the nodes it rejected and their reasons.
type rejections map[string]*tally

type tally struct {
	nodes   int
	reasons map[string]int
}

// add records one node's status (a node gets one, possibly with several
// reasons).
func (r rejections) add(plugin string, reasons []string) {
	if plugin == "" {
		plugin = "(unknown)"
	}
	t := r[plugin]
	if t == nil {
		t = &tally{reasons: map[string]int{}}
		r[plugin] = t
	}
	t.nodes++
	if len(reasons) == 0 {
		reasons = []string{"(no reason given)"}
	}
	for _, reason := range reasons {
		if len(reason) > maxReasonLen {
			reason = truncate(reason, maxReasonLen)
		}
		t.reasons[reason]++
	}
}

// list orders plugins by nodes rejected, each with its top reasons.
func (r rejections) list() []Rejection {
	out := make([]Rejection, 0, len(r))
	for plugin, t := range r {
		rc := make([]ReasonCount, 0, len(t.reasons))
		for reason, n := range t.reasons {
			rc = append(rc, ReasonCount{Reason: reason, Nodes: n})
		}
		sort.Slice(rc, func(i, j int) bool {
			if rc[i].Nodes != rc[j].Nodes {
				return rc[i].Nodes > rc[j].Nodes
			}
			return rc[i].Reason < rc[j].Reason
		})
		if len(rc) > maxReasonsPerPlugin {
			rc = rc[:maxReasonsPerPlugin]
		}
		out = append(out, Rejection{Plugin: plugin, Nodes: t.nodes, Reasons: rc})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Nodes != out[j].Nodes {
			return out[i].Nodes > out[j].Nodes
		}
		return out[i].Plugin < out[j].Plugin
	})
	return out
}

// encode marshals r, dropping detail until it fits MaxResultBytes: reasons
// beyond the first per plugin, then nearest and top nodes beyond the first,
// then all reasons' text.
func encode(r *Result) ([]byte, error) {
	shrinks := []func() bool{
		func() bool { // one reason per plugin
			changed := false
			for i := range r.Rejections {
				if len(r.Rejections[i].Reasons) > 1 {
					r.Rejections[i].Reasons, changed = r.Rejections[i].Reasons[:1], true
				}
			}
			return changed
		},
		func() bool {
			if len(r.Nearest) > 1 {
				r.Nearest = r.Nearest[:1]
				return true
			}
			if r.Placed != nil && len(r.Placed.Top) > 1 {
				r.Placed.Top = r.Placed.Top[:1]
				return true
			}
			return false
		},
		func() bool {
			if len(r.Rejections) > 10 {
				r.Rejections = r.Rejections[:10]
				return true
			}
			return false
		},
	}
	for {
		b, err := json.Marshal(r)
		if err != nil || len(b) <= MaxResultBytes {
			return b, err
		}
		shrunk := false
		for _, s := range shrinks {
			if s() {
				shrunk = true
				break
			}
		}
		if !shrunk {
			// Nothing left to drop but the text of reasons.
			for i := range r.Rejections {
				for j := range r.Rejections[i].Reasons {
					r.Rejections[i].Reasons[j].Reason = truncate(r.Rejections[i].Reasons[j].Reason, 64)
				}
			}
			r.Truncated = true
			b, err := json.Marshal(r)
			if err != nil || len(b) <= MaxResultBytes {
				return b, err
			}
			r.Rejections, r.Nearest = nil, nil
			return json.Marshal(r)
		}
		r.Truncated = true
	}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
