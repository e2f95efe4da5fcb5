package cond

import (
	"errors"
	"math"
	"path"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/mcpgw/mcpgw/internal/mcp/uri"
)

// The functions that bring a path-like argument to the form an upstream
// runs, so that a condition judges that form (DESIGN invariant 9):
// arguments.path.startsWith("/data/") holds for "/data/../etc/passwd",
// which a filesystem server opens as /etc/passwd; normpath(arguments.path)
// is "/etc/passwd".
//
//	normpath(string) string  the path lexically cleaned (Go's path.Clean:
//	                         "." and ".." segments and repeated "/"
//	                         removed), after reading "\" as "/" as
//	                         Windows servers do; "" becomes "."
//	normuri(string) string   the URI in the canonical form of
//	                         internal/mcp/uri (dot-segments removed,
//	                         escapes and case normalized); an evaluation
//	                         error where it has none (an encoded slash, a
//	                         backslash, ...), so that the condition fails
//	                         closed
const (
	overloadNormPath = "normpath_string"
	overloadNormURI  = "normuri_string"
)

func pathFunctions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("normpath", cel.Overload(overloadNormPath, []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.String(normPath(string(s)))
			}))),
		cel.Function("normuri", cel.Overload(overloadNormURI, []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				c, err := uri.Canonical(string(s))
				var ue *uri.Error
				if err != nil && (!errors.As(err, &ue) || ue.Canonical == "") {
					return types.NewErr("normuri: %v", err)
				}
				return types.String(c)
			}))),
	}
}

func normPath(s string) string {
	return path.Clean(strings.ReplaceAll(s, `\`, "/"))
}

// pathCallCost is the static estimate of a call of the path functions:
// like CEL's string functions, one unit per ten bytes of the argument, so
// that a condition applying them to an argument of unknown size is
// evaluated with its cost tracked (staticBound).
func pathCallCost(overloadID string, args []checker.AstNode, size func(checker.AstNode) *checker.SizeEstimate) *checker.CallEstimate {
	if overloadID != overloadNormPath && overloadID != overloadNormURI || len(args) != 1 {
		return nil
	}
	sz := args[0].ComputedSize()
	if sz == nil {
		sz = size(args[0])
	}
	if sz == nil || sz.Max == math.MaxUint64 {
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: math.MaxUint64}}
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + sz.Max/10}}
}

// pathCosts counts the path functions' actual cost when cost is tracked
// (the same one unit per ten bytes); other calls keep CEL's own cost.
type pathCosts struct{}

func (pathCosts) CallCost(_, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	if overloadID != overloadNormPath && overloadID != overloadNormURI || len(args) != 1 {
		return nil
	}
	s, _ := args[0].(types.String)
	c := 1 + uint64(len(s))/10
	return &c
}
