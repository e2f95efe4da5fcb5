package catalog

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The gateway is a 2026-07-28 client of its stateless upstreams, so it
// mirrors x-mcp-header arguments into Mcp-Param-* headers itself (SEP-2243),
// whatever revision the caller speaks: a legacy caller has never heard of
// them, and a 2026-07-28 caller's own headers were checked against the same
// definition by the router. A tool whose annotations are invalid is left
// out of the lists and refused, as a client must.

// paramHeaders returns ctx carrying exactly the Mcp-Param-* headers a
// tools/call of tool name (the upstream's own name) needs, or an error when
// the tool's annotations are invalid. A tool the gateway does not know is
// left to the upstream to answer.
func (u *upstreamState) paramHeaders(ctx context.Context, name string, params json.RawMessage) (context.Context, *jsonrpc.Error) {
	def, ok := u.toolDef(ctx, name)
	if !ok {
		return ctx, nil
	}
	schema, _ := rawjson.Get(def, "inputSchema")
	args, _ := rawjson.Get(params, "arguments")
	h, err := mcp.ParamHeaders(schema, args)
	if err != nil {
		return ctx, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"tool %q of upstream %q cannot be called: its inputSchema has an invalid x-mcp-header annotation (%v); the upstream's tool definition must be fixed", name, u.Name(), err)
	}
	return client.WithHeaders(ctx, h), nil
}

// dropInvalidHeaderTools removes from a stateless upstream's tools/list
// items the tools whose x-mcp-header annotations are invalid, each named in
// the log. Every other item stays as the upstream sent it.
func (u *upstreamState) dropInvalidHeaderTools(items [][]byte) [][]byte {
	kept := items[:0:0]
	for _, it := range items {
		schema, _ := rawjson.Get(it, "inputSchema")
		if _, err := mcp.ValidHeaderParams(schema); err != nil {
			name, _ := rawjson.GetString(it, "name")
			u.Logger().Warn("leaving out a tool whose x-mcp-header annotation is invalid (clients must not call it)", zap.String("tool", name), zap.Error(err))
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == len(items) {
		return items
	}
	return kept
}
