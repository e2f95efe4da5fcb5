package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// What the router's core (internal/router/core, its Upstreams) needs of the
// host beside the catalog: upstreams by name, and requests to them. It
// names them and never holds an *Upstream or its client, so that it need
// not import the host.

// Stateful reports whether the named upstream gives each downstream
// session a connection of its own (stateful: true); ok is false when the
// set has no such upstream.
func (h *Host) Stateful(name string) (stateful, ok bool) {
	u := h.Upstream(name)
	if u == nil {
		return false, false
	}
	return u.Stateful(), true
}

// SubscriptionCall sends method with params to the named upstream on the
// connection resource subscriptions use (ClientFor an older caller): the
// session-revision one of a dual-stack upstream, the session's own (ctx's,
// upcall.WithSession) of a stateful one.
func (h *Host) SubscriptionCall(ctx context.Context, name, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	u := h.Upstream(name)
	if u == nil {
		return nil, fmt.Errorf("no upstream %q in the configuration in force", name)
	}
	c, err := u.ClientFor(ctx, true)
	if err != nil {
		return nil, err
	}
	return c.Call(ctx, method, params, upcall.CallOptions{})
}
