package celpolicy

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

// labelTerm is one label condition a filter requires of a node: the label
// is present (values nil) or has one of values.
type labelTerm struct {
	key    string
	values []string
}

// labelQuery is what can be answered from node labels alone of a filter
// that reads nothing but node.metadata.labels: the conjunction of terms.
// A node outside the query's nodes fails the filter; exact says the filter
// is nothing more than the query (otherwise Filter still decides among the
// nodes the query returns, as it does anyway).
type labelQuery struct {
	terms []labelTerm
	exact bool
	id    string // identifies the query in the index's result cache
}

// labelQueryOf detects, from the checked expression's AST, a filter whose
// outcome for a node is decided by that node's labels through the forms
//
//	'k' in node.metadata.labels
//	node.metadata.labels.?k.orValue(d) == 'v'   (also [?'k'], node.metadata.?labels, 'v' == ...)
//	node.metadata.labels.?k.orValue(d) in ['v1', 'v2']
//	a && b
//
// where the default d is none of the values. Parts of a conjunction that are
// something else (a negation, another field) only make the query inexact.
// None of these forms can fail at run time on a node, so the filter's
// failure policy does not matter. nil: nothing to index.
func labelQueryOf(x *expr) *labelQuery {
	if x == nil || x.readsPod() || x.readsNodeInfo() || !x.readsNode() {
		return nil
	}
	q := &labelQuery{exact: true}
	collectTerms(ast.NavigateAST(x.checked), q)
	if len(q.terms) == 0 {
		return nil
	}
	parts := make([]string, 0, len(q.terms))
	for _, t := range q.terms {
		parts = append(parts, t.key+"\x00"+strings.Join(t.values, "\x00"))
	}
	slices.Sort(parts)
	q.id = strings.Join(parts, "\x01")
	return q
}

func collectTerms(e ast.NavigableExpr, q *labelQuery) {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		for _, a := range e.Children() {
			collectTerms(a, q)
		}
		return
	}
	if t, ok := termOf(e); ok {
		q.terms = append(q.terms, t)
		return
	}
	q.exact = false
}

// termOf recognises one label condition.
func termOf(e ast.NavigableExpr) (labelTerm, bool) {
	if e.Kind() != ast.CallKind {
		return labelTerm{}, false
	}
	c := e.AsCall()
	args := e.Children()
	switch {
	case c.FunctionName() == operators.In && len(args) == 2:
		if k, ok := stringLit(args[0]); ok && isLabels(args[1], false) {
			return labelTerm{key: k}, true
		}
		if k, def, ok := labelValue(args[0]); ok {
			if vs, ok := stringList(args[1]); ok && len(vs) > 0 && !slices.Contains(vs, def) {
				return labelTerm{key: k, values: vs}, true
			}
		}
	case c.FunctionName() == operators.Equals && len(args) == 2:
		for _, ord := range [][2]ast.NavigableExpr{{args[0], args[1]}, {args[1], args[0]}} {
			if k, def, ok := labelValue(ord[0]); ok {
				if v, ok := stringLit(ord[1]); ok && v != def {
					return labelTerm{key: k, values: []string{v}}, true
				}
			}
		}
	}
	return labelTerm{}, false
}

// labelValue recognises L.?k.orValue(d) and L[?'k'].orValue(d) for the node's labels L.
func labelValue(e ast.NavigableExpr) (key, def string, ok bool) {
	if e.Kind() != ast.CallKind {
		return "", "", false
	}
	c := e.AsCall()
	args := e.Children()
	if c.FunctionName() != "orValue" || !c.IsMemberFunction() || len(args) != 2 {
		return "", "", false
	}
	if def, ok = stringLit(args[1]); !ok {
		return "", "", false
	}
	opt := args[0]
	if opt.Kind() != ast.CallKind {
		return "", "", false
	}
	oc := opt.AsCall()
	oargs := opt.Children()
	if (oc.FunctionName() != operators.OptSelect && oc.FunctionName() != operators.OptIndex) || len(oargs) != 2 {
		return "", "", false
	}
	if key, ok = stringLit(oargs[1]); !ok || !isLabels(oargs[0], true) {
		return "", "", false
	}
	return key, def, true
}

// isLabels recognises node.metadata.labels, and with optional also the
// optional forms node.?metadata / metadata.?labels.
func isLabels(e ast.NavigableExpr, optional bool) bool {
	meta, ok := fieldOf(e, "labels", optional)
	if !ok {
		return false
	}
	root, ok := fieldOf(meta, "metadata", optional)
	return ok && root.Kind() == ast.IdentKind && root.AsIdent() == varNode
}

// fieldOf returns x for x.name (or x.?name when optional is allowed).
func fieldOf(e ast.NavigableExpr, name string, optional bool) (ast.NavigableExpr, bool) {
	switch e.Kind() {
	case ast.SelectKind:
		s := e.AsSelect()
		if s.FieldName() == name && !s.IsTestOnly() {
			return e.Children()[0], true
		}
	case ast.CallKind:
		args := e.Children()
		if optional && e.AsCall().FunctionName() == operators.OptSelect && len(args) == 2 {
			if f, ok := stringLit(args[1]); ok && f == name {
				return args[0], true
			}
		}
	}
	return nil, false
}

func stringLit(e ast.NavigableExpr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

func stringList(e ast.NavigableExpr) ([]string, bool) {
	if e.Kind() != ast.ListKind {
		return nil, false
	}
	var vs []string
	for _, el := range e.Children() {
		s, ok := stringLit(el)
		if !ok {
			return nil, false
		}
		vs = append(vs, s)
	}
	return vs, true
}

// labelIndex maps the labels the queries read to the nodes that carry
// them. It is built from the cycle's own snapshot, never from informer
// events (which reach the scheduler's cache and this plugin in no fixed
// order, so an index fed by them could be older or newer than the snapshot
// a cycle filters): PreFilter passes the snapshot's node list, and the
// index re-reads the labels of the nodes whose Node object changed since
// the last cycle — a pointer comparison per node while the list is the
// same, a pass over the list when nodes were added or removed (the
// snapshot then builds a new list).
type labelIndex struct {
	keys sets.Set[string] // the label keys the queries read; only these are indexed

	mu sync.Mutex
	// list is the snapshot's node list last seen, seen the Node object at
	// each of its positions when it was indexed.
	list []fwk.NodeInfo
	seen []*v1.Node
	// labels: node name -> its indexed labels.
	labels map[string]map[string]string
	// byLabel: key -> value -> node names.
	byLabel map[string]map[string]sets.Set[string]
	version uint64
	results map[string]indexResult
}

type indexResult struct {
	version uint64
	nodes   sets.Set[string]
}

func newLabelIndex(queries []*labelQuery) *labelIndex {
	keys := sets.New[string]()
	for _, q := range queries {
		for _, t := range q.terms {
			keys.Insert(t.key)
		}
	}
	return &labelIndex{keys: keys, labels: map[string]map[string]string{}, byLabel: map[string]map[string]sets.Set[string]{}, results: map[string]indexResult{}}
}

// candidates returns the nodes of the snapshot list nodes that can pass
// every query. The set is shared between cycles: callers must not modify it
// (the framework copies a PreFilterResult's names).
func (ix *labelIndex) candidates(nodes []fwk.NodeInfo, queries []*labelQuery) sets.Set[string] {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.syncLocked(nodes)
	var out sets.Set[string]
	for _, q := range queries {
		if m := ix.queryLocked(q); out == nil {
			out = m
		} else {
			out = out.Intersection(m)
		}
	}
	return out
}

// syncLocked brings the index to the snapshot's list.
func (ix *labelIndex) syncLocked(nodes []fwk.NodeInfo) {
	if len(nodes) == len(ix.list) && (len(nodes) == 0 || &nodes[0] == &ix.list[0]) {
		for i, ni := range nodes {
			if n := ni.Node(); n != ix.seen[i] && n != nil {
				ix.seen[i] = n
				ix.setLocked(n.Name, ix.indexed(n))
			}
		}
		return
	}
	present := make(map[string]bool, len(nodes))
	ix.list, ix.seen = nodes, make([]*v1.Node, len(nodes))
	for i, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		ix.seen[i] = n
		present[n.Name] = true
		ix.setLocked(n.Name, ix.indexed(n))
	}
	for name := range ix.labels {
		if !present[name] {
			ix.setLocked(name, nil)
		}
	}
}

// indexed is the part of node's labels the index keeps.
func (ix *labelIndex) indexed(node *v1.Node) map[string]string {
	out := make(map[string]string, len(ix.keys))
	for k := range ix.keys {
		if v, ok := node.Labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// setLocked records a node's indexed labels (nil: the node is gone).
func (ix *labelIndex) setLocked(name string, labels map[string]string) {
	old, had := ix.labels[name]
	if had == (labels != nil) && maps.Equal(old, labels) {
		return // a change the index does not see (status, other labels)
	}
	for k, v := range old {
		ix.byLabel[k][v].Delete(name)
	}
	if labels == nil {
		delete(ix.labels, name)
	} else {
		ix.labels[name] = labels
		for k, v := range labels {
			if ix.byLabel[k] == nil {
				ix.byLabel[k] = map[string]sets.Set[string]{}
			}
			if ix.byLabel[k][v] == nil {
				ix.byLabel[k][v] = sets.New[string]()
			}
			ix.byLabel[k][v].Insert(name)
		}
	}
	ix.version++
}

// queryLocked returns the nodes matching every term of q, cached until the
// index changes.
func (ix *labelIndex) queryLocked(q *labelQuery) sets.Set[string] {
	if r, ok := ix.results[q.id]; ok && r.version == ix.version {
		return r.nodes
	}
	var out sets.Set[string]
	for _, t := range q.terms {
		m := sets.New[string]()
		byValue := ix.byLabel[t.key]
		if t.values == nil {
			for _, names := range byValue {
				m = m.Union(names)
			}
		} else {
			for _, v := range t.values {
				m = m.Union(byValue[v])
			}
		}
		if out == nil {
			out = m
		} else {
			out = out.Intersection(m)
		}
	}
	ix.results[q.id] = indexResult{version: ix.version, nodes: out}
	return out
}
