package core

import (
	"context"
	"encoding/json"
	"slices"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// Handle answers one request of an initialized session. It always returns
// exactly one response: the upstream's, or a gateway error naming the cause.
// v is the access decision the transport already asked for (Decide) on a
// routed request; nil, or one made for another route generation, and
// Handle decides itself. What the upstream sends during a routed call goes
// to cs (nil: the caller keeps no stream for it). The request passes its
// route's chain of stages (chain.go).
func (c *Core) Handle(ctx context.Context, sess *Session, msg *jsonrpc.Message, v *Verdict, cs *CallStream) *jsonrpc.Message {
	rte := c.routeOf(sess) // one generation's route, view and policy for the whole request
	// The Request is kept between requests (a stage keeps nothing of it
	// once the chain has answered): a call costs no allocation for it.
	r, _ := c.requests.Get().(*Request)
	if r == nil {
		r = new(Request)
	}
	*r = Request{core: c, Sess: sess, Route: rte, Msg: msg, Verdict: v, Stream: cs}
	resp := rte.serve(ctx, r)
	*r = Request{} // nothing of this request stays reachable from the pool
	c.requests.Put(r)
	return resp
}

// observeStage counts the request and makes its server span
// (telemetry.go), and reports its answer (fills r.obs).
func observeStage(ctx context.Context, r *Request, next Next) (resp *jsonrpc.Message) {
	c := r.core
	ctx, r.obs = c.observe(ctx, r.Sess, r.Route, r.Msg, r.Stream)
	defer func() { c.report(r.Route, r.Msg, resp, &r.obs) }()
	return next(ctx, r)
}

// containStage makes the request one that Cut can end (shutdown.go),
// answers a skills/get or resources/directory/read not found as invalid
// params, and puts the caller in ctx for the host and the catalog.
func containStage(ctx context.Context, r *Request, next Next) (resp *jsonrpc.Message) {
	c, msg := r.core, r.Msg
	if cs := r.Stream; cs == nil || cs.park == nil {
		// A bridged call's context derives from c.ctx, which Cut cancels
		// itself: registering it too would be a context and a map entry
		// per call for nothing.
		var cancel context.CancelCauseFunc
		var cutID uint64
		ctx, cancel, cutID = c.cuttable(ctx) // shutdown.go
		defer c.uncut(cutID, cancel)
	}
	defer func() {
		if cut := cutAnswer(ctx, msg.ID); cut != nil && (resp == nil || resp.Error != nil) {
			resp = cut // a result that made it stays
		}
	}()
	if mcp.NotFoundIsInvalidParams(msg.Method) {
		defer func() {
			// skills/get and resources/directory/read answer an unknown
			// (or hidden) URI with -32602 on every revision (SEP-2640),
			// whether the gateway or a legacy upstream said -32002.
			if resp != nil && resp.Error != nil && resp.Error.Code == mcp.CodeResourceNotFound {
				e := *resp.Error
				e.Code = jsonrpc.CodeInvalidParams
				resp.Error = &e
			}
		}()
	}
	// The caller, for the host and the catalog: its own capabilities for
	// exact_capabilities, its session's connection on a stateful upstream,
	// and the tasks it creates and uses are its own (catalog/tasks.go).
	ctx = upcall.WithCaller(ctx, &r.Sess.caller)
	return next(ctx, r)
}

// localStage answers what the gateway serves itself — ping,
// logging/setLevel, the merged lists, a session's tasks/list, a search
// route's own search tool — and unknown methods; routed requests go on
// (a search route's call_tool as the call it names: r.Msg).
func localStage(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
	c, sess, rte, msg := r.core, r.Sess, r.Route, r.Msg
	view := rte.View
	switch msg.Method {
	case mcp.MethodPing:
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	case mcp.MethodLoggingSetLevel:
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(msg.Params, &p) != nil || p.Level == "" {
			return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "logging/setLevel: params.level is required"))
		}
		if !slices.Contains(logLevels, p.Level) {
			return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "logging/setLevel: unknown level %q; use one of %v", p.Level, logLevels))
		}
		sess.mu.Lock()
		sess.logLevel = p.Level
		sess.mu.Unlock()
		c.loosenUpstreams(ctx, view, p.Level)
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	if msg.Method == mcp.MethodToolsList && c.searchMode(ctx, rte) { // toolsearch.go
		res, err := c.searchList(ctx, rte, sess)
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return sessionResult(sess, jsonrpc.NewResult(msg.ID, res))
	}
	if kind, ok := catalog.ListKindOf(msg.Method); ok {
		res, err := view.List(ctx, kind, msg.Params)
		if err == nil {
			res, err = c.filterList(ctx, rte, sess, msg.Method, res)
		}
		if err == nil && rte.Gen.Intercept != nil {
			res = c.interceptList(ctx, rte, res) // intercept.go
		}
		if err != nil && err.Code == mcp.CodeURLElicitationRequired {
			return c.elicit(sess, msg, err) // elicitations.go: nothing listed until the caller authorizes
		}
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return sessionResult(sess, jsonrpc.NewResult(msg.ID, res))
	}
	if msg.Method == mcp.MethodTasksList && !sess.Stateless() { // 2025-11-25 only: the caller's tasks, merged
		// It asks every upstream of the route: the caller's own bucket
		// applies, as to the other tasks methods (guard.go).
		release, gerr := c.limit(rte, policyPrincipal(ctx), "", "", nil)
		if gerr != nil {
			r.obs.refuse(gerr)
			return jsonrpc.NewError(msg.ID, gerr)
		}
		defer release()
		res, err := view.ListTasks(ctx, msg.Params)
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return jsonrpc.NewResult(msg.ID, res)
	}
	if !mcp.Routed(msg.Method) {
		return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
	}
	if sess.Stateless() && slices.Contains(logLevels, sess.logLevel) {
		// A 2026-07-28 request's _meta level, like a session's
		// logging/setLevel (a stateless upstream takes the request's own).
		c.loosenUpstreams(ctx, view, sess.logLevel)
	}
	switch metaName(rte, msg) { // the gateway's own tools on a search route (toolsearch.go)
	case metaSearch:
		return sessionResult(sess, c.searchTools(ctx, rte, msg))
	case metaCall:
		inner, jerr := unwrapCall(rte, msg) // from here on, the direct call it names
		if jerr != nil {
			return jsonrpc.NewError(msg.ID, jerr)
		}
		r.Msg = inner
	}
	return next(ctx, r)
}

// forwardStage ends the chain: the request goes to the upstream its
// target names (a resource subscription is the core's to keep), and the
// upstream's answer comes back with the downstream id.
func forwardStage(ctx context.Context, r *Request) *jsonrpc.Message {
	c, sess, rte, msg, v := r.core, r.Sess, r.Route, r.Msg, r.Verdict
	switch msg.Method {
	case mcp.MethodResourcesSubscribe:
		return c.subscribe(ctx, sess, msg)
	case mcp.MethodResourcesUnsubscribe:
		return c.unsubscribe(ctx, sess, msg)
	}
	view := rte.View
	opts := upcall.CallOptions{PassInputRequired: sess.Stateless()}
	if cs := r.Stream; cs != nil {
		opts = cs.options()
	}
	opts.View = v.req.ForwardView() // what the client edits the params' _meta by, not reading them again
	resp, gerr := view.ForwardResolved(ctx, msg.Method, msg.Params, v.tgt, opts)
	if gerr != nil {
		edge.Logger(ctx, c.log).Debug("request failed at the gateway", zap.String("method", msg.Method), zap.Int("code", gerr.Code), zap.String("error", gerr.Message))
		if gerr.Code == mcp.CodeURLElicitationRequired { // elicitations.go
			return c.elicit(sess, msg, gerr)
		}
		return jsonrpc.NewError(msg.ID, gerr)
	}
	if resp.Error != nil && resp.Error.Code == mcp.CodeResourceNotFound && v.kind == string(mcp.KindResource) && routeHides(rte) {
		// A URI no list shows cannot be judged before it is read: the
		// upstream's not-found gets the gateway's own words, those a
		// hidden resource gets, so the two cannot be told apart.
		resp.Error = view.Unknown(mcp.KindResource, v.external)
	}
	// The upstream's answer, with the downstream id put back.
	resp.ID = msg.ID
	return sessionResult(sess, resp)
}

// loosenUpstreams asks the route's upstreams that initialize for level
// where it is more verbose than what they were last asked. Upstreams are
// shared: each gets the most verbose level any caller wanted (never
// tightened by a later, stricter one), and each caller's own threshold is
// applied at the gateway.
func (c *Core) loosenUpstreams(ctx context.Context, view *catalog.View, level string) {
	var loosen []string
	for _, u := range view.Upstreams() {
		if c.loosenLevel(u, level) {
			loosen = append(loosen, u)
		}
	}
	if len(loosen) == 0 {
		return // the common case: nothing to send, nothing to encode
	}
	params, _ := json.Marshal(map[string]string{"level": level})
	view.Each(ctx, "logging", mcp.MethodLoggingSetLevel, params, func(upstream string) bool { return slices.Contains(loosen, upstream) })
}

// loosenLevel records that upstream must emit at least level and reports
// whether that is more verbose than what it was last asked for.
func (c *Core) loosenLevel(upstream, level string) bool {
	c.levelsMu.Lock()
	defer c.levelsMu.Unlock()
	cur, ok := c.levels[upstream]
	if ok && slices.Index(logLevels, level) >= slices.Index(logLevels, cur) {
		return false
	}
	c.levels[upstream] = level
	return true
}

// routeOf is the route a stored session's request is served by: its route
// in the generation in force. A session created by the previous
// generation's mux while a reload swapped generations is moved here (or
// ended, when its route is gone: nil).
func (c *Core) routeOf(sess *Session) *Route {
	rte := sess.Route()
	if sess.Stateless() {
		return rte // lives for one request of the generation that routed it
	}
	cur := c.opts.Current()
	if rte.Gen == cur {
		return rte
	}
	next := cur.ByPath[rte.Path]
	if next == nil {
		c.opts.Sessions.Remove(sess.id)
		return rte // the session's context is cancelled: the request ends
	}
	sess.SetRoute(next)
	return next
}

// Notification takes a client notification of a session.
func (c *Core) Notification(sess *Session, msg *jsonrpc.Message) {
	switch msg.Method {
	case mcp.NotificationCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil && p.RequestID != nil {
			sess.cancelRequest(p.RequestID)
		}
	}
}

// ForgetLevels forgets the log levels asked of upstreams: their new
// connections (a reload replaced them) have not been asked yet.
func (c *Core) ForgetLevels(upstreams []string) {
	c.levelsMu.Lock()
	for _, u := range upstreams {
		delete(c.levels, u)
	}
	c.levelsMu.Unlock()
}
