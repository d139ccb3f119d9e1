package celpolicy

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
)

// Variable names an expression can read.
const (
	varPod      = "pod"
	varNode     = "node"
	varNodeInfo = "nodeInfo"
)

const (
	// estimatedCostLimit bounds the cost the CEL checker estimates for one
	// expression on the largest objects the API server accepts (the limit
	// kube-apiserver puts on all the validation rules of one CRD). Estimates
	// are worst cases: a single exists() over a pod's containers is estimated
	// at ~4e7, nested loops over them at 1e12 and more.
	estimatedCostLimit uint64 = 100_000_000
	// runtimeCostLimit bounds the cost of one evaluation (about 0.1 s of CPU,
	// kube-apiserver's per-call limit); going over is a runtime error.
	runtimeCostLimit uint64 = 1_000_000
)

// celEnv is what every rule of every profile compiles against: the Kubernetes
// CEL base environment plus `pod`, `node` (typed from the API's OpenAPI
// schemas, so an unknown field is a compile error) and `nodeInfo`.
type celEnv struct {
	env       *cel.Env
	podPaths  *typedPaths
	nodePaths *typedPaths
	// roots are the declared types of the variables, for size estimates.
	roots map[string]*apiservercel.DeclType
}

var (
	envOnce   sync.Once
	sharedEnv *celEnv
	envErr    error
)

// getEnv builds the environment once per process: resolving the OpenAPI
// schemas of Pod and Node is the expensive part of compiling.
func getEnv() (*celEnv, error) {
	envOnce.Do(func() { sharedEnv, envErr = newEnv() })
	return sharedEnv, envErr
}

// nodeInfoDeclType describes the `nodeInfo` variable: what the scheduler knows
// of a node beyond its object.
func nodeInfoDeclType() *apiservercel.DeclType {
	quantities := apiservercel.NewMapType(apiservercel.StringType, apiservercel.QuantityDeclType, -1)
	fields := map[string]*apiservercel.DeclField{}
	for _, f := range []*apiservercel.DeclField{
		apiservercel.NewDeclField("allocatable", quantities, true, nil, nil),
		apiservercel.NewDeclField("requested", quantities, true, nil, nil),
		apiservercel.NewDeclField("free", quantities, true, nil, nil),
		apiservercel.NewDeclField("podCount", apiservercel.IntType, true, nil, nil),
	} {
		fields[f.Name] = f
	}
	return apiservercel.NewObjectType("berth.NodeInfo", fields)
}

func newEnv() (*celEnv, error) {
	res := resolver.NewDefinitionsSchemaResolver(generatedopenapi.GetOpenAPIDefinitions, clientgoscheme.Scheme)
	schemaOf := func(kind string) (*spec.Schema, *apiservercel.DeclType, error) {
		s, err := res.ResolveSchema(v1.SchemeGroupVersion.WithKind(kind))
		if err != nil {
			return nil, nil, fmt.Errorf("resolving the OpenAPI schema of %s: %w", kind, err)
		}
		typeQuantities(s)
		dt := common.SchemaDeclType(&openapi.Schema{Schema: s}, true)
		if dt == nil {
			return nil, nil, fmt.Errorf("no CEL type for %s", kind)
		}
		return s, dt.MaybeAssignTypeName("io.k8s.api.core.v1." + kind), nil
	}
	podSchema, podType, err := schemaOf("Pod")
	if err != nil {
		return nil, err
	}
	nodeSchema, nodeType, err := schemaOf("Node")
	if err != nil {
		return nil, err
	}
	infoType := nodeInfoDeclType()

	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	set, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(varPod, podType.CelType()),
			cel.Variable(varNode, nodeType.CelType()),
			cel.Variable(varNodeInfo, infoType.CelType()),
		},
		DeclTypes: []*apiservercel.DeclType{podType, nodeType, infoType},
	})
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	env, err := set.Env(environment.StoredExpressions)
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	return &celEnv{
		env:       env,
		podPaths:  newTypedPaths(podSchema, 0),
		nodePaths: newTypedPaths(nodeSchema, 0),
		roots:     map[string]*apiservercel.DeclType{varPod: podType, varNode: nodeType, varNodeInfo: infoType},
	}, nil
}

// typeQuantities gives a type to schemas that only list alternatives, which
// CEL's schema conversion would otherwise drop with the field that holds
// them. In Pod and Node these are resource.Quantity values (oneOf string,
// number): they become strings, as the API serves them and as
// ValidatingAdmissionPolicy expressions see them, so rules write
// quantity(pod.spec.containers[0].resources.requests['cpu']).
func typeQuantities(s *spec.Schema) {
	if s == nil {
		return
	}
	if len(s.Type) == 0 && len(s.OneOf) > 0 {
		for _, alt := range s.OneOf {
			if alt.Type.Contains("string") {
				s.Type = spec.StringOrArray{"string"}
				s.OneOf = nil
				break
			}
		}
	}
	for k, p := range s.Properties {
		typeQuantities(&p)
		s.Properties[k] = p
	}
	if s.AdditionalProperties != nil {
		typeQuantities(s.AdditionalProperties.Schema)
	}
	if s.Items != nil {
		typeQuantities(s.Items.Schema)
		for i := range s.Items.Schemas {
			typeQuantities(&s.Items.Schemas[i])
		}
	}
	for i := range s.AllOf {
		typeQuantities(&s.AllOf[i])
	}
}

// podVal and nodeVal expose API objects to CEL with the API's field names,
// as plain maps (see typedPaths), holding the fields proj says the
// expressions can read.
func (e *celEnv) podVal(pod *v1.Pod, proj *projection) (ref.Val, error) {
	return e.objectVal("pod", proj.apply(pod), e.podPaths)
}

func (e *celEnv) nodeVal(node *v1.Node, proj *projection) (ref.Val, error) {
	return e.objectVal("node", proj.apply(node), e.nodePaths)
}

// objectVal converts obj (a projected copy of a kind object: its Go type
// is made for the projection, so errors name the kind).
func (e *celEnv) objectVal(kind string, obj any, paths *typedPaths) (ref.Val, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting the %s for CEL: %w", kind, err)
	}
	adapter := e.env.CELTypeAdapter()
	return adapter.NativeToValue(prewrap(adapter, paths.apply(u))), nil
}

// expr is one compiled expression and the variables it reads.
type expr struct {
	prg cel.Program
	// pod, node, nodeInfo: the expression reads that variable (booleans,
	// not a map: Filter and Score ask for every node).
	pod, node, nodeInfo bool
	checked             *ast.AST
}

func (x *expr) readsPod() bool      { return x != nil && x.pod }
func (x *expr) readsNode() bool     { return x != nil && x.node }
func (x *expr) readsNodeInfo() bool { return x != nil && x.nodeInfo }

type resultKind int

const (
	resultBool resultKind = iota
	resultNumber
)

// compileExpr compiles and type-checks one expression. Errors name the field
// (rules[i].filter) and, from the CEL checker, the line and column.
func (e *celEnv) compileExpr(path *field.Path, text string, want resultKind, allowed ...string) (*expr, *field.Error) {
	checked, iss := e.env.Compile(text)
	if iss.Err() != nil {
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("line %d, column %d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
		}
		return nil, field.Invalid(path, text, "compiling: "+strings.Join(msgs, "; "))
	}
	out := checked.OutputType()
	switch want {
	case resultBool:
		if !out.IsExactType(cel.BoolType) {
			return nil, field.Invalid(path, text, fmt.Sprintf("must evaluate to bool, got %s", out))
		}
	case resultNumber:
		if !out.IsExactType(cel.IntType) && !out.IsExactType(cel.DoubleType) && !out.IsExactType(cel.UintType) {
			return nil, field.Invalid(path, text, fmt.Sprintf("must evaluate to int or double, got %s", out))
		}
	}
	reads := referencedVariables(checked.NativeRep())
	for v := range reads {
		ok := false
		for _, a := range allowed {
			ok = ok || a == v
		}
		if !ok {
			return nil, field.Invalid(path, text, fmt.Sprintf("may only read %s, reads %q", strings.Join(allowed, ", "), v))
		}
	}
	cost, err := e.env.EstimateCost(checked, &library.CostEstimator{SizeEstimator: &sizeEstimator{roots: e.roots}})
	if err != nil {
		return nil, field.Invalid(path, text, "estimating cost: "+err.Error())
	}
	if cost.Max > estimatedCostLimit {
		return nil, field.Invalid(path, text, fmt.Sprintf("estimated cost %d exceeds the limit %d; bound list sizes or simplify the expression", cost.Max, estimatedCostLimit))
	}
	// Tracking cost at run time wraps every step of the evaluation (it made a
	// two-label comparison ten times slower); an expression whose worst case
	// is already within the runtime limit needs no tracking.
	var opts []cel.ProgramOption
	if cost.Max > runtimeCostLimit {
		opts = append(opts, cel.CostLimit(runtimeCostLimit), cel.InterruptCheckFrequency(100))
	}
	prg, err := e.env.Program(checked, opts...)
	if err != nil {
		return nil, field.InternalError(path, fmt.Errorf("building program: %w", err))
	}
	return &expr{prg: prg, pod: reads[varPod], node: reads[varNode], nodeInfo: reads[varNodeInfo], checked: checked.NativeRep()}, nil
}

// sizeEstimator bounds the size of lists and maps in an expression from the
// declared types (derived from the OpenAPI schemas and the largest request the
// API server accepts), as kube-apiserver does for CRD validation rules.
type sizeEstimator struct {
	roots map[string]*apiservercel.DeclType
}

func (s *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	// Every value an expression reads comes from a pod or a node, which the
	// API server accepted in one request: nothing in it is larger than that.
	unknown := &checker.SizeEstimate{Min: 0, Max: uint64(celconfig.MaxRequestSizeBytes)}
	path := element.Path()
	if len(path) == 0 {
		return unknown
	}
	cur, ok := s.roots[path[0]]
	if !ok {
		return unknown
	}
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			cur = cur.ElemType
		case "@keys":
			cur = cur.KeyType
		default:
			f, ok := cur.Fields[name]
			if !ok {
				return unknown
			}
			cur = f.Type
		}
		if cur == nil {
			return unknown
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(cur.MaxElements)}
}

func (s *sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// referencedVariables lists the top-level variables a checked expression reads.
func referencedVariables(a *ast.AST) map[string]bool {
	reads := map[string]bool{}
	for _, r := range a.ReferenceMap() {
		switch r.Name {
		case varPod, varNode, varNodeInfo:
			reads[r.Name] = true
		}
	}
	return reads
}

// projections are what the rules' expressions can read of the pod and of the node.
func projections(rules []*compiledRule) (pod, node *projection) {
	pod, node = newProjection(), newProjection()
	for _, r := range rules {
		for _, x := range []*expr{r.match, r.filter, r.score} {
			if x != nil {
				pod.addExpr(x.checked, varPod)
				node.addExpr(x.checked, varNode)
			}
		}
	}
	pod.compile(reflect.TypeFor[*v1.Pod]())
	node.compile(reflect.TypeFor[*v1.Node]())
	return pod, node
}

// compiledRule is a rule ready to run; reasons are built once here so that
// Filter never formats a string.
type compiledRule struct {
	name          string
	match         *expr
	filter        *expr
	score         *expr
	weight        int64
	ignoreErrors  bool
	rejectReason  string
	errorReason   string
	filterCodeRes bool // filter reads nodeInfo: preemption may help
	// query is the filter as a label query, when it reads only node labels.
	query *labelQuery
}

// compileRules compiles every rule; all errors are returned together.
func compileRules(e *celEnv, path *field.Path, args *config.CELPolicyArgs) ([]*compiledRule, field.ErrorList) {
	var errs field.ErrorList
	rules := make([]*compiledRule, 0, len(args.Rules))
	for i, r := range args.Rules {
		p := validation.CELPolicyRulePath(path, i, r.Name)
		cr := &compiledRule{
			name:         r.Name,
			weight:       int64(r.Weight),
			ignoreErrors: r.FailurePolicy == config.CELFailurePolicyIgnore,
			rejectReason: r.Message,
			errorReason:  fmt.Sprintf("CELPolicy rule %q could not be evaluated", r.Name),
		}
		if cr.rejectReason == "" {
			cr.rejectReason = fmt.Sprintf("node(s) rejected by CELPolicy rule %q", r.Name)
		}
		var ferr *field.Error
		if r.Match != "" {
			if cr.match, ferr = e.compileExpr(p.Child("match"), r.Match, resultBool, varPod); ferr != nil {
				errs = append(errs, ferr)
			}
		}
		if r.Filter != "" {
			if cr.filter, ferr = e.compileExpr(p.Child("filter"), r.Filter, resultBool, varPod, varNode, varNodeInfo); ferr != nil {
				errs = append(errs, ferr)
			}
			cr.filterCodeRes = cr.filter.readsNodeInfo()
		}
		if r.Score != "" {
			if cr.score, ferr = e.compileExpr(p.Child("score"), r.Score, resultNumber, varPod, varNode, varNodeInfo); ferr != nil {
				errs = append(errs, ferr)
			}
		}
		rules = append(rules, cr)
	}
	return rules, errs
}
