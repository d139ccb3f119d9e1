package celpolicy

import (
	"reflect"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// projection is the part of an API object that the compiled expressions can
// read: which top-level fields (metadata, spec, status, ...) and, under
// each, which of their fields. Converting a pod for CEL was most of
// PreFilter's cost (toUnstructured of the whole object, status and all, per
// pod); a projected copy holds only what a rule can reach, so the rest is
// never converted. Expressions are type-checked, so every name is a field of
// the API type; anything the walk cannot follow (the variable passed whole,
// a field selected dynamically) makes the projection the whole object.
type projection struct {
	whole bool
	// fields: top-level JSON name -> second-level JSON names (nil: all of it).
	fields map[string]map[string]bool
	plan   []projectedField
}

// projectedField copies one top-level struct field, whole (sub nil) or only
// the listed fields of it.
type projectedField struct {
	index []int // reflect index path in the object's struct
	sub   [][]int
}

func newProjection() *projection {
	return &projection{fields: map[string]map[string]bool{}}
}

// addExpr adds what the checked expression reads of variable.
func (p *projection) addExpr(a *ast.AST, variable string) {
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.IdentKind)) {
		if e.AsIdent() != variable {
			continue
		}
		path := selectedPath(e, 2)
		if len(path) == 0 {
			p.whole = true
			return
		}
		sub, seen := p.fields[path[0]]
		switch {
		case len(path) == 1:
			p.fields[path[0]] = nil // the whole top-level field
		case seen && sub == nil:
			// already whole
		default:
			if sub == nil {
				sub = map[string]bool{}
				p.fields[path[0]] = sub
			}
			sub[path[1]] = true
		}
	}
}

// selectedPath follows e's parents while they select a field of it (x.f or
// x.?f), up to depth fields.
func selectedPath(e ast.NavigableExpr, depth int) []string {
	var path []string
	for len(path) < depth {
		parent, ok := e.Parent()
		if !ok {
			break
		}
		name, ok := selectedField(parent, e)
		if !ok {
			break
		}
		path = append(path, name)
		e = parent
	}
	return path
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

// compile resolves the JSON names against the object's Go type (a pointer
// to a struct); a name it cannot find makes the projection whole.
func (p *projection) compile(t reflect.Type) {
	if p.whole {
		return
	}
	t = t.Elem()
	for top, subs := range p.fields {
		idx, ft, ok := jsonField(t, top)
		if !ok {
			p.whole = true
			return
		}
		f := projectedField{index: idx}
		if subs != nil && ft.Kind() == reflect.Struct {
			for name := range subs {
				si, _, ok := jsonField(ft, name)
				if !ok {
					p.whole = true
					return
				}
				f.sub = append(f.sub, si)
			}
		}
		p.plan = append(p.plan, f)
	}
}

// jsonField finds the field serialized as name, looking into inline
// (embedded) structs such as TypeMeta.
func jsonField(t reflect.Type, name string) ([]int, reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" && (f.Anonymous || strings.Contains(opts, "inline")) && f.Type.Kind() == reflect.Struct {
			if idx, ft, ok := jsonField(f.Type, name); ok {
				return append([]int{i}, idx...), ft, true
			}
			continue
		}
		if tag == name {
			return []int{i}, f.Type, true
		}
	}
	return nil, nil, false
}

// apply returns obj itself when the projection is whole, else a new object
// of its type holding only the projected fields (shallow copies: the
// conversion only reads them).
func (p *projection) apply(obj any) any {
	if p.whole {
		return obj
	}
	src := reflect.ValueOf(obj).Elem()
	dst := reflect.New(src.Type())
	d := dst.Elem()
	for _, f := range p.plan {
		from, to := src.FieldByIndex(f.index), d.FieldByIndex(f.index)
		if f.sub == nil {
			to.Set(from)
			continue
		}
		for _, si := range f.sub {
			to.FieldByIndex(si).Set(from.FieldByIndex(si))
		}
	}
	return dst.Interface()
}
