package core

import (
	"context"
	"encoding/json"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/edge"
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

// target is what a request is about, in policy terms: a tool, a prompt or
// a resource, by its canonical name on the route (catalog.View.Canonical: a
// bare name's prefixed one, <upstream>+<uri> for a resource), and external,
// the target as the forwarded params name it — all from the one
// resolution pinning made (catalog.Target), read from nothing again.
func target(t catalog.Target) (kind, name, external string, ok bool) {
	if t.Kind == "" {
		return "", "", "", false
	}
	return string(t.Kind), t.Canonical, t.External, true
}

// visibleTo is what the policy lets the caller see on rte, for resolving
// bare names and shared URIs among it (catalog.View.Pin); nil: everything.
func visibleTo(ctx context.Context, rte *Route) catalog.Visible {
	pol := rte.Gen.Policy
	if pol == nil || pol.AllowsAll() {
		return nil
	}
	p := policyPrincipal(ctx)
	return func(kind mcp.Kind, name string) bool { return pol.Decide(p, rte.Path, string(kind), name).Listed() }
}

// shownTo is which of rte's upstreams the caller may see anything of
// (nil: all): what the route says of itself to the caller (capabilities,
// instructions, the upstreams a search may name) is made of those only.
// One pass over the rules per upstream and kind, once per initialize or
// discover.
func shownTo(ctx context.Context, rte *Route) catalog.Shown {
	pol := rte.Gen.Policy
	if pol == nil || pol.AllowsAll() {
		return nil
	}
	p := policyPrincipal(ctx)
	seen := map[string]bool{}
	for _, up := range rte.View.Upstreams() {
		for _, k := range []mcp.Kind{mcp.KindTool, mcp.KindPrompt, mcp.KindResource} {
			if pol.MaySeeUnder(p, rte.Path, string(k), rte.View.Namespace(up, k)) {
				seen[up] = true
				break
			}
		}
	}
	return func(upstream string) bool { return seen[upstream] }
}

// seesUpstreamOf reports whether the caller may see anything of the
// upstream whose namespace the canonical tool or prompt name is in (read
// from the name alone, asking no upstream); true when it is in none.
func seesUpstreamOf(ctx context.Context, rte *Route, kind mcp.Kind, name string) bool {
	shown := shownTo(ctx, rte)
	if shown == nil {
		return true
	}
	for _, up := range rte.View.Upstreams() {
		if strings.HasPrefix(name, rte.View.Namespace(up, kind)) {
			return shown(up)
		}
	}
	return true
}

// policyPrincipal is the request's principal (the zero one, anonymous,
// when authentication is off).
func policyPrincipal(ctx context.Context) policy.Principal {
	if p := auth.FromContext(ctx); p != nil {
		return *p
	}
	return policy.Principal{}
}

// Verdict is what the access policy decided about one routed request. It
// is made once per request (Decide): the transport asks first, to answer a
// refusal for missing scopes with an HTTP challenge before any stream
// starts, and Handle applies the same verdict.
type Verdict struct {
	rte       *Route // the route (and generation) it was made for
	principal policy.Principal
	// params are the request's params with its target pinned (catalog.View.Pin):
	// resolved once, among what the caller may see, so that what the policy
	// judged is what the upstream is asked for. pinErr is why it resolves to
	// nothing (unknown, hidden, or a bare name several upstreams have).
	params     json.RawMessage
	pinErr     *jsonrpc.Error
	kind, name string
	// external is the target as params carry it, handed to Forward so
	// that it routes by what was judged without reading the params again.
	external string
	tgt      catalog.Target // the target as resolved once (PinParams), for the limits, the audit and Forward
	offered  catalog.Target // with pinErr: the renamed tool an old name meant (offeredAs)
	// req is the request's params as read once (mcp.ReadParams): what
	// every step after the edge reads instead of the bytes.
	req      mcp.Params
	targeted bool // the request names a target (else the routing layer answers it)
	// task: a tasks method (tasks/get, result, cancel, update); the policy
	// does not judge it, but the rate limits and the audit apply, to the
	// upstream its sealed id names (taskUpstream; "" when it names none).
	task         bool
	taskUpstream string
	decided      bool            // a policy made decision
	decision     policy.Decision // when decided
	// listed: the route lists the target tool for the caller (checked on a
	// route that hides anything: routeHides), and toolUp and toolDef are
	// its upstream and its definition as the caller's connection lists it,
	// for pinning.
	listed  bool
	toolUp  string
	toolDef json.RawMessage
}

// Decide makes the access policy's decision on msg for the principal in ctx.
func (c *Core) Decide(ctx context.Context, rte *Route, msg *jsonrpc.Message) *Verdict {
	return c.DecideParams(ctx, rte, msg, nil)
}

// DecideParams is Decide over the params as the transport already read
// them (p, of msg.Params; nil: read here), which the verdict hands down.
func (c *Core) DecideParams(ctx context.Context, rte *Route, msg *jsonrpc.Message, p *mcp.Params) *Verdict {
	v := new(Verdict)
	c.decide(ctx, rte, msg, p, v)
	return v
}

// upstream is where v's target goes, as resolved once (PinParams); a
// target that was not resolved then is looked up by its canonical name.
func (v *Verdict) upstream() string {
	if v.tgt.Resolved {
		return v.tgt.Upstream
	}
	upstream, _, _ := v.rte.View.Resolve(v.kind == policy.KindResource, v.name)
	return upstream
}

// Params is the request's params as read once (nil for a nil verdict).
func (v *Verdict) Params() *mcp.Params {
	if v == nil {
		return nil
	}
	return &v.req
}

// decide is Decide into v: Handle's own verdict stays on its stack.
func (c *Core) decide(ctx context.Context, rte *Route, msg *jsonrpc.Message, p *mcp.Params, v *Verdict) {
	*v = Verdict{rte: rte, principal: policyPrincipal(ctx), params: msg.Params}
	if p != nil && sameBytes(p.Raw, msg.Params) {
		v.req = *p
	} else {
		v.req.Read(msg.Method, msg.Params)
	}
	p = &v.req
	switch metaName(rte, msg) { // toolsearch.go
	case metaSearch:
		return // the gateway answers it, showing only what the caller may see
	case metaCall:
		inner, jerr := unwrapCall(rte, msg) // judged as the direct call it names
		if jerr != nil {
			v.pinErr = jerr
			return
		}
		msg = inner
		v.params = msg.Params
		v.req.Read(msg.Method, msg.Params)
	}
	pinned, tgt, jerr := rte.View.PinParams(ctx, msg.Method, p, visibleTo(ctx, rte))
	if jerr != nil {
		v.pinErr = jerr
		v.offered = tgt // a renamed tool's old name: admit may name the new one (offeredAs)
		return
	}
	if pinned != nil {
		v.params = pinned
	}
	v.tgt = tgt
	v.kind, v.name, v.external, v.targeted = target(tgt)
	if p.HasTarget && p.Target.Kind == mcp.KindTask {
		// A task: only the principal it was handed to may use it (the host
		// opens its sealed id), and the tools/call that created it was
		// judged here. Nothing for the policy to decide; the limits still
		// apply (guard).
		v.targeted = false
		v.task = true
		v.taskUpstream = rte.View.TaskUpstream(v.external)
	}
	if c.curateCall(ctx, rte, msg.Method, v); v.pinErr != nil { // curate.go
		return
	}
	if v.targeted && rte.Gen.Policy != nil {
		v.decision = rte.Gen.Policy.DecideCall(v.principal, rte.Path, v.kind, v.name, callArguments(msg.Method, p))
		v.decided = true
	}
}

// routeHides reports whether rte may hide a tool, prompt or resource
// from a caller (a policy that does not allow everything, or pinning in
// enforce mode).
func routeHides(rte *Route) bool {
	g := rte.Gen
	return (g.Policy != nil && !g.Policy.AllowsAll()) || (g.Pinner != nil && g.Pinner.Mode != config.PinWarn)
}

// listedTarget checks, on a route that hides anything, that the route
// lists v's target tool or prompt for the caller, so that a name its
// upstream does not list is answered by the gateway exactly as a hidden
// one, not forwarded for the upstream to answer differently (a caller
// could tell the two apart). It reports false with v.pinErr set when the
// target is not listed, or when that cannot be known (fail closed; the
// same answer for every name). A tool's definition is kept for pinning.
// ctx must carry the caller (upcall.WithCaller): its own connection may be
// the one to ask, which is why Decide (made before that) does not.
func (c *Core) listedTarget(ctx context.Context, rte *Route, v *Verdict) bool {
	if !v.targeted || v.pinErr != nil || (!routeHides(rte) && !rte.Gen.Intercept.Has(config.PhaseList)) {
		return true
	}
	if v.decided && !v.decision.Allowed && !seesUpstreamOf(ctx, rte, mcp.Kind(v.kind), v.name) {
		// guard refuses it as unknown. Looking it up first could answer
		// "upstream X could not list" instead, telling a route's upstream
		// the caller may see nothing of from one the route does not have.
		// (A hidden name of an upstream the caller does see is looked up:
		// while its list fails, it gets the refusal its visible names get.)
		return true
	}
	switch mcp.Kind(v.kind) {
	case mcp.KindTool:
		up, def, found, jerr := rte.View.ToolDefs().Lookup(ctx, v.name)
		if jerr != nil {
			v.pinErr = jerr
			return false
		}
		if !found || hiddenByInterceptor(ctx, rte, up, v.name, def) { // intercept.go
			return c.notListed(rte, v)
		}
		v.listed, v.toolUp, v.toolDef = true, up, def
	case mcp.KindPrompt:
		found, jerr := rte.View.HasPrompt(ctx, v.name)
		if jerr != nil {
			v.pinErr = jerr
			return false
		}
		if !found {
			return c.notListed(rte, v)
		}
	}
	return true
}

// notListed answers a target the route does not list for the caller. One
// the policy refuses anyway is left to guard, which answers it the same
// way and records it as the denial it also is (metrics, audit, span).
func (c *Core) notListed(rte *Route, v *Verdict) bool {
	if v.decided && !v.decision.Allowed {
		return true
	}
	v.pinErr = rte.View.Unknown(mcp.Kind(v.kind), v.refused())
	return false
}

// decideStage makes the request's access decision (decide), unless the
// transport made it already for this route's generation (fills r.Verdict).
func decideStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	if v := r.Verdict; v == nil || v.rte != r.Route {
		r.core.decide(ctx, r.Route, r.Msg, nil, &r.own)
		r.Verdict = &r.own
	}
	return next(ctx, r)
}

// admitStage refuses a request whose target resolved to nothing the
// caller may see, or, on a route that hides anything, that the route
// does not list for the caller (listedTarget), as a hidden one is
// refused; a refusal for want of the caller's own credential asks for it.
func admitStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	v := r.Verdict
	r.core.listedTarget(ctx, r.Route, v) // a name not listed for the caller is answered like a hidden one
	r.core.offeredAs(ctx, r.Route, v)    // curate.go
	if v.pinErr != nil {
		if v.pinErr.Code == mcp.CodeURLElicitationRequired { // checking what the caller's own connection lists needs its credential first
			return r.core.elicit(r.Sess, r.Msg, v.pinErr)
		}
		return jsonrpc.NewError(r.Msg.ID, v.pinErr)
	}
	return next(ctx, r)
}

// rewriteStage makes the request name its target as it was resolved for
// the policy (one reading): from here on, what was judged is what the
// upstream gets (r.Msg).
func rewriteStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	r.pm = *r.Msg
	r.pm.Params = r.Verdict.params
	r.Msg = &r.pm
	return next(ctx, r)
}

// enforceStage applies the access policy's decision and the pinning lock
// (enforce).
func enforceStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	if gerr := r.core.enforce(ctx, r.Route, r.Msg, r.Verdict, r.audit); gerr != nil {
		r.obs.refuse(gerr) // denied, not an error
		return jsonrpc.NewError(r.Msg.ID, gerr)
	}
	return next(ctx, r)
}

// limitStage applies the rate limits and takes a concurrency slot for as
// long as the rest of the chain runs (limitVerdict).
func limitStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	release, gerr := r.core.limitVerdict(r.Route, r.Verdict, r.audit)
	if gerr != nil {
		r.obs.refuse(gerr) // rate_limited, not an error
		return jsonrpc.NewError(r.Msg.ID, gerr)
	}
	defer release()
	return next(ctx, r)
}

// enforce applies the access policy and the pinning lock to one routed
// request before anything reaches an upstream. A name the policy hides is
// answered exactly like a name that does not exist, so a caller learns
// nothing about what it may not see (the reason goes to the log).
func (c *Core) enforce(ctx context.Context, rte *Route, msg *jsonrpc.Message, v *Verdict, au *auditEntry) *jsonrpc.Error {
	if v.task || !v.targeted {
		// A task is the principal's own (the host opens its sealed id);
		// a request naming no target is the routing layer's to answer.
		return nil
	}
	g := rte.Gen
	route := rte.Path
	kind, name, p := v.kind, v.name, v.principal
	if pol := g.Policy; pol != nil {
		d := v.decision
		if !d.Allowed {
			c.opts.Metrics.PolicyDecision(route, "deny")
			edge.Logger(ctx, c.log).Info("request denied by policy", zap.String("route", route), zap.String("method", msg.Method),
				zap.String("name", name), zap.String("principal", p.Describe()), zap.String("reason", d.Reason))
			au.refuse(audit.Denied, audit.Rule(d), d.Pattern, d.Reason)
			if len(d.MissingScopes) > 0 {
				return jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "forbidden: %s needs scope %v; obtain a token with it", name, d.MissingScopes)
			}
			if pol.Decide(p, route, kind, name).Listed() {
				// Listed, but a condition on these arguments refuses the
				// call: "unknown" would be a lie about a visible name.
				return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "forbidden: the access policy does not allow this call of %s with these arguments", name)
			}
			return rte.View.Unknown(mcp.Kind(kind), v.refused())
		}
		c.opts.Metrics.PolicyDecision(route, "allow")
		au.allowed(d)
	}
	if kind == policy.KindTool && g.Pinner != nil {
		up, def, listed := v.toolUp, v.toolDef, v.listed
		if !listed && g.Pinner.Mode == config.PinWarn {
			// Warn mode hides nothing (listedTarget did not look): look for the
			// log's sake, and serve what cannot be judged, as a new tool.
			up, def, listed, _ = rte.View.ToolDefs().Lookup(ctx, name)
		}
		switch {
		case listed:
			if !c.pinned(g.Pinner, up, name, def) {
				c.opts.Metrics.PolicyDecision(route, "unpinned")
				au.refuse(audit.Denied, audit.RulePinning, "", "tool definition is "+g.Pinner.Check(up, def).Status.String()+", not approved in the pinning lock")
				return rte.View.Unknown(mcp.Kind(kind), v.refused())
			}
		case g.Pinner.Mode != config.PinWarn:
			// Enforce mode judges every tool: one without a definition the
			// caller's connection lists has none approved (listedTarget
			// refuses it first; this is the backstop).
			c.opts.Metrics.PolicyDecision(route, "unpinned")
			au.refuse(audit.Denied, audit.RulePinning, "", "the tool has no definition to check against the pinning lock")
			return rte.View.Unknown(mcp.Kind(kind), v.refused())
		}
	}
	return nil
}

// limitVerdict applies the rate limits and a concurrency slot to one
// routed request; release must be called once the upstream has answered.
func (c *Core) limitVerdict(rte *Route, v *Verdict, au *auditEntry) (release func(), jerr *jsonrpc.Error) {
	if v.task {
		// Polling a task, holding its result stream or cancelling it costs
		// the upstream like a call: the caller's and the upstream's buckets
		// and a concurrency slot of the upstream the id names.
		return c.limit(rte, v.principal, v.taskUpstream, "", au)
	}
	if !v.targeted || rte.Gen.Limiter == nil {
		return func() {}, nil // malformed: the routing layer answers it
	}
	upstream := v.upstream()
	tool := ""
	if v.kind == policy.KindTool {
		tool = v.name
	}
	return c.limit(rte, v.principal, upstream, tool, au)
}

// limit applies the rate limits and the concurrency slot of upstream (and
// tool, "" for none) to a request of p.
func (c *Core) limit(rte *Route, p policy.Principal, upstream, tool string, au *auditEntry) (release func(), jerr *jsonrpc.Error) {
	if rte.Gen.Limiter == nil {
		return func() {}, nil
	}
	rel, lr := rte.Gen.Limiter.Allow(p, upstream, tool)
	if !lr.Allowed {
		c.opts.Metrics.RateLimited(rte.Path)
		au.refuse(audit.RateLimited, audit.RuleRateLimits, "", lr.String())
		data, _ := json.Marshal(map[string]any{"retryAfterSeconds": lr.RetryAfterSeconds(), "limit": lr.Limit})
		return func() {}, &jsonrpc.Error{Code: mcp.CodeRateLimited, Message: lr.String(), Data: data}
	}
	return rel, nil
}

// ScopeChallenge reports the scopes to challenge for when v refuses a
// request only for missing scopes (and authentication is on, so that a
// token with them can be had), so that the transport can answer 403
// insufficient_scope before any stream starts; the refusal is audited. ok
// is false when the request is not refused that way.
func (c *Core) ScopeChallenge(ctx context.Context, rte *Route, msg *jsonrpc.Message, v *Verdict) (required []string, detail string, ok bool) {
	d := v.decision
	if rte.Gen.Auth == nil || !v.decided || d.Allowed || len(d.MissingScopes) == 0 {
		return nil, "", false
	}
	required = append(rte.Gen.Policy.RequiredScopes(v.name), rte.Scopes...)
	c.auditChallenge(ctx, rte, msg, v)
	return required, v.name + " needs scope " + strings.Join(d.MissingScopes, " "), true
}

// filterList removes what the policy hides from a merged list result, and
// marks the result private for 2026-07-28 clients when lists depend on who
// asks (a shared cache must not serve one principal's list to another).
func (c *Core) filterList(ctx context.Context, rte *Route, sess *Session, method string, res json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	keep := c.listFilter(ctx, rte, method)
	if keep == nil {
		return res, nil
	}
	kind := policy.KindTool
	if l := mcp.Method(method).List; l != nil {
		kind = string(l.Kind) // a skill is judged by its SKILL.md URI, like a resource
	}
	out, err := policy.FilterListFunc(kind, res, keep)
	if err != nil {
		// Never fall back to the unfiltered list.
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: could not apply the access policy to %s: %v", method, err)
	}
	if sess.Stateless() && rte.Gen.PrivateLists {
		if p, err := rawjson.SetString(out, "cacheScope", "private"); err == nil {
			out = p
		}
	}
	return out, nil
}

// listFilter is what a list of method on rte keeps for the caller in ctx
// (policy, and pinning for tools), by item; nil when it keeps everything.
// Tool search filters its results with the same function (toolsearch.go).
func (c *Core) listFilter(ctx context.Context, rte *Route, method string) func(kind, name string, item []byte) bool {
	g := rte.Gen
	pol := g.Policy
	if (pol == nil || pol.AllowsAll()) && g.Pinner == nil {
		return nil // every item is kept: no pass over the list
	}
	if pol == nil {
		pol = allowAll
	}
	lister := pol.Lister(policyPrincipal(ctx), rte.Path) // a condition not on the name: judged once per list
	var defs *catalog.ToolDefs                           // each caller's own connection listed once per list
	if g.Pinner != nil && method == mcp.MethodToolsList {
		defs = rte.View.ToolDefs()
	}
	return func(kind, name string, item []byte) bool {
		if c, err := rte.View.Canonical(ctx, mcp.Kind(kind), name); err == nil {
			name = c // a URI unique on the route is listed as it is
		}
		if !lister.Decide(kind, name).Listed() {
			return false
		}
		if kind != policy.KindTool || g.Pinner == nil || method != mcp.MethodToolsList {
			return true
		}
		// Pins are of the upstream's own definition, as the connection
		// that serves the caller's calls lists it; none: not approved.
		up, def, ok, jerr := defs.Lookup(ctx, name)
		return jerr == nil && ok && c.pinned(g.Pinner, up, name, def)
	}
}

// pinned checks a tool's definition against the pinning lock: in enforce
// mode a new or changed tool is hidden until re-approved; in warn mode it
// is served and logged. Each tool's verdict is logged once per definition
// (its latest only is remembered: pinmemo.go).
func (c *Core) pinned(pinner *policy.Pinner, upstream, name string, def []byte) bool {
	res := pinner.Check(upstream, def)
	if res.Status != policy.PinOK {
		if c.pinWarned.fresh(upstream, name, pinVerdict{res.Status, res.Hash}) {
			c.log.Warn("tool definition is not approved in the pinning lock; run mcpgw pin to approve it",
				zap.String("upstream", upstream), zap.String("tool", name), zap.String("status", res.Status.String()),
				zap.Bool("served", res.Allowed), zap.Error(res.Err))
		}
	}
	return res.Allowed
}

// callArguments is what CEL conditions see as arguments: a tool call's or
// prompt get's arguments; nothing (an empty map) for other requests.
func callArguments(method string, p *mcp.Params) json.RawMessage {
	if p == nil || !mcp.Method(method).Arguments {
		return nil
	}
	return p.Arguments
}

// sameBytes reports whether a and b are the same slice of memory (the
// view p was read from msg.Params itself).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
