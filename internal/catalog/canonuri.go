package catalog

import (
	"context"
	"errors"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/mcp/uri"
)

// readsResource reports whether t names a resource to read or watch
// (params.uri of resources/read, subscribe, unsubscribe), as opposed to a
// completion's ref.uri, which names a URI template and reads nothing.
func readsResource(t mcp.Target) bool {
	return t.Kind == mcp.KindResource && len(t.Path) == 1
}

// checkURI refuses a resource URI that is not in canonical form
// (internal/mcp/uri), so that what the policy judges is what the upstream
// reads: an upstream's URL parser would remove dot-segments, decode
// escapes or fold case that the policy's globs would not (invariant 9).
// The request is refused, not rewritten, so the bytes forwarded stay the
// client's (invariant 1); the error names the form to send, in the form
// the client used (sent is the URI as sent, r its resolution).
//
// A URI the upstream itself lists exactly as sent passes (invariant 8:
// what the gateway hands out must work): policy and lists judge that very
// string. It passes only where the caller may see it, so that the answer
// for a hidden one is the same as for one nobody lists.
func (v *View) checkURI(ctx context.Context, sent string, r resolution, visible Visible) *jsonrpc.Error {
	c, err := uri.Canonical(r.internal)
	if err == nil {
		return nil
	}
	if u := v.ups[r.upstream]; u != nil {
		if l := u.listing(ctx, Resources, true); l != nil && l.set[r.internal] &&
			(visible == nil || visible(mcp.KindResource, v.canonical(mcp.KindResource, r))) {
			return nil
		}
	}
	var ue *uri.Error
	if !errors.As(err, &ue) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "resource URI %q: %v", sent, err)
	}
	// `resource URI "<sent>" has ...`: the problem names the URI.
	problem := strings.TrimPrefix(ue.Problem, "resource URI ")
	if ue.Canonical == "" {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "resource URI %q %s", sent, problem)
	}
	// The form the client used stays: bare, "<uri>?mcpgw=<upstream>" or
	// "<upstream>+<uri>".
	send := c
	if up, _, ok := parseExplicit(sent); ok && up == r.upstream {
		send = explicitURI(up, c)
	} else if prefix, ok := strings.CutSuffix(sent, r.internal); ok {
		send = prefix + c
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "resource URI %q %s: send %s", sent, problem, send)
}
