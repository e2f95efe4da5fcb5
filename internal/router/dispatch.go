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
func (rt *Router) dispatch(ctx context.Context, sess *Session, msg *jsonrpc.Message, cs *callStream) *jsonrpc.Message {
	view := sess.route.view
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
		// Upstreams are shared: the level is passed on so they emit at least
		// this much, and each session's own threshold is applied here.
		view.Each(ctx, "logging", msg.Method, msg.Params)
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	case mcp.MethodResourcesSubscribe:
		return rt.subscribe(ctx, sess, msg)
	case mcp.MethodResourcesUnsubscribe:
		return rt.unsubscribe(ctx, sess, msg)
	}
	if kind, ok := lists[msg.Method]; ok {
		res, err := view.List(ctx, kind, msg.Params)
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return jsonrpc.NewResult(msg.ID, res)
	}
	if host.Routed(msg.Method) {
		var opts client.CallOptions
		if cs != nil {
			opts = cs.options()
		}
		resp, gerr := view.Forward(ctx, msg.Method, msg.Params, opts)
		if gerr != nil {
			rt.log.Debug("request failed at the gateway", zap.String("method", msg.Method), zap.Int("code", gerr.Code), zap.String("error", gerr.Message))
			return jsonrpc.NewError(msg.ID, gerr)
		}
		// The upstream's answer, with the downstream id put back.
		resp.ID = msg.ID
		return resp
	}
	return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
}
