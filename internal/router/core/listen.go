package core

import (
	"encoding/json"
	"slices"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// A listen stream (subscriptions/listen) is the fourth lifetime a Session
// serves: a stateless request's session, registered here for as long as
// its stream is open, with the filter it opted in to. Everything the core
// sends it outside calls carries its subscription id (Tag).

// AddListener registers an open listen stream and what it opted in to,
// or refuses it when its principal has
// sessions.max_listen_streams_per_principal open already (authenticated
// principals only, as for the other shares).
func (c *Core) AddListener(s *Session, f *mcp.ListenFilter) *jsonrpc.Error {
	max := subscriptionLimits(s).listenPerPrincipal
	c.listenersMu.Lock()
	if _, again := c.listeners[s]; !again && s.owner != "" {
		if c.listenersBy[s.owner] >= max {
			c.listenersMu.Unlock()
			return c.refuse(&limits.Refusal{Bound: "sessions.max_listen_streams_per_principal", Max: max, What: "subscriptions/listen streams open for this principal", PerPrincipal: true, RetryAfter: 1})
		}
		c.listenersBy[s.owner]++
	}
	c.listeners[s] = f
	c.listenersMu.Unlock()
	return nil
}

// RemoveListener forgets a listen stream.
func (c *Core) RemoveListener(s *Session) {
	c.listenersMu.Lock()
	if _, ok := c.listeners[s]; ok && s.owner != "" {
		if n := c.listenersBy[s.owner] - 1; n > 0 {
			c.listenersBy[s.owner] = n
		} else {
			delete(c.listenersBy, s.owner)
		}
	}
	delete(c.listeners, s)
	c.listenersMu.Unlock()
}

// EachListener calls f for every open listen stream, with the listeners
// locked: f must not add or remove one.
func (c *Core) EachListener(f func(*Session, *mcp.ListenFilter)) {
	c.listenersMu.Lock()
	defer c.listenersMu.Unlock()
	for s, filter := range c.listeners {
		f(s, filter)
	}
}

// listenersFor returns the listen streams that want method from one of ups.
func (c *Core) listenersFor(method string, ups map[string]bool) []*Session {
	c.listenersMu.Lock()
	defer c.listenersMu.Unlock()
	var out []*Session
	for s, f := range c.listeners {
		if f.Wants(method) && slices.ContainsFunc(s.Route().View.Upstreams(), func(u string) bool { return ups[u] }) {
			out = append(out, s)
		}
	}
	return out
}

// Tag adds the session's subscription id to a notification's params, for
// delivery on a subscriptions/listen stream; other sessions' are unchanged.
func (s *Session) Tag(params json.RawMessage) json.RawMessage {
	if s.subscriptionID == nil {
		return params
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	meta, _ := rawjson.Get(params, "_meta")
	meta, err := rawjson.Set(meta, mcp.MetaSubscriptionID, s.subscriptionID)
	if err != nil {
		meta, _ = json.Marshal(map[string]json.RawMessage{mcp.MetaSubscriptionID: s.subscriptionID})
	}
	out, err := rawjson.Set(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}
