// Package cond compiles and evaluates the CEL conditions of policy rules
// (the optional when: of a rule in policy.rules). Package policy checks
// every condition when the config loads (policy.CheckConfig), so that
// syntax and type errors are config problems, and compiles and evaluates
// them; auth keeps a principal's claims prepared for them (NewClaims).
//
// A condition is a CEL expression (https://cel.dev) of type bool over:
//
//	principal  the caller: subject, issuer, client_id, api_key (strings),
//	           groups, scopes (lists of strings), claims (map(string, dyn):
//	           a JWT's claims; empty for API keys and introspected tokens)
//	route      the route path (string)
//	kind       "tool", "prompt" or "resource"
//	name       the name the client sees (string)
//	arguments  the call's arguments, map(string, dyn); JSON numbers are
//	           doubles, as CEL reads JSON; an empty map when the request
//	           has none
//
// principal is a typed object, so a misspelt field (principal.grups) or a
// type mismatch (principal.subject == 1) is a load-time error; arguments
// and claims are dynamic, so a missing key is an evaluation error.
// Standard CEL plus the strings extension (lowerAscii, split, ...), optional
// values (arguments.?repo.orValue("")), numeric comparisons across int
// and double (arguments.limit <= 100), and normpath/normuri, which bring a
// path-like argument to the form an upstream runs (paths.go).
//
// Evaluation is bounded by a cost limit (CostLimit) and a timeout
// (EvalTimeout); exceeding either is an evaluation error. Tracking the
// cost of every step is about half of an evaluation's CPU, so it is paid
// only where it can matter: an expression whose cost CEL's static
// estimate bounds within CostLimit (no comprehension, no string function
// over an input of unbounded size) is evaluated without tracking, since
// it cannot exceed the limit.
package cond

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"google.golang.org/protobuf/types/known/structpb"

	who "github.com/mcpgw/mcpgw/internal/principal"
)

// Limits of one evaluation.
const (
	// CostLimit is the CEL cost budget of one evaluation (roughly one unit
	// per operation, and one per ten bytes a string function scans).
	CostLimit = 1_000_000
	// EvalTimeout bounds one evaluation; CEL checks it in loops
	// (comprehensions such as all, exists, map, filter).
	EvalTimeout = 50 * time.Millisecond
	// maxSource is the longest expression accepted, in bytes.
	maxSource = 4096
	// maxPrincipalList is the size of principal.groups and .scopes the
	// static cost estimate assumes (a membership test costs one unit per
	// element); a principal with a longer list is judged by the tracked
	// programs.
	maxPrincipalList = 1000
)

// Variables lists the variables a condition may use, for messages.
const Variables = "principal (subject, issuer, client_id, api_key, groups, scopes, claims), route, kind, name and arguments"

// principal is who.Principal as CEL sees it: a typed object, so field names
// and types are checked at load time. Claims are a google.protobuf.Struct,
// which CEL types as map(string, dyn).
type principal struct {
	Subject  string           `cel:"subject"`
	Issuer   string           `cel:"issuer"`
	ClientID string           `cel:"client_id"`
	APIKey   string           `cel:"api_key"`
	Groups   []string         `cel:"groups"`
	Scopes   []string         `cel:"scopes"`
	Claims   *structpb.Struct `cel:"claims"`
}

// celType is the CEL name of principal (package alias and type name).
const celType = "cond.principal"

// Input is what one evaluation sees.
type Input struct {
	Principal         who.Principal
	Route, Kind, Name string
	// Arguments are the call's decoded JSON arguments (values as
	// encoding/json decodes into any). Nil with EvalOptions.Unknown means
	// unknown; nil otherwise means none (an empty map).
	Arguments map[string]any

	memo *memo // Memoize: the variables, made once for every condition
}

// memo holds the variables made from an Input, so that the conditions of
// several rules judged for one decision share them.
type memo struct {
	full, partial         any
	fullErr, partialErr   error
	fullDone, partialDone bool
}

// Memoize makes the Input build its CEL variables once, for every
// condition it is then evaluated with (copies of it share them). Set
// every field first; do not change them after.
func (in *Input) Memoize() { in.memo = &memo{} }

// Memo is what Memoize keeps, for a caller that allocates it together
// with its Inputs (MemoizeIn).
type Memo struct{ m memo }

// MemoizeIn is Memoize keeping the variables in m.
func (in *Input) MemoizeIn(m *Memo) { in.memo = &m.m }

// Result of evaluating a condition without the call's arguments.
type Result int

const (
	// False: the condition does not hold, whatever the arguments.
	False Result = iota
	// True: the condition holds, whatever the arguments.
	True
	// Unknown: the outcome depends on the arguments, or evaluation hit a
	// cost or time limit that the call itself may not hit.
	Unknown
	// Error: evaluation fails, whatever the arguments (e.g. a missing key
	// in principal.claims).
	Error
)

func (r Result) String() string {
	return [...]string{"false", "true", "unknown", "error"}[r]
}

// Condition is a compiled condition; safe for concurrent use.
type Condition struct {
	src     string
	full    cel.Program // every variable known: calls
	partial cel.Program // arguments unknown: lists
	// bound says how full and partial bound the cost: boundTracked, they
	// track it against CostLimit; boundStatic, the expression's static
	// estimate is within it whatever the inputs, so they do not;
	// boundLists, within it only while principal.groups and .scopes have
	// at most maxPrincipalList elements, and tracked (below) is used for
	// a principal with longer ones.
	bound    bound
	tracked  func() programPair
	usesArgs bool
	usesName bool // the expression reads name (UsesName)
	// argPaths are the member paths into arguments it selects by name.
	argPaths [][]string
	// argKeys are the members of arguments the expression reads, when it
	// reads nothing else of it (arguments.x, arguments.?x, has(arguments.x),
	// arguments["x"]); argsWhole: it reads it otherwise (size, iteration,
	// comparison, a computed key), so all of it matters.
	argKeys   []string
	argsWhole bool
	// loops: the expression has a comprehension (all, exists, map,
	// filter), the only place CEL checks EvalTimeout; without one the
	// cost limit bounds it and no timer is needed.
	loops bool
}

// String returns the expression as written.
func (c *Condition) String() string { return c.src }

// UsesArguments reports whether the expression mentions arguments, so that
// its outcome may differ between calls to the same name.
func (c *Condition) UsesArguments() bool { return c.usesArgs }

// UsesName reports whether the expression mentions name: one that does not
// is judged alike for every name of one kind, principal and route.
func (c *Condition) UsesName() bool { return c.usesName }

// Issue is one problem of an expression, at a 1-based line and column
// within the expression.
type Issue struct {
	Line, Column int
	Msg          string
}

// CompileError lists the problems of an expression.
type CompileError struct {
	Issues []Issue
}

func (e *CompileError) Error() string {
	var parts []string
	for _, is := range e.Issues {
		if is.Line > 0 {
			parts = append(parts, fmt.Sprintf("%s (at %d:%d of the expression)", is.Msg, is.Line, is.Column))
		} else {
			parts = append(parts, is.Msg)
		}
	}
	return strings.Join(parts, "; ")
}

var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[principal](), ext.ParseStructTags(true)),
		cel.Variable("principal", cel.ObjectType(celType)),
		cel.Variable("route", cel.StringType),
		cel.Variable("kind", cel.StringType),
		cel.Variable("name", cel.StringType),
		cel.Variable("arguments", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		cel.Lib(pathLib{}),
	)
})

// pathLib adds normpath and normuri (paths.go).
type pathLib struct{}

func (pathLib) CompileOptions() []cel.EnvOption     { return pathFunctions() }
func (pathLib) ProgramOptions() []cel.ProgramOption { return nil }

// Compile parses and type-checks a condition. It must be of type bool. The
// error is a *CompileError for problems of the expression.
func Compile(src string) (*Condition, error) {
	e, ast, err := check(src)
	if err != nil {
		return nil, err
	}
	c := &Condition{src: src, bound: staticBound(e, ast)}
	programs := func(track bool) (full, partial cel.Program, err error) {
		opts := []cel.ProgramOption{cel.InterruptCheckFrequency(100)}
		if track {
			opts = append(opts, cel.CostLimit(CostLimit), cel.CostTracking(pathCosts{}))
		}
		if full, err = e.Program(ast, opts...); err != nil {
			return nil, nil, err
		}
		if partial, err = e.Program(ast, append(opts, cel.EvalOptions(cel.OptPartialEval))...); err != nil {
			return nil, nil, err
		}
		return full, partial, nil
	}
	if c.full, c.partial, err = programs(c.bound == boundTracked); err != nil {
		return nil, &CompileError{[]Issue{{Msg: err.Error()}}}
	}
	if c.bound == boundLists {
		// Planned on first need: principals with that many groups are rare.
		c.tracked = sync.OnceValue(func() programPair {
			var pp programPair
			pp.full, pp.partial, pp.err = programs(true)
			return pp
		})
	}
	c.usesArgs = mentions(ast, "arguments")
	c.usesName = mentions(ast, "name")
	if c.usesArgs {
		c.argKeys, c.argsWhole = argumentKeys(ast)
		c.argPaths = argumentPaths(ast)
	}
	c.loops = len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0
	return c, nil
}

// Check parses and type-checks a condition as Compile does, without
// planning its evaluation: for policy.CheckConfig, which only reports the
// problems.
func Check(src string) error {
	_, _, err := check(src)
	return err
}

// check parses and type-checks src, a condition of type bool.
func check(src string) (*cel.Env, *cel.Ast, error) {
	e, err := env()
	if err != nil {
		return nil, nil, fmt.Errorf("cond: CEL environment: %w", err) // a bug, not a config problem
	}
	if strings.TrimSpace(src) == "" {
		return nil, nil, &CompileError{[]Issue{{Msg: "the expression is empty"}}}
	}
	if len(src) > maxSource {
		return nil, nil, &CompileError{[]Issue{{Msg: fmt.Sprintf("the expression is %d bytes long, more than %d", len(src), maxSource)}}}
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		ce := &CompileError{}
		for _, er := range iss.Errors() {
			msg := strings.Replace(er.Message, " (in container '')", "", 1)
			ce.Issues = append(ce.Issues, Issue{Line: er.Location.Line(), Column: er.Location.Column() + 1, Msg: msg})
		}
		return nil, nil, ce
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) {
		return nil, nil, &CompileError{[]Issue{{Msg: fmt.Sprintf("the expression is of type %s, not bool", t)}}}
	}
	return e, ast, nil
}

// programPair is a condition's programs for calls and for lists.
type programPair struct {
	full, partial cel.Program
	err           error
}

// bound is how a condition's programs bound its cost (Condition.bound).
type bound int

const (
	boundTracked bound = iota
	boundStatic
	boundLists
)

// staticBound reports whether CEL's static cost estimate of the checked
// expression stays within CostLimit: for any inputs (boundStatic), or
// while principal.groups and .scopes are at most maxPrincipalList long
// (boundLists). The estimate is an upper bound of the cost the tracker
// would count, so tracking such an expression can never fail it.
func staticBound(e *cel.Env, ast *cel.Ast) bound {
	for _, b := range []bound{boundStatic, boundLists} {
		est, err := e.EstimateCost(ast, sizes{lists: b == boundLists})
		if err == nil && est.Max <= CostLimit {
			return b
		}
	}
	return boundTracked
}

// sizes is the static cost estimate's view of input sizes: unknown (so
// unbounded), but for principal.groups and .scopes with lists set.
type sizes struct{ lists bool }

func (s sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); s.lists && len(p) == 2 && p[0] == "principal" && (p[1] == "groups" || p[1] == "scopes") {
		return &checker.SizeEstimate{Min: 0, Max: maxPrincipalList}
	}
	return nil
}

func (s sizes) EstimateCallCost(_, overloadID string, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return pathCallCost(overloadID, args, s.EstimateSize)
}

// programs returns the programs for evaluating with in.
func (c *Condition) programs(in *Input) (full, partial cel.Program, err error) {
	if c.bound == boundLists && (len(in.Principal.Groups) > maxPrincipalList || len(in.Principal.Scopes) > maxPrincipalList) {
		pp := c.tracked()
		return pp.full, pp.partial, pp.err
	}
	return c.full, c.partial, nil
}

// ArgumentKeys returns the members of the call's arguments the expression
// reads; whole is set when it reads the arguments otherwise (then every
// member may matter). Both are empty when it does not use the arguments.
func (c *Condition) ArgumentKeys() (keys []string, whole bool) { return c.argKeys, c.argsWhole }

// ArgumentPaths returns the member paths into the call's arguments the
// expression selects by name (arguments.repo.owner: [repo owner]), each
// as deep as the selection goes. A case variant of a member on one of
// them is what a case-insensitive tool would read for it, unseen by the
// condition: the policy refuses one (DESIGN.md invariant 6).
func (c *Condition) ArgumentPaths() [][]string { return c.argPaths }

// argumentPaths finds the chains of named selections on the variable
// arguments in the checked expression.
func argumentPaths(ast *cel.Ast) [][]string {
	root := celast.NavigateAST(ast.NativeRep())
	refs := celast.MatchDescendants(root, func(e celast.NavigableExpr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == "arguments"
	})
	var paths [][]string
	for _, ref := range refs {
		var path []string
		for at := ref; ; {
			key, ok := memberOf(at)
			if !ok {
				break
			}
			path = append(path, key)
			at, _ = at.Parent()
		}
		if len(path) > 0 && !slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, path) }) {
			paths = append(paths, path)
		}
	}
	return paths
}

// argumentKeys finds what the checked expression reads of the variable
// arguments: the member names of selections and constant indexes on it,
// or whole for any other use.
func argumentKeys(ast *cel.Ast) (keys []string, whole bool) {
	root := celast.NavigateAST(ast.NativeRep())
	refs := celast.MatchDescendants(root, func(e celast.NavigableExpr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == "arguments"
	})
	for _, id := range refs {
		key, ok := memberOf(id)
		if !ok {
			return nil, true
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys, false
}

// memberOf returns the member name that the expression around the
// reference ref to arguments selects.
func memberOf(ref celast.NavigableExpr) (string, bool) {
	parent, ok := ref.Parent()
	if !ok {
		return "", false
	}
	switch parent.Kind() {
	case celast.SelectKind: // arguments.x, has(arguments.x)
		if sel := parent.AsSelect(); sel.Operand().ID() == ref.ID() {
			return sel.FieldName(), true
		}
	case celast.CallKind: // arguments.?x, arguments["x"], arguments[?"x"]
		call := parent.AsCall()
		switch call.FunctionName() {
		case operators.OptSelect, operators.Index, operators.OptIndex:
		default:
			return "", false
		}
		if args := call.Args(); len(args) == 2 && args[0].ID() == ref.ID() && args[1].Kind() == celast.LiteralKind {
			if s, ok := args[1].AsLiteral().Value().(string); ok {
				return s, true
			}
		}
	}
	return "", false
}

// mentions reports whether the checked expression refers to variable v.
func mentions(ast *cel.Ast, v string) bool {
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == v && ref.Value == nil {
			return true
		}
	}
	return false
}

// fullVars are the variables of a call, made once when memoized.
func (in Input) fullVars() (any, error) {
	m := in.memo
	if m == nil {
		return in.vars(true)
	}
	if !m.fullDone {
		m.full, m.fullErr = in.vars(true)
		m.fullDone = true
	}
	return m.full, m.fullErr
}

// partialVars are the variables of a list (arguments unknown), made once
// when memoized; the Result says how a failure to make them counts.
func (in Input) partialVars(e *cel.Env) (any, Result, error) {
	m := in.memo
	if m == nil {
		m = &memo{}
	}
	if !m.partialDone {
		m.partialDone = true
		vars, err := in.vars(false)
		if err != nil {
			m.partialErr = claimsError{err}
		} else {
			m.partial = partialActivation{vars}
		}
	}
	if m.partial == nil {
		if _, bad := m.partialErr.(claimsError); bad {
			return nil, Error, m.partialErr // the same for every call
		}
		return nil, Unknown, m.partialErr
	}
	return m.partial, 0, nil
}

// claimsError marks variables that could not be made (principal.claims
// that CEL cannot be given): every evaluation fails alike.
type claimsError struct{ err error }

func (e claimsError) Error() string { return e.err.Error() }
func (e claimsError) Unwrap() error { return e.err }

// eval runs prog on vars, under EvalTimeout where the expression loops.
func (c *Condition) eval(prog cel.Program, vars any) (ref.Val, error) {
	if !c.loops {
		val, _, err := prog.Eval(vars)
		return val, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	val, _, err := prog.ContextEval(ctx, vars)
	return val, err
}

// activation is the variables of one evaluation. CEL resolves them by
// name; a map (with its activation) would cost several allocations per
// decision, and boxing every string one each. So the principal is handed
// out by pointer and a string is boxed only when an expression reads it,
// once for every condition the activation serves.
type activation struct {
	principal         principal
	route, kind, name string
	arguments         map[string]any // nil: unknown (lists)
	boxed             [3]any         // route, kind, name, once read
}

func (a *activation) ResolveName(n string) (any, bool) {
	box := func(i int, s string) (any, bool) {
		if a.boxed[i] == nil {
			a.boxed[i] = s
		}
		return a.boxed[i], true
	}
	switch n {
	case "principal":
		return &a.principal, true
	case "route":
		return box(0, a.route)
	case "kind":
		return box(1, a.kind)
	case "name":
		return box(2, a.name)
	case "arguments":
		return a.arguments, a.arguments != nil
	}
	return nil, false
}

func (*activation) Parent() interpreter.Activation { return nil }

// partialActivation is an activation without the arguments, which are
// unknown (lists). It says so itself: cel.Env.PartialVars would find the
// unknown variables by resolving (and boxing) every one.
type partialActivation struct{ *activation }

func (partialActivation) UnknownAttributePatterns() []*interpreter.AttributePattern {
	return unknownArguments()
}

// AsPartialActivation is how the interpreter finds a partial activation.
func (a partialActivation) AsPartialActivation() (interpreter.PartialActivation, bool) {
	return a, true
}

// unknownArguments is the pattern of the unknown variable of a list;
// made once, never changed.
var unknownArguments = sync.OnceValue(func() []*interpreter.AttributePattern {
	return []*interpreter.AttributePattern{cel.AttributePattern("arguments")}
})

func (in Input) vars(withArgs bool) (*activation, error) {
	p := in.Principal
	cl := p.PreparedClaims
	if cl == nil {
		cl = who.NewClaims(p.Claims)
	}
	claims, err := cl.Struct()
	if err != nil {
		return nil, err
	}
	a := &activation{
		principal: principal{Subject: p.Subject, Issuer: p.Issuer, ClientID: p.ClientID, APIKey: p.APIKey,
			Groups: p.Groups, Scopes: p.Scopes, Claims: claims},
		route: in.Route,
		kind:  in.Kind,
		name:  in.Name,
	}
	if withArgs {
		args := in.Arguments
		if args == nil {
			args = map[string]any{}
		}
		a.arguments = args
	}
	return a, nil
}

// Eval evaluates the condition for a call: true or false, or an error
// (a missing key, a type mismatch at run time, a cost or time limit).
func (c *Condition) Eval(in Input) (bool, error) {
	vars, err := in.fullVars()
	if err != nil {
		return false, err
	}
	full, _, err := c.programs(&in)
	if err != nil {
		return false, err
	}
	val, err := c.eval(full, vars)
	if err != nil {
		return false, err
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %v, not a bool", val)
	}
	return b, nil
}

// EvalWithoutArguments evaluates the condition for a list, where the call's
// arguments are unknown. It is sound: True or False only when Eval gives
// that for every possible arguments, Error only when Eval fails for every
// possible arguments. Anything else is Unknown.
func (c *Condition) EvalWithoutArguments(in Input) (Result, error) {
	e, err := env()
	if err != nil {
		return Unknown, err
	}
	act, res, err := in.partialVars(e)
	if act == nil {
		return res, err
	}
	_, partial, err := c.programs(&in)
	if err != nil {
		return Unknown, err
	}
	val, err := c.eval(partial, act)
	switch {
	case err != nil && resourceLimit(err):
		return Unknown, err
	case err != nil:
		return Error, err
	case types.IsUnknown(val):
		return Unknown, nil
	}
	b, ok := val.Value().(bool)
	if !ok {
		return Error, fmt.Errorf("the condition gave %v, not a bool", val)
	}
	if b {
		return True, nil
	}
	return False, nil
}

// resourceLimit reports whether err is the cost limit or the timeout: not
// a property of the inputs alone, so a list cannot rely on it.
func resourceLimit(err error) bool {
	var ce interpreter.EvalCancelledError
	if errors.As(err, &ce) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "operation cancelled") || strings.Contains(s, "operation interrupted") ||
		strings.Contains(s, "cost limit")
}
