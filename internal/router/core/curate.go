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

// offeredAs words the refusal of a renamed tool's old name (decide set
// v.offered with it): the caller is told the tool's name on the route,
// but only when its tools/list would show that name — the policy lists
// the tool for it, its connection's upstream lists it, no interceptor
// hides it and pinning approves it — so the refusal tells no more than
// the list would. Otherwise the refusal stays the unknown name's. It runs
// at admit, whose ctx carries the caller (the upstream listing may be its
// own connection's), and only on this refusal path.
func (c *Core) offeredAs(ctx context.Context, rte *Route, v *Verdict) {
	t := v.offered
	if v.pinErr == nil || t.Renamed == "" {
		return
	}
	if visible := visibleTo(ctx, rte); visible != nil && !visible(t.Kind, t.Canonical) {
		return
	}
	up, def, found, jerr := rte.View.ToolDefs().Lookup(ctx, t.Canonical)
	if jerr != nil || !found || hiddenByInterceptor(ctx, rte, up, t.Canonical, def) {
		return
	}
	if p := rte.Gen.Pinner; p != nil && !c.pinned(p, up, t.Canonical, def) {
		return
	}
	v.pinErr = jsonrpc.Errorf(v.pinErr.Code, "tool %q is offered on this route as %q; call it by that name", t.External, t.Renamed)
}

// refused is the name a refusal "as unknown" names: the target as the
// pinned params name it, but a curated name as the caller sent it — the
// upstream's name behind a curated one the caller may not see is not
// the refusal's to reveal.
func (v *Verdict) refused() string {
	if v.kind == string(mcp.KindTool) && v.req.NameOK && v.req.Name != v.external {
		if _, ok := v.rte.View.Curation().Curated(v.req.Name); ok {
			return v.req.Name
		}
	}
	return v.external
}
