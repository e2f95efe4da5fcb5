package router

import (
	"context"
	"encoding/json"

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
func (rt *Router) dispatch(ctx context.Context, sess *Session, msg *jsonrpc.Message, progress func(json.RawMessage)) *jsonrpc.Message {
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
		sess.mu.Lock()
		sess.logLevel = p.Level
		sess.mu.Unlock()
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "%s: mcpgw does not offer resource subscriptions yet (the resources capability has no subscribe)", msg.Method))
	}
	if kind, ok := lists[msg.Method]; ok {
		res, err := view.List(ctx, kind, msg.Params)
		if err != nil {
			return jsonrpc.NewError(msg.ID, err)
		}
		return jsonrpc.NewResult(msg.ID, res)
	}
	if host.Routed(msg.Method) {
		resp, gerr := view.Forward(ctx, msg.Method, msg.Params, client.CallOptions{Progress: progress})
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
