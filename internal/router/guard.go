package router

import (
	"context"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// allowAll is the policy when none is configured but pinning is.
var allowAll = mustCompileAllowAll()

func mustCompileAllowAll() *policy.Policy {
	p, err := policy.Compile(&config.Policy{Default: config.PolicyAllow})
	if err != nil {
		panic(err)
	}
	return p
}

// CodeRateLimited is the JSON-RPC error for a request over a rate limit;
// its data carries retryAfterSeconds (implementation-defined range).
const CodeRateLimited = -32004

// target is what a request is about, in policy terms: a tool, a prompt or
// a resource, by its downstream name.
func target(msg *jsonrpc.Message) (kind, name string, ok bool) {
	t, ok := mcp.TargetOf(msg.Method, msg.Params)
	if !ok {
		return "", "", false
	}
	name, err := rawjson.GetPath(msg.Params, t.Path)
	return string(t.Kind), name, err == nil
}

// policyPrincipal is the request's principal in the policy's terms.
func policyPrincipal(ctx context.Context) policy.Principal {
	p := auth.FromContext(ctx)
	if p == nil {
		return policy.Principal{}
	}
	return policy.Principal{Subject: p.Subject, Issuer: p.Issuer, ClientID: p.ClientID, Scopes: p.Scopes, Groups: p.Groups, APIKey: p.APIKey, Claims: p.Claims}
}

// guard applies the access policy and the rate limits to one routed
// request before anything reaches an upstream. A name the policy hides is
// answered exactly like a name that does not exist, so a caller learns
// nothing about what it may not see (the reason goes to the log). A tool
// refused only for missing scopes returns them, for an insufficient_scope
// challenge. When the request may go ahead, release must be called once
// the upstream has answered.
func (rt *Router) guard(ctx context.Context, rte *route, msg *jsonrpc.Message, au *auditEntry) (release func(), missing []string, jerr *jsonrpc.Error) {
	release = func() {}
	kind, name, ok := target(msg)
	if !ok || kind == string(mcp.KindTask) {
		// Malformed: the routing layer answers it. A task: only the
		// principal it was handed to may use it (the host checks), and the
		// tools/call that created it was judged here.
		return release, nil, nil
	}
	g := rte.gen
	route := rte.path
	p := policyPrincipal(ctx)
	if pol := g.policy; pol != nil {
		d := pol.DecideCall(p, route, kind, name, callArguments(msg))
		if !d.Allowed {
			rt.opts.Metrics.PolicyDecision(route, "deny")
			rt.logger(ctx).Info("request denied by policy", zap.String("route", route), zap.String("method", msg.Method),
				zap.String("name", name), zap.Stringer("principal", p), zap.String("reason", d.Reason))
			au.refuse(audit.Denied, audit.Rule(d), d.Pattern, d.Reason) // audit.go
			if len(d.MissingScopes) > 0 {
				return release, append(pol.RequiredScopes(name), rte.scopes...), jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
					"forbidden: %s needs scope %v; obtain a token with it", name, d.MissingScopes)
			}
			if pol.Decide(p, route, kind, name).Listed() {
				// Listed, but a condition on these arguments refuses the
				// call: "unknown" would be a lie about a visible name.
				return release, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "forbidden: the access policy does not allow this call of %s with these arguments", name)
			}
			return release, nil, hidden(kind, name)
		}
		rt.opts.Metrics.PolicyDecision(route, "allow")
		au.allowed(d) // audit.go
	}
	if kind == policy.KindTool && g.pinner != nil {
		if up, def, ok := rte.view.Tool(ctx, name); ok && !rt.pinned(g.pinner, up, name, def) {
			rt.opts.Metrics.PolicyDecision(route, "unpinned")
			au.refuse(audit.Denied, audit.RulePinning, "", "tool definition is "+g.pinner.Check(up, def).Status.String()+", not approved in the pinning lock") // audit.go
			return release, nil, hidden(kind, name)
		}
	}
	if g.limiter != nil {
		upstream, _, _ := rte.view.Resolve(kind == policy.KindResource, name)
		tool := ""
		if kind == policy.KindTool {
			tool = name
		}
		rel, lr := g.limiter.Allow(p, upstream, tool)
		if !lr.Allowed {
			rt.opts.Metrics.RateLimited(route)
			au.refuse(audit.RateLimited, audit.RuleRateLimits, "", lr.String()) // audit.go
			data, _ := json.Marshal(map[string]any{"retryAfterSeconds": lr.RetryAfterSeconds(), "limit": lr.Limit})
			return release, nil, &jsonrpc.Error{Code: CodeRateLimited, Message: lr.String(), Data: data}
		}
		release = rel
	}
	return release, nil, nil
}

// hidden is the answer for a name the policy does not let the caller see.
func hidden(kind, name string) *jsonrpc.Error {
	switch kind {
	case policy.KindResource:
		return jsonrpc.Errorf(mcp.CodeResourceNotFound, "resource not found: %q", name)
	case policy.KindPrompt:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown prompt %q", name)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool %q", name)
}

// challengeScopes answers 403 insufficient_scope when the policy refuses a
// request only for missing scopes, before any stream starts. It reports
// whether it answered.
func (rt *Router) challengeScopes(w http.ResponseWriter, r *http.Request, sess *Session, msg *jsonrpc.Message) bool {
	rte := sess.route()
	g := rte.gen
	if g.policy == nil || g.auth == nil {
		return false
	}
	kind, name, ok := target(msg)
	if !ok || kind == string(mcp.KindTask) {
		return false
	}
	d := g.policy.DecideCall(policyPrincipal(r.Context()), rte.path, kind, name, callArguments(msg))
	if d.Allowed || len(d.MissingScopes) == 0 {
		return false
	}
	required := append(g.policy.RequiredScopes(name), rte.scopes...)
	rt.auditChallenge(r.Context(), rte, msg, d) // audit.go
	rt.refuse(w, r, rte, &auth.Error{Reason: auth.InsufficientScope, Detail: name + " needs scope " + joinScopes(d.MissingScopes), Scopes: required})
	return true
}

func joinScopes(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}

// filterList removes what the policy hides from a merged list result, and
// marks the result private for 2026-07-28 clients when lists depend on who
// asks (a shared cache must not serve one principal's list to another).
func (rt *Router) filterList(ctx context.Context, rte *route, sess *Session, method string, res json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	g := rte.gen
	pol := g.policy
	if pol == nil && g.pinner == nil {
		return res, nil
	}
	if pol == nil {
		pol = allowAll
	}
	kind := policy.KindTool
	switch method {
	case mcp.MethodPromptsList:
		kind = policy.KindPrompt
	case mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList:
		kind = policy.KindResource
	}
	p := policyPrincipal(ctx)
	route := rte.path
	out, err := policy.FilterListFunc(kind, res, func(kind, name string, item []byte) bool {
		if !pol.Decide(p, route, kind, name).Listed() {
			return false
		}
		if kind != policy.KindTool || g.pinner == nil || method != mcp.MethodToolsList {
			return true
		}
		up, internal, ok := rte.view.Resolve(false, name)
		if !ok {
			return false
		}
		def, err := rawjson.SetString(item, "name", internal) // pins are of the upstream's own definition
		return err == nil && rt.pinned(g.pinner, up, name, def)
	})
	if err != nil {
		// Never fall back to the unfiltered list.
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: could not apply the access policy to %s: %v", method, err)
	}
	if sess.stateless && g.privateLists {
		if p, err := rawjson.SetString(out, "cacheScope", "private"); err == nil {
			out = p
		}
	}
	return out, nil
}

// pinned checks a tool's definition against the pinning lock: in enforce
// mode a new or changed tool is hidden until re-approved; in warn mode it
// is served and logged. Each tool's verdict is logged once per definition.
func (rt *Router) pinned(pinner *policy.Pinner, upstream, name string, def []byte) bool {
	res := pinner.Check(upstream, def)
	if res.Status != policy.PinOK {
		key := upstream + "\x00" + name + "\x00" + res.Status.String() + "\x00" + string(def)
		if _, seen := rt.pinWarned.LoadOrStore(key, true); !seen {
			rt.log.Warn("tool definition is not approved in the pinning lock; run mcpgw pin to approve it",
				zap.String("upstream", upstream), zap.String("tool", name), zap.String("status", res.Status.String()),
				zap.Bool("served", res.Allowed), zap.Error(res.Err))
		}
	}
	return res.Allowed
}

// callArguments is what CEL conditions see as arguments: a tool call's or
// prompt get's arguments; nothing (an empty map) for other requests.
func callArguments(msg *jsonrpc.Message) json.RawMessage {
	switch msg.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		args, _ := rawjson.Get(msg.Params, "arguments")
		return args
	}
	return nil
}
