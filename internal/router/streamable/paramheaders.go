package streamable

import (
	"context"
	"net/http"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// 2026-07-28 lets a tool mark input parameters with x-mcp-header; clients
// mirror their values into Mcp-Param-{Name} headers so that intermediaries
// can route on them, and every server that reads the body must check the
// headers against it (mcp.CheckParamHeaders). The gateway reads the body,
// so it checks — whatever the upstream's transport (a stdio upstream never
// sees the headers).

// checkParamHeaders validates a stateless tools/call's Mcp-Param-* headers
// against its arguments. It returns nil when they agree (or the tool has no
// annotations, or is unknown: the upstream answers that).
func checkParamHeaders(ctx context.Context, sess *core.Session, p *mcp.Params, h http.Header) *jsonrpc.Error {
	schema, ok := sess.Route().View.ToolSchema(ctx, p.Name) // a tools/call's target is its name
	if !ok {
		return nil
	}
	return mcp.CheckParamHeaders(schema, p.Arguments, h)
}
