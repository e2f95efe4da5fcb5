package router

import (
	"context"
	"encoding/json"
	"slices"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// lists maps each merged list method to its kind.
var lists = map[string]host.ListKind{
	mcp.MethodToolsList:              host.Tools,
	mcp.MethodPromptsList:            host.Prompts,
	mcp.MethodResourcesList:          host.Resources,
	mcp.MethodResourcesTemplatesList: host.ResourceTemplates,
}

// dispatch answers one request of an initialized session. It always returns
// exactly one response: the upstream's, or a gateway error naming the cause.
func (rt *Router) dispatch(ctx context.Context, sess *Session, msg *jsonrpc.Message, cs *callStream) (resp *jsonrpc.Message) {
	rte := rt.routeOf(sess)                                                      // one generation's route, view and policy for the whole request (reload.go)
	defer func() { rt.opts.Metrics.Request(rte.path, msg.Method, resp.Error) }() // metrics
	ctx = host.WithCallerCapabilities(ctx, sess.caps)                            // exact_capabilities: the upstream sees the caller's own
	ctx = host.WithSession(ctx, sess.id)                                         // stateful upstreams use this session's own connection
	// The tasks it creates and uses are its own (host/tasks.go).
	ctx = host.WithTaskOwner(ctx, host.TaskOwner{Route: rte.path, Principal: sess.owner, Session: sess.id})
	view := rte.view
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
		rt.loosenUpstreams(ctx, view, p.Level)
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	if kind, ok := lists[msg.Method]; ok {
		res, err := view.List(ctx, kind, msg.Params)
		if err == nil {
			res, err = rt.filterList(ctx, rte, sess, msg.Method, res)
		}
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return legacyResult(sess, jsonrpc.NewResult(msg.ID, res))
	}
	if msg.Method == mcp.MethodTasksList && !sess.stateless { // 2025-11-25 only: the caller's tasks, merged
		res, err := view.ListTasks(ctx, msg.Params)
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return jsonrpc.NewResult(msg.ID, res)
	}
	if !mcp.Routed(msg.Method) {
		return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
	}
	if sess.stateless && slices.Contains(logLevels, sess.logLevel) {
		// A 2026-07-28 request's _meta level, like a legacy session's
		// logging/setLevel (a stateless upstream takes the request's own).
		rt.loosenUpstreams(ctx, view, sess.logLevel)
	}
	au := rt.auditBegin(ctx, rte, msg) // audit.go
	defer func() { au.end(resp) }()
	release, _, gerr := rt.guard(ctx, rte, msg, au)
	if gerr != nil {
		return jsonrpc.NewError(msg.ID, gerr)
	}
	defer release()
	switch msg.Method {
	case mcp.MethodResourcesSubscribe:
		return rt.subscribe(ctx, sess, msg)
	case mcp.MethodResourcesUnsubscribe:
		return rt.unsubscribe(ctx, sess, msg)
	}
	{
		opts := client.CallOptions{PassInputRequired: sess.stateless}
		if cs != nil {
			opts = cs.options()
		}
		resp, gerr := view.Forward(ctx, msg.Method, msg.Params, opts)
		if gerr != nil {
			rt.logger(ctx).Debug("request failed at the gateway", zap.String("method", msg.Method), zap.Int("code", gerr.Code), zap.String("error", gerr.Message))
			return jsonrpc.NewError(msg.ID, gerr)
		}
		// The upstream's answer, with the downstream id put back.
		resp.ID = msg.ID
		return legacyResult(sess, resp)
	}
}

// legacyResult removes what only 2026-07-28 results carry (resultType) from
// a result bound for a session of an older revision.
func legacyResult(sess *Session, resp *jsonrpc.Message) *jsonrpc.Message {
	if sess.stateless || resp.Error != nil {
		return resp
	}
	if _, ok := rawjson.Get(resp.Result, "resultType"); ok {
		if res, err := rawjson.Delete(resp.Result, "resultType"); err == nil {
			resp.Result = res
		}
	}
	// A 2026-07-28 upstream's per-hop keys (its serverInfo, say) describe
	// its hop; a legacy session's server is the gateway, named at initialize.
	if res, err := mcp.WithoutHopMeta(resp.Result); err == nil {
		resp.Result = res
	}
	return resp
}

// loosenUpstreams asks the route's upstreams that initialize for level
// where it is more verbose than what they were last asked. Upstreams are
// shared: each gets the most verbose level any caller wanted (never
// tightened by a later, stricter one), and each caller's own threshold is
// applied at the gateway.
func (rt *Router) loosenUpstreams(ctx context.Context, view *host.View, level string) {
	var loosen []string
	for _, u := range view.Upstreams() {
		if rt.loosenLevel(u, level) {
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
func (rt *Router) loosenLevel(upstream, level string) bool {
	rt.levelsMu.Lock()
	defer rt.levelsMu.Unlock()
	cur, ok := rt.levels[upstream]
	if ok && slices.Index(logLevels, level) >= slices.Index(logLevels, cur) {
		return false
	}
	rt.levels[upstream] = level
	return true
}
