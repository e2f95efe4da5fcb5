package core

import (
	"encoding/json"
	"slices"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Filter is what the listen stream opted in to (nil for other sessions).
func (s *Session) Filter() *mcp.ListenFilter { return s.filter }

// AddListener registers an open listen stream for list changes.
func (c *Core) AddListener(s *Session) {
	c.listenersMu.Lock()
	c.listeners[s] = true
	c.listenersMu.Unlock()
}

// RemoveListener forgets a listen stream.
func (c *Core) RemoveListener(s *Session) {
	c.listenersMu.Lock()
	delete(c.listeners, s)
	c.listenersMu.Unlock()
}

// EachListener calls f for every open listen stream, with the listeners
// locked: f must not add or remove one.
func (c *Core) EachListener(f func(*Session)) {
	c.listenersMu.Lock()
	defer c.listenersMu.Unlock()
	for s := range c.listeners {
		f(s)
	}
}

// listenersFor returns the listen streams that want method from one of ups.
func (c *Core) listenersFor(method string, ups map[string]bool) []*Session {
	c.listenersMu.Lock()
	defer c.listenersMu.Unlock()
	var out []*Session
	for s := range c.listeners {
		if s.filter.Wants(method) && slices.ContainsFunc(s.Route().View.Upstreams(), func(u string) bool { return ups[u] }) {
			out = append(out, s)
		}
	}
	return out
}

// Tag adds the session's subscription id to a notification's params, for
// delivery on a subscriptions/listen stream; legacy sessions are unchanged.
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
