package host

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// Capability views (exact_capabilities: true). An upstream that initializes
// learns the client's capabilities once, per connection, and the shared
// connection declares everything the gateway can relay (gatewayCapabilities).
// A server that adapts to them — a tool that samples only when it may, or
// refuses without it — would then act as if every caller could be sampled.
// With exact_capabilities, a call from a caller that declares less goes over
// a connection that declares exactly what that caller does: one connection
// per distinct capability set, made on first use, closed with the shared
// one. A 2026-07-28 connection needs none of this: every request carries
// its caller's capabilities.

// gatewayCapabilities is what the shared connection declares: what the
// gateway can honour — roots from config (or the caller), sampling and
// elicitation relayed to a calling client that declared them.
const gatewayCapabilities = `{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":false},"sampling":{}}`

// maxViews bounds the extra connections of one upstream (sampling and the
// elicitation modes make about this many distinct sets); callers beyond it
// share the gateway's connection, with a warning.
const maxViews = 8

// CallOnly keeps the caller's capabilities only for the methods a view
// serves (the method table's CallerView): calls, and the tasks methods,
// which must reach the connection that created their task. Subscriptions
// and settings stay on the shared connection, where their undoing goes too.
func CallOnly(ctx context.Context, method string) context.Context {
	if mcp.Method(method).CallerView {
		return ctx
	}
	if _, ok := CallerCapabilities(ctx); !ok {
		return ctx
	}
	return upcall.WithCallerField(ctx, func(c *Caller) { c.Capabilities = nil })
}

// capViews holds an upstream's per-capability-set connections.
type capViews struct {
	mu     sync.Mutex
	conns  map[string]*client.Client // by the declared capabilities
	warned bool                      // maxViews reached: said once
}

// ViewCapabilities is what a connection serving caller should declare:
// sampling and elicitation as the caller declared them, roots as the
// gateway answers them (from config, or the caller's with forward_roots).
func (u *Upstream) ViewCapabilities(caller json.RawMessage) string {
	caps := map[string]any{} // decoded: json.Marshal sorts keys at every level, so equal sets give equal strings
	add := func(key string, v json.RawMessage) {
		var x any
		if json.Unmarshal(v, &x) == nil && x != nil {
			caps[key] = x
		}
	}
	for _, k := range []string{"sampling", "elicitation"} {
		if v, ok := rawjson.Get(caller, k); ok {
			add(k, v)
		}
	}
	if !u.cfg.ForwardRoots {
		caps["roots"] = map[string]any{"listChanged": false}
	} else if v, ok := rawjson.Get(caller, "roots"); ok {
		add("roots", v)
	}
	b, _ := json.Marshal(caps)
	return string(b)
}

// viewClient returns the connection for a caller with capabilities caller
// when it differs from the shared one's; nil when shared will do.
func (u *Upstream) viewClient(ctx context.Context, caller json.RawMessage) (*client.Client, error) {
	want := u.ViewCapabilities(caller)
	if want == gatewayCapabilities {
		return nil, nil
	}
	v := &u.views
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.conns[want]; c != nil {
		select {
		case <-c.Done():
			_ = c.Close()
			delete(v.conns, want)
		default:
			return c, nil
		}
	}
	if len(v.conns) >= maxViews {
		if !v.warned {
			v.warned = true
			u.log.Warn("too many distinct client capability sets for exact_capabilities; further ones share the gateway's connection",
				zap.Int("views", len(v.conns)), zap.String("capabilities", want))
		}
		return nil, nil
	}
	c, err := u.dialCaps(ctx, "legacy", json.RawMessage(want))
	if err != nil {
		return nil, &UnavailableError{Upstream: u.name, State: StateDown, Cause: err}
	}
	if v.conns == nil {
		v.conns = map[string]*client.Client{}
	}
	v.conns[want] = c
	u.log.Debug("opened a connection for a client capability set", zap.String("capabilities", want), zap.Int("views", len(v.conns)))
	return c, nil
}

// takeViews empties the views and returns their connections for closing.
func (u *Upstream) takeViews() []*client.Client {
	u.views.mu.Lock()
	defer u.views.mu.Unlock()
	cs := slices.Collect(maps.Values(u.views.conns))
	u.views.conns = nil
	return cs
}

// Views is how many capability-set connections the upstream holds now.
func (u *Upstream) Views() int {
	u.views.mu.Lock()
	defer u.views.mu.Unlock()
	return len(u.views.conns)
}
