package core

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// interceptStage runs the interceptors (internal/intercept) of a routed
// request: the request phase over what it sends (a call's or prompt
// get's arguments, a read's URI) before the upstream sees it, and the
// result phase over the upstream's answer before the caller does. It
// runs last, after the policy and the limits: what they refused never
// reaches an interceptor (nor an external one's service), and what it
// changes goes to the upstream as changed. The route has this stage only
// when interceptors are configured.
func interceptStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	set, v := r.Route.Gen.Intercept, r.Verdict
	var t intercept.Target
	switch {
	case v.task && r.Msg.Method == mcp.MethodTasksResult:
		// A task's result is a tool's result, fetched by task id: the
		// result phase judges it as of a tool whose name is not known.
		t = intercept.Target{Route: r.Route.Path, Upstream: v.taskUpstream, Kind: policy.KindTool, Name: v.external,
			Principal: &v.principal, Method: mcp.MethodToolsCall, Unnamed: true}
	case !v.targeted || v.task:
		return next(ctx, r)
	default:
		t = intercept.Target{Route: r.Route.Path, Upstream: v.upstream(), Kind: v.kind, Name: v.name,
			Principal: &v.principal, Method: r.Msg.Method}
	}
	if !t.Unnamed && set.Applies(config.PhaseRequest, &t) {
		if resp := r.interceptRequest(ctx, set, &t); resp != nil {
			return resp
		}
	}
	resp := next(ctx, r)
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 || !set.Applies(config.PhaseResult, &t) {
		return resp
	}
	o := set.Result(ctx, &t, resp.Result)
	r.noteIntercepted(o.Notes)
	switch {
	case o.Denied:
		edge.Logger(ctx, r.core.log).Info("result withheld by an interceptor", zap.String("route", t.Route),
			zap.String("name", t.Name), zap.String("interceptor", o.By), zap.String("reason", o.Reason))
		return withheld(resp, t.Method, o)
	case o.Changed:
		changed := *resp
		changed.Result = o.Out
		return &changed
	}
	return resp
}

// interceptRequest runs the request phase; it returns the refusal, or nil
// with r.Msg carrying what the interceptors changed.
func (r *Request) interceptRequest(ctx context.Context, set *intercept.Set, t *intercept.Target) *jsonrpc.Message {
	p := r.Params()
	key, member := "arguments", []byte(nil)
	switch {
	case mcp.Method(r.Msg.Method).Arguments:
		member = p.Arguments
	case r.Msg.Method == mcp.MethodResourcesRead:
		key = "uri"
		member, _ = json.Marshal(p.Name) // the URI as sent
	}
	if member == nil {
		return nil
	}
	o := set.Request(ctx, t, member)
	r.noteIntercepted(o.Notes)
	if o.Denied {
		gerr := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "refused by interceptor %s: %s", o.By, o.Reason)
		r.obs.refuse(gerr)
		r.audit.refuse(audit.Denied, audit.RuleInterceptor+o.By, "", o.Reason)
		edge.Logger(ctx, r.core.log).Info("request refused by an interceptor", zap.String("route", t.Route),
			zap.String("name", t.Name), zap.String("interceptor", o.By), zap.String("reason", o.Reason))
		return jsonrpc.NewError(r.Msg.ID, gerr)
	}
	if o.Changed && key == "uri" {
		// The URI was resolved and judged as sent; a rewritten one would
		// run unjudged. An interceptor may refuse a URI, not change it.
		gerr := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "refused: interceptors changed the URI, which is judged as sent; send the URI in the form they allow")
		r.obs.refuse(gerr)
		r.audit.refuse(audit.Denied, audit.RuleInterceptor+"uri", "", "an interceptor changed the URI")
		return jsonrpc.NewError(r.Msg.ID, gerr)
	}
	if o.Changed {
		if v := r.Verdict; key == "arguments" && v.decided {
			// Judge the form that runs: the policy's conditions see the
			// arguments as changed.
			if d := r.Route.Gen.Policy.DecideCall(v.principal, r.Route.Path, v.kind, v.name, o.Out); !d.Allowed {
				gerr := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "forbidden: the access policy does not allow this call of %s with the arguments as interceptors changed them", v.name)
				r.obs.refuse(gerr)
				r.audit.refuse(audit.Denied, audit.Rule(d), d.Pattern, d.Reason)
				return jsonrpc.NewError(r.Msg.ID, gerr)
			}
		}
		params, err := rawjson.Set(r.Msg.Params, key, o.Out)
		if err != nil {
			return jsonrpc.NewError(r.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "an interceptor's change could not be applied: %v", err))
		}
		m := *r.Msg
		m.Params = params
		r.Msg = &m
	}
	return nil
}

// noteIntercepted adds what interceptors did to the audit record.
func (r *Request) noteIntercepted(notes []string) {
	if r.audit != nil && len(notes) > 0 {
		r.audit.rec.Intercepted = append(r.audit.rec.Intercepted, notes...)
	}
}

// withheld answers a result an interceptor refused: a tool call gets an
// isError result saying so (the model reads it; the call did run), a
// prompt get or resource read, which have no isError, an error.
func withheld(resp *jsonrpc.Message, method string, o intercept.Outcome) *jsonrpc.Message {
	text := "the result was withheld by interceptor " + o.By + ": " + o.Reason
	if method != mcp.MethodToolsCall {
		return jsonrpc.NewError(resp.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", text))
	}
	res, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": true})
	return jsonrpc.NewResult(resp.ID, res)
}

// interceptList runs the list phase over a merged list result: what it
// hides is left out (and refused when called: listedTarget asks Hides).
func (c *Core) interceptList(ctx context.Context, rte *Route, res json.RawMessage) json.RawMessage {
	set := rte.Gen.Intercept
	if !set.Has(config.PhaseList) {
		return res
	}
	t := intercept.Target{Route: rte.Path, Principal: principalPtr(ctx)}
	o := set.List(ctx, t, res, func(kind, name string) (string, string) { return listedAs(ctx, rte, kind, name) })
	if len(o.Notes) > 0 {
		edge.Logger(ctx, c.log).Info("definitions hidden by an interceptor", zap.String("route", rte.Path), zap.Strings("hidden", o.Notes))
	}
	return o.Out
}

// listedAs is the upstream of a name a list shows, and the name the list
// phase judges it as: a tool's or prompt's canonical one, as
// hiddenByInterceptor judges a call's target; a resource's URI as listed.
func listedAs(ctx context.Context, rte *Route, kind, name string) (string, string) {
	if kind == "resource" {
		up, _, _ := rte.View.Resolve(true, name)
		return up, name
	}
	up, canonical, _ := rte.View.ListedName(ctx, mcp.Kind(kind), name)
	return up, canonical
}

// listHides reports whether the list phase hides the tool a list shows as
// name, in its listed form item (a search's hit).
func listHides(ctx context.Context, rte *Route, name string, item []byte) bool {
	up, canonical := listedAs(ctx, rte, "tool", name)
	hide, _ := rte.Gen.Intercept.Hides(ctx, &intercept.Target{Route: rte.Path, Upstream: up, Kind: "tool", Name: canonical, Principal: principalPtr(ctx)}, item)
	return hide
}

// hiddenByInterceptor reports whether the list phase hides the tool
// definition def (the upstream's) of canonical name: a call of it is
// refused as of a name not listed, so what can be called, and what
// pinning judges, is what was listed. It judges what the list judges: the
// definition as the route lists it (named and curated: a curated clean
// description is what the caller saw, appended poison is too) under the
// canonical name.
func hiddenByInterceptor(ctx context.Context, rte *Route, up, name string, def json.RawMessage) bool {
	set := rte.Gen.Intercept
	if !set.Has(config.PhaseList) {
		return false
	}
	listed, ok := rte.View.ListedForm(ctx, up, def)
	if !ok {
		return true // the list leaves it out
	}
	hide, _ := set.Hides(ctx, &intercept.Target{Route: rte.Path, Upstream: up, Kind: "tool", Name: name, Principal: principalPtr(ctx)}, listed)
	return hide
}

// principalPtr is the caller, for an interceptor's group match.
func principalPtr(ctx context.Context) *policy.Principal {
	p := policyPrincipal(ctx)
	return &p
}
