package host

import (
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// What the catalog (internal/catalog) needs of the host: the upstream set,
// each upstream's connections and settings, the call accounting a reload
// waits on, and a place to keep what it indexes. The catalog imports host,
// never the other way: the host knows of the catalog's state only that it
// may be told a connection changed (Extension).

// Extension is state another package keeps on an Upstream or on the Host,
// so that it lives exactly as long as they do (the catalog's list index,
// tool definitions and search segment; its task ids).
type Extension any

// ConnectionWatcher is implemented by an upstream's Extension that must
// hear of every change of its connection state (a new connection may offer
// other tools).
type ConnectionWatcher interface{ ConnectionChanged() }

// extSlot holds one Extension, made on first use.
type extSlot struct {
	once sync.Once
	mu   sync.Mutex
	v    Extension
}

func (s *extSlot) get(mk func() Extension) Extension {
	s.once.Do(func() {
		v := mk()
		s.mu.Lock()
		s.v = v
		s.mu.Unlock()
	})
	return s.peek()
}

// peek is the Extension if one was made, else nil.
func (s *extSlot) peek() Extension {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// Extension returns the host's Extension, made by mk on first use (every
// later call returns that one, whatever its mk).
func (h *Host) Extension(mk func() Extension) Extension { return h.ext.get(mk) }

// Options returns the options the host was built with (defaults applied).
func (h *Host) Options() Options { return h.opts }

// Extension returns the upstream's Extension, made by mk on first use.
func (u *Upstream) Extension(mk func() Extension) Extension { return u.ext.get(mk) }

// connectionChanged tells the upstream's Extension, if any, that its
// connection state changed.
func (u *Upstream) connectionChanged() {
	if w, ok := u.ext.peek().(ConnectionWatcher); ok {
		w.ConnectionChanged()
	}
}

// Config is the upstream's configuration (read only).
func (u *Upstream) Config() *config.Upstream { return u.cfg }

// Logger is the upstream's logger.
func (u *Upstream) Logger() *zap.Logger { return u.log }

// Metrics is the upstream's metrics series (nil-safe).
func (u *Upstream) Metrics() *metrics.Upstream { return u.m }

// SharedClient is the upstream's shared connection, or nil while it is
// down; unlike Client it never waits.
func (u *Upstream) SharedClient() *client.Client {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.client
}

// AsksCallersNothing reports whether a stateless (2026-07-28) caller's
// request goes to a connection that cannot send the caller a request
// mid-call: the shared one, speaking a stateless revision (whose input
// requests come back in its results). An acting-for upstream's caller has
// a connection of its own, not known here: false.
func (u *Upstream) AsksCallersNothing() bool {
	if u.ActsForCaller() {
		return false
	}
	c := u.SharedClient()
	return c != nil && c.Modern()
}

// AltClient is the older-revision connection ClientFor made for older
// callers, or nil.
func (u *Upstream) AltClient() *client.Client {
	u.altMu.Lock()
	defer u.altMu.Unlock()
	return u.alt
}

// Capabilities are the capabilities of the latest connection that got
// ready, kept while the upstream is down (nil: it never got ready).
func (u *Upstream) Capabilities() json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.caps
}

// Also for the catalog, each defined next to the code it belongs to:
// Upstream.ClientFor and CallOptions (host.go), Enter and Exit (reload.go),
// ViewCapabilities and CallOnly (capviews.go), ListClient (stateful.go),
// Caller and what reads it (caller.go).

// UpstreamSet is the upstream set in force, read at once: its upstreams by
// name, their names in catalog order and the prefix separator. The map is
// the host's own: read it, never change it.
func (h *Host) UpstreamSet() (byName map[string]*Upstream, names []string, sep string) {
	set := h.current()
	return set.byName, set.names, set.sep
}
