// Package sessions keeps mcpgw's stored downstream sessions — those of the
// Streamable HTTP transport (started by initialize, named by
// Mcp-Session-Id) and of the serial transports (one per connection): the
// store and its idle reaping, the sealed AEAD session ids any replica with
// the key ring can serve (sessiontoken.go), and resumability, the bounded
// log of what was sent on a session's streams that a client replays with
// Last-Event-ID (events.go).
package sessions

import (
	"crypto/rand"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// Session is one stored downstream session: the core's state of it, and
// what only a stored session has — when it was last used, whether a
// stream holds it open, and the replay log of its streams.
type Session struct {
	*core.Session
	now func() time.Time // the store's clock

	// Events keeps what was sent on the session's streams for Last-Event-ID.
	Events EventLog

	mu         sync.Mutex
	lastUsed   time.Time
	streamOpen bool
}

// Touch records that the session was used now.
func (s *Session) Touch() {
	s.mu.Lock()
	s.lastUsed = s.now()
	s.mu.Unlock()
}

// OpenStream marks the session's one standalone stream open; false when
// one already is.
func (s *Session) OpenStream() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streamOpen {
		return false
	}
	s.streamOpen = true
	return true
}

// CloseStream marks the standalone stream closed (and the session used).
func (s *Session) CloseStream() {
	s.mu.Lock()
	s.streamOpen = false
	s.lastUsed = s.now()
	s.mu.Unlock()
}

// StreamOpen reports whether a standalone stream holds the session open.
func (s *Session) StreamOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamOpen
}

// Store holds the live sessions of one router.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*Session
	events   EventStore     // the sessions' replay logs
	onEnd    func(*Session) // releases what the session held elsewhere (subscriptions)

	// sealer, when sessions.key_file is set, makes session ids AEAD tokens
	// any replica with the key ring can serve (sessiontoken.go); ended
	// remembers the tokens ended here until they would expire anyway.
	sealer *sealer
	ended  map[string]time.Time

	now func() time.Time
}

// StoreOptions configure a Store.
type StoreOptions struct {
	// Keys seal session ids (from ParseSessionKeys; none: random ids).
	Keys [][]byte
	// Events keeps the sessions' replay logs.
	Events EventStore
	// OnEnd is called once for every session that ends (nil: nothing).
	OnEnd func(*Session)
	// Now is the clock of idle times and token ages (nil: time.Now).
	Now func() time.Time
}

// NewStore makes a store.
func NewStore(o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	st := &Store{sessions: make(map[string]*Session), events: o.Events, onEnd: o.OnEnd, now: o.Now}
	// Keys come from ParseSessionKeys, which checks their sizes.
	st.sealer, _ = newSealer(o.Keys)
	return st
}

// Create starts a session on rt for principal p.
func (st *Store) Create(rt *core.Route, version mcp.Revision, caps, info json.RawMessage, p *auth.Principal) *Session {
	id := newSessionID()
	if st.sealer != nil {
		id = st.sealer.seal(sessionClaims{Route: rt.Path, Owner: p.Key(), Version: version, Caps: caps, Info: info, Issued: st.now().Unix()})
	}
	return st.add(id, rt, version, caps, info, p)
}

// add stores a new session with the given id.
func (st *Store) add(id string, rt *core.Route, version mcp.Revision, caps, info json.RawMessage, p *auth.Principal) *Session {
	s := &Session{
		Session:  core.NewSession(id, rt, version, caps, info, p),
		now:      st.now,
		lastUsed: st.now(),
	}
	st.mu.Lock()
	if old := st.sessions[id]; old != nil { // rehydrated concurrently
		st.mu.Unlock()
		s.End()
		return old
	}
	s.Events = st.events.Log(id)
	st.sessions[id] = s
	st.mu.Unlock()
	return s
}

// Get returns the session if it exists and belongs to rt's path (in any
// generation: a request routed by the previous mux just before a reload
// still finds its session).
func (st *Store) Get(id string, rt *core.Route) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	st.mu.Unlock()
	if s == nil || s.Route().Path != rt.Path {
		return nil
	}
	return s
}

// Rehydrate recreates, on this replica, a session another replica (or this
// one before a restart) created: its id is a token sealed with our key
// ring, for this route, not ended here. The caller checks the principal.
func (st *Store) Rehydrate(id string, rt *core.Route, p *auth.Principal) *Session {
	if st.sealer == nil {
		return nil
	}
	now := st.now()
	st.mu.Lock()
	_, gone := st.ended[id]
	st.mu.Unlock()
	if gone {
		return nil
	}
	c, ok := st.sealer.open(id, now)
	if !ok || c.Route != rt.Path || c.Owner != p.Key() {
		return nil
	}
	return st.add(id, rt, c.Version, c.Caps, c.Info, p)
}

// Lookup returns the session with id, whatever its route.
func (st *Store) Lookup(id string) *Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sessions[id]
}

// Remove ends the session with id.
func (st *Store) Remove(id string) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	delete(st.sessions, id)
	if st.sealer != nil {
		// A token stays valid elsewhere until it expires; here it is over.
		if st.ended == nil {
			st.ended = map[string]time.Time{}
		}
		now := st.now()
		st.ended[id] = now
		for k, at := range st.ended {
			if now.Sub(at) > sessionTokenMaxAge {
				delete(st.ended, k)
			}
		}
	}
	st.mu.Unlock()
	if s != nil {
		s.End()
		st.events.Drop(id)
		if st.onEnd != nil {
			st.onEnd(s)
		}
	}
	return s
}

// Reap ends sessions idle for longer than idle.
func (st *Store) Reap(idle time.Duration) int {
	cutoff := st.now().Add(-idle)
	var stale []string
	st.mu.Lock()
	for id, s := range st.sessions {
		s.mu.Lock()
		if s.lastUsed.Before(cutoff) && s.InFlight() == 0 && !s.streamOpen {
			stale = append(stale, id)
		}
		s.mu.Unlock()
	}
	st.mu.Unlock()
	for _, id := range stale {
		st.Remove(id)
	}
	return len(stale)
}

// All returns every live session.
func (st *Store) All() []*Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		out = append(out, s)
	}
	return out
}

// CloseAll ends every session.
func (st *Store) CloseAll() {
	for _, s := range st.All() {
		st.Remove(s.ID())
	}
}

// NewStreamID names one SSE stream within a session's event ids.
func NewStreamID() string { return rand.Text() }

// newSessionID returns 256 random bits in base32 (a session id is a bearer
// value that lives for hours): unguessable and visible-ASCII as the spec
// requires.
func newSessionID() string { return rand.Text() + rand.Text() }
