package celpolicy

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	smdvalue "sigs.k8s.io/structured-merge-diff/v6/value"
)

// projection is the part of an API object that the compiled expressions can
// read, as a tree of field paths: metadata.labels, spec.containers[] and,
// under a list, what is read of its elements (spec.containers[].resources.
// requests, followed through indexing and through the variable of
// exists/all/map/filter). Converting a pod for CEL was most of PreFilter's
// cost (toUnstructured of the whole object, status and all, per pod); a
// projected copy holds only what a rule can reach, so the rest is never
// converted. Expressions are type-checked, so every name is a field of the
// API type; anything the walk cannot follow (a value used other than by
// selecting its fields or iterating it, a field selected dynamically)
// makes that value whole, and a name the Go type does not have makes the
// whole object the projection.
type projection struct {
	root *readNode
	// plan copies root's fields; nil: the object whole.
	plan *copyPlan
}

// whole reports whether the projection is the object itself.
func (p *projection) whole() bool { return p.plan == nil }

// readNode is what is read of one value: all of it, or some of its fields,
// or (for a list) some of its elements' fields.
type readNode struct {
	all    bool
	fields map[string]*readNode // JSON name -> what is read of the field
	elem   *readNode            // what is read of an element (list[i], a comprehension's variable)
}

// elemStep is the path step into an element.
const elemStep = "[]"

func newProjection() *projection { return &projection{root: &readNode{}} }

// wholeProjection is the projection that converts objects whole.
func wholeProjection() *projection { return &projection{root: &readNode{all: true}} }

// add records that path (of field names and elemStep) is read whole.
func (n *readNode) add(path []string) {
	for _, step := range path {
		if n.all {
			return
		}
		if step == elemStep {
			if n.elem == nil {
				n.elem = &readNode{}
			}
			n = n.elem
			continue
		}
		if n.fields == nil {
			n.fields = map[string]*readNode{}
		}
		c := n.fields[step]
		if c == nil {
			c = &readNode{}
			n.fields[step] = c
		}
		n = c
	}
	n.all, n.fields, n.elem = true, nil, nil
}

// paths lists the read paths, sorted (tests and logs).
func (n *readNode) paths() []string {
	var out []string
	var walk func(n *readNode, prefix string)
	walk = func(n *readNode, prefix string) {
		if n.all {
			out = append(out, prefix)
			return
		}
		for name, c := range n.fields {
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			walk(c, p)
		}
		if n.elem != nil {
			walk(n.elem, prefix+elemStep)
		}
	}
	walk(n, "")
	sort.Strings(out)
	return out
}

// addExpr adds what the checked expression reads of variable.
func (p *projection) addExpr(a *ast.AST, variable string) {
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.IdentKind)) {
		if e.AsIdent() == variable {
			readsOf(e, nil, p.root.add)
		}
	}
}

// readsOf calls add with each path (below prefix) that the expressions
// around e read of e's value: e's parents while they select a field of it
// (x.f, x.?f) or index it (x[i], x[?i]); then, where the value is a
// one-variable comprehension's range, what the comprehension reads of its
// variable, as an element. A path ends where the value is used otherwise.
func readsOf(e ast.NavigableExpr, prefix []string, add func([]string)) {
	path := append([]string(nil), prefix...)
	for {
		parent, ok := e.Parent()
		if !ok {
			break
		}
		if name, ok := selectedField(parent, e); ok {
			path = append(path, name)
			e = parent
			continue
		}
		if indexed(parent, e) {
			path = append(path, elemStep)
			e = parent
			continue
		}
		if uses, ok := iterationUses(parent, e); ok {
			path = append(path, elemStep)
			if len(uses) == 0 {
				add(path) // no element is read: whole, for the list's length
			}
			for _, u := range uses {
				readsOf(u, path, add)
			}
			return
		}
		break
	}
	add(path)
}

// selectedField is the field parent selects of operand, if it is a selection.
func selectedField(parent, operand ast.NavigableExpr) (string, bool) {
	switch parent.Kind() {
	case ast.SelectKind:
		s := parent.AsSelect()
		return s.FieldName(), s.Operand().ID() == operand.ID()
	case ast.CallKind:
		c := parent.AsCall()
		if c.FunctionName() != operators.OptSelect || len(c.Args()) != 2 || c.Args()[0].ID() != operand.ID() {
			return "", false
		}
		if lit := c.Args()[1]; lit.Kind() == ast.LiteralKind {
			if s, ok := lit.AsLiteral().(types.String); ok {
				return string(s), true
			}
		}
	}
	return "", false
}

// indexed reports whether parent is operand[i] or operand[?i].
func indexed(parent, operand ast.NavigableExpr) bool {
	if parent.Kind() != ast.CallKind {
		return false
	}
	c := parent.AsCall()
	return (c.FunctionName() == operators.Index || c.FunctionName() == operators.OptIndex) &&
		len(c.Args()) == 2 && c.Args()[0].ID() == operand.ID()
}

// iterationUses returns the uses of the iteration variable of comp, when
// comp is a one-variable comprehension (exists, all, exists_one, map,
// filter) over operand: the variable's identifiers in its loop, except
// where a nested comprehension declares the same name. A two-variable
// comprehension is not followed (false).
func iterationUses(comp, operand ast.NavigableExpr) ([]ast.NavigableExpr, bool) {
	if comp.Kind() != ast.ComprehensionKind {
		return nil, false
	}
	c := comp.AsComprehension()
	if c.IterRange().ID() != operand.ID() || c.HasIterVar2() {
		return nil, false
	}
	name := c.IterVar()
	var uses []ast.NavigableExpr
	for _, id := range ast.MatchDescendants(comp, ast.KindMatcher(ast.IdentKind)) {
		if id.AsIdent() == name && boundBy(id, comp, name) {
			uses = append(uses, id)
		}
	}
	return uses, true
}

// boundBy reports whether the identifier id (named name) refers to comp's
// iteration variable: it is in comp's loop condition or step (the variable's
// scope: not the range, the accumulator's initial value or the result), and
// no comprehension between them declares name where id is (an iteration
// variable in its loop, the accumulator also in its result).
func boundBy(id, comp ast.NavigableExpr, name string) bool {
	child := id
	for {
		parent, ok := child.Parent()
		if !ok {
			return false
		}
		if parent.Kind() == ast.ComprehensionKind {
			c := parent.AsComprehension()
			inLoop := child.ID() == c.LoopCondition().ID() || child.ID() == c.LoopStep().ID()
			if parent.ID() == comp.ID() {
				return inLoop
			}
			if inLoop && (c.IterVar() == name || c.IterVar2() == name) ||
				(inLoop || child.ID() == c.Result().ID()) && c.AccuVar() == name {
				return false
			}
		}
		child = parent
	}
}

// compile resolves the JSON names against the object's Go type (a pointer
// to a struct); a name it cannot find makes the projection whole.
func (p *projection) compile(t reflect.Type) {
	if p.root.all {
		p.plan = nil
		return
	}
	plan, ok := planFor(p.root, t)
	if !ok || plan == nil {
		p.plan = nil
		return
	}
	p.plan = plan
}

// copyPlan copies what a readNode reads of a value of one Go type into a
// value of a type made for it (reflect.StructOf): the same JSON names and
// tags, only the fields read. ToUnstructured sizes a struct's map by its
// number of fields (a map of 40 for a PodSpec of which a rule reads one);
// the made types make every map as small as what it holds. A field read
// whole keeps its own type, so it converts exactly as it does in the
// object (a Quantity, a Time, a ResourceList).
type copyPlan struct {
	kind   reflect.Kind
	out    reflect.Type // the made type
	fields []copyField  // struct: the fields to copy, in the made type's order
	elem   *copyPlan    // pointer: the pointee; slice: each element
}

// copyField copies one field, whole (sub nil) or by its own plan.
type copyField struct {
	index []int // reflect index path in the source struct
	sub   *copyPlan
}

// planFor is the plan copying what n reads of a value of type t: nil when
// it is the whole value; false when a field name is not t's. A type with
// its own conversion to unstructured (or JSON), and a field tagged
// omitzero (a partial copy could be zero where the object's is not), are
// read whole.
func planFor(n *readNode, t reflect.Type) (*copyPlan, bool) {
	if n.all || smdvalue.TypeReflectEntryOf(t).CanConvertToUnstructured() {
		return nil, true
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct {
			return nil, true
		}
		sub, ok := planFor(n, t.Elem())
		if !ok || sub == nil {
			return nil, ok
		}
		return &copyPlan{kind: reflect.Pointer, out: reflect.PointerTo(sub.out), elem: sub}, true
	case reflect.Struct:
		if n.elem != nil {
			return nil, true // indexed as a list: not this type (whole, to be safe)
		}
		names := make([]string, 0, len(n.fields))
		for name := range n.fields {
			names = append(names, name)
		}
		sort.Strings(names)
		p := &copyPlan{kind: reflect.Struct}
		var made []reflect.StructField
		for i, name := range names {
			idx, f, ok := jsonField(t, name)
			if !ok {
				return nil, false
			}
			sub, ok := planFor(n.fields[name], f.Type)
			if !ok {
				return nil, false
			}
			if sub != nil && omitsZero(f) {
				sub = nil
			}
			ft := f.Type
			if sub != nil {
				ft = sub.out
			}
			p.fields = append(p.fields, copyField{index: idx, sub: sub})
			made = append(made, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: ft, Tag: f.Tag})
		}
		p.out = reflect.StructOf(made)
		return p, true
	case reflect.Slice:
		if n.elem == nil || len(n.fields) != 0 {
			return nil, true
		}
		sub, ok := planFor(n.elem, t.Elem())
		if !ok || sub == nil {
			return nil, ok
		}
		return &copyPlan{kind: reflect.Slice, out: reflect.SliceOf(sub.out), elem: sub}, true
	default:
		// Maps (labels, resource lists), strings, numbers: whole.
		return nil, true
	}
}

// jsonField finds the field runtime.DefaultUnstructuredConverter serializes
// as name and a made field can copy: a field's tag name, and the fields of
// an embedded struct without a tag name (TypeMeta's `json:",inline"`),
// flattened into their parent. Every other way the converter may serialize
// a name makes it not found, and the object is then read whole, which is
// always right: a field without a tag name (the converter names it by its
// Go name, whatever the tag's options; the made field, named F0, F1, ...,
// would not be), a name two fields give (the converter keeps the last one
// it writes), an unexported field (reflection cannot copy from it; the
// exported fields of an unexported embedded struct it can), and an
// embedded struct tagged omitzero (the converter omits it when zero,
// flattened fields and all) or an embedded non-struct (flattened, and not
// followed here), when the name may be in it.
func jsonField(t reflect.Type, name string) ([]int, reflect.StructField, bool) {
	idx, f, n := jsonFields(t, name)
	return idx, f, n == 1
}

// jsonFields returns the field serialized as name and the number of
// fields that are: 0 none, 1 the field, more when the name is ambiguous or
// cannot be projected (see jsonField).
func jsonFields(t reflect.Type, name string) ([]int, reflect.StructField, int) {
	const cannot = 2
	var (
		idx   []int
		found reflect.StructField
		n     int
	)
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case tag == "" && f.Anonymous:
			if f.Type.Kind() != reflect.Struct {
				return nil, reflect.StructField{}, cannot
			}
			sub, sf, m := jsonFields(f.Type, name)
			if m > 0 && omitsZero(f) {
				return nil, reflect.StructField{}, cannot
			}
			if m > 0 {
				idx, found, n = append([]int{i}, sub...), sf, n+m
			}
		case tag == "" && f.Name == name, tag == name && !f.IsExported():
			return nil, reflect.StructField{}, cannot
		case tag == name:
			idx, found, n = []int{i}, f, n+1
		}
	}
	return idx, found, n
}

// omitsZero reports whether f's JSON tag has the omitzero option, which
// the converter honours: a zero value is left out.
func omitsZero(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return slices.Contains(strings.Split(opts, ","), "omitzero")
}

// apply returns obj itself when the projection is whole, else a new object
// of the plan's made type holding only the projected fields (shallow copies
// of what is read whole: the conversion only reads them).
func (p *projection) apply(obj any) any {
	if p.plan == nil {
		return obj
	}
	dst := reflect.New(p.plan.out).Elem()
	p.plan.copy(dst, reflect.ValueOf(obj))
	return dst.Interface()
}

// copy sets dst (settable, of the plan's made type, zero) to the projected
// copy of src. A nil pointer or slice stays nil, an empty slice empty: the
// conversion tells them apart as the API's JSON does.
func (c *copyPlan) copy(dst, src reflect.Value) {
	switch c.kind {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		v := reflect.New(c.out.Elem())
		c.elem.copy(v.Elem(), src.Elem())
		dst.Set(v)
	case reflect.Struct:
		for i, f := range c.fields {
			from, to := src.FieldByIndex(f.index), dst.Field(i)
			if f.sub == nil {
				to.Set(from)
			} else {
				f.sub.copy(to, from)
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		n := src.Len()
		v := reflect.MakeSlice(c.out, n, n)
		for i := range n {
			c.elem.copy(v.Index(i), src.Index(i))
		}
		dst.Set(v)
	}
}
