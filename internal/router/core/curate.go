package core

import (
	"bytes"
	"context"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// curateCall applies the route's tool curation (internal/curate) to a
// tools/call whose target decide has just resolved, before the policy
// judges it: its arguments become what the upstream will get (fixed
// values set, defaults filled), so that the policy's conditions, the
// audit and the upstream all read the one form that runs. A caller
// sending a fixed or hidden parameter is refused (v.pinErr: admit answers
// it, nothing is forwarded). The lists' half is the catalog's
// (catalog/curation.go).
func (c *Core) curateCall(ctx context.Context, rte *Route, method string, v *Verdict) {
	cur := rte.View.Curation()
	if cur == nil || method != mcp.MethodToolsCall || !v.targeted || !v.tgt.Resolved || v.kind != string(mcp.KindTool) {
		return
	}
	t := cur.For(v.tgt.Upstream, v.tgt.Internal)
	if t == nil {
		return
	}
	args, jerr := t.Arguments(v.req.Arguments, &v.principal)
	if jerr != nil {
		edge.Logger(ctx, c.log).Info("tool call refused by curation", zap.String("route", rte.Path),
			zap.String("tool", v.name), zap.String("as", v.external), zap.String("reason", jerr.Message))
		v.pinErr = jerr
		return
	}
	if bytes.Equal(args, v.req.Arguments) {
		return
	}
	params, err := rawjson.Set(v.params, "arguments", args)
	if err != nil {
		v.pinErr = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tools/call: %v", err)
		return
	}
	v.params, v.req.Arguments = params, args
}
