// Package sessions keeps mcpgw's stored downstream sessions — those of the
// Streamable HTTP transport (started by initialize, named by
// Mcp-Session-Id) and of the serial transports (one per connection): the
// store and its idle reaping, the sealed AEAD session ids any replica with
// the key ring can serve (sessiontoken.go), and resumability, the bounded
// log of what was sent on a session's streams that a client replays with
// Last-Event-ID (events.go), shared by a fleet through Redis with the ids
// of DELETEd sessions (redisstore.go).
package sessions

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
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

	// serial: a connection of a serial transport (legacy HTTP+SSE, stdio)
	// is this session; the Streamable HTTP endpoints never serve it.
	serial bool

	// relay, in a fleet, delivers here what other replicas have for the
	// session while its standalone stream is open on this replica.
	relay   Relay
	release func() // of the relay's hold and the outbox's, while the stream is open

	mu         sync.Mutex
	lastUsed   time.Time
	streamOpen bool
	replays    int // open Last-Event-ID replay streams
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
	if s.relay != nil {
		held := s.HoldOutbox()
		unhold := s.relay.Hold(s.ID(), func(b []byte) { s.SendHere(b) })
		s.release = func() { unhold(); held() }
	}
	return true
}

// CloseStream marks the standalone stream closed (and the session used).
func (s *Session) CloseStream() {
	s.mu.Lock()
	if s.release != nil {
		s.release()
		s.release = nil
	}
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

// OpenReplay takes one of the session's max Last-Event-ID replay streams;
// false when all are open. CloseReplay gives it back.
func (s *Session) OpenReplay(max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replays >= max {
		return false
	}
	s.replays++
	return true
}

// CloseReplay ends one replay stream taken with OpenReplay.
func (s *Session) CloseReplay() {
	s.mu.Lock()
	s.replays--
	s.mu.Unlock()
}

// Store holds the live sessions of one router, at most
// sessions.max_sessions of them and sessions.max_sessions_per_principal
// for one authenticated principal.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*Session
	byOwner  map[string]int // live sessions per authenticated principal
	events   EventStore     // the sessions' replay logs
	onEnd    func(*Session) // releases what the session held elsewhere (subscriptions)
	m        *metrics.Metrics

	// sealer, when sessions.key_file is set, makes session ids AEAD tokens
	// any replica with the key ring can serve (sessiontoken.go); ended
	// remembers the tokens ended here until they would expire anyway
	// (ended.go).
	sealer  atomic.Pointer[sealer] // swapped by SetKeys (a rotated key ring)
	ended   endedSet
	revoked Revocations       // the fleet's DELETEd ids (nil: this replica's ended only)
	relay   Relay             // carries server→client messages to the replica holding a stream (nil: none)
	hashes  map[string]string // sealed session ids by sessionHash, to end one revoked elsewhere

	now func() time.Time

	// Stream ids: a random prefix per store and a count, unique within a
	// session across the fleet (each replica's prefix is its own) without
	// reading the system's randomness for every call.
	streamPrefix string
	streams      atomic.Uint64
}

// endedPerSession bounds the ended ids remembered: this many per
// sessions.max_sessions (100,000 by default, ~8 MB).
const endedPerSession = 10

// StoreOptions configure a Store.
type StoreOptions struct {
	// Keys seal session ids (from ParseSessionKeys; none: random ids).
	Keys [][]byte
	// Events keeps the sessions' replay logs.
	Events EventStore
	// Revocations shares DELETEd sealed ids with the fleet (nil: each
	// replica remembers its own).
	Revocations Revocations
	// Relay carries what a session is sent to the replica holding its
	// GET stream (nil: each replica delivers only to its own streams).
	Relay Relay
	// Metrics counts the refusals of the session bounds (nil: none).
	Metrics *metrics.Metrics
	// OnEnd is called once for every session that ends (nil: nothing).
	OnEnd func(*Session)
	// Now is the clock of idle times, token ages and ended ids (nil:
	// time.Now).
	Now func() time.Time
}

// NewStore makes a store.
func NewStore(o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	st := &Store{sessions: make(map[string]*Session), byOwner: map[string]int{}, events: o.Events, revoked: o.Revocations, relay: o.Relay, hashes: map[string]string{}, onEnd: o.OnEnd, m: o.Metrics, now: o.Now, streamPrefix: rand.Text()[:16] + "-"}
	// Keys come from ParseSessionKeys, which checks their sizes.
	sl, _ := newSealer(o.Keys)
	st.sealer.Store(sl)
	if st.revoked != nil && sl != nil {
		st.revoked.Watch(st.revokedElsewhere)
	}
	return st
}

// Create starts a Streamable HTTP session on rt for principal p, or
// refuses with a *limits.Refusal when a bound is full.
func (st *Store) Create(rt *core.Route, version mcp.Revision, caps, info json.RawMessage, p *auth.Principal) (*Session, error) {
	id := newSessionID()
	if sl := st.sealer.Load(); sl != nil {
		id = sl.seal(sessionClaims{Route: rt.Path, Owner: p.Key(), Version: version, Caps: caps, Info: info, Issued: st.now().Unix()})
	}
	return st.add(id, rt, version, caps, info, p, false)
}

// CreateSerial starts the session of one serial connection (legacy
// HTTP+SSE, stdio): its id is random, never sealed — the connection is the
// session, so no other replica, and no Streamable request, can serve it.
func (st *Store) CreateSerial(rt *core.Route, p *auth.Principal) (*Session, error) {
	return st.add(newSessionID(), rt, "", nil, nil, p, true)
}

// add stores a new session with the given id, within the bounds of rt's
// generation.
func (st *Store) add(id string, rt *core.Route, version mcp.Revision, caps, info json.RawMessage, p *auth.Principal, serial bool) (*Session, error) {
	lim := rt.Gen.Limits
	owner := p.Key()
	st.mu.Lock()
	if old := st.sessions[id]; old != nil { // rehydrated concurrently
		st.mu.Unlock()
		return old, nil
	}
	var refused *limits.Refusal
	switch {
	case len(st.sessions) >= lim.MaxSessions:
		refused = &limits.Refusal{Bound: "sessions.max_sessions", Max: lim.MaxSessions, What: "sessions on this gateway replica"}
	case owner != "" && st.byOwner[owner] >= lim.MaxSessionsPerPrincipal:
		// Without auth every caller is one anonymous principal (""):
		// only the global bound can tell apart what cannot be told apart.
		refused = &limits.Refusal{Bound: "sessions.max_sessions_per_principal", Max: lim.MaxSessionsPerPrincipal, What: "sessions for this principal", PerPrincipal: true}
	}
	if refused != nil {
		st.mu.Unlock()
		st.m.LimitRefused(refused.Bound)
		return nil, refused
	}
	s := &Session{
		Session:  core.NewSession(id, rt, version, caps, info, p),
		now:      st.now,
		lastUsed: st.now(),
		serial:   serial,
	}
	if st.relay != nil && !serial {
		relay := st.relay
		s.relay = relay
		s.SetRelay(func(b []byte) bool { return relay.Publish(id, b) })
	}
	s.Events = st.events.Log(id)
	st.sessions[id] = s
	if st.revoked != nil && st.sealer.Load() != nil && !serial {
		st.hashes[sessionHash(id)] = id
	}
	if owner != "" {
		st.byOwner[owner]++
	}
	st.mu.Unlock()
	return s, nil
}

// Get returns the session if it exists and belongs to rt's path (in any
// generation: a request routed by the previous mux just before a reload
// still finds its session).
func (st *Store) Get(id string, rt *core.Route) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	st.mu.Unlock()
	if s == nil || s.serial || s.Route().Path != rt.Path {
		return nil
	}
	return s
}

// SetKeys replaces the key ring (sessions.key_file reread on a reload):
// new sessions are sealed with its first key, and every key in it opens a
// token, so a rotation that puts the new key first and keeps the old
// drops no session. Turning the ring on or off needs a restart (the
// caller refuses it); keys come from ParseSessionKeys.
func (st *Store) SetKeys(keys [][]byte) error {
	if st.sealer.Load() == nil || len(keys) == 0 {
		return errors.New("sessions.key_file cannot be added or removed by a reload; restart mcpgw")
	}
	sl, err := newSealer(keys)
	if err != nil {
		return err
	}
	st.sealer.Store(sl)
	return nil
}

// Rehydrate recreates, on this replica, a session another replica (or this
// one before a restart) created: its id is a token sealed with our key
// ring, for this route, not ended here. The caller checks the principal.
// A *limits.Refusal when a bound is full.
func (st *Store) Rehydrate(id string, rt *core.Route, p *auth.Principal) (*Session, error) {
	sl := st.sealer.Load()
	if sl == nil {
		return nil, nil
	}
	now := st.now()
	st.mu.Lock()
	gone := st.ended.has(id)
	st.mu.Unlock()
	if gone {
		return nil, nil
	}
	c, ok := sl.open(id, now)
	if !ok || c.Route != rt.Path || c.Owner != p.Key() {
		return nil, nil
	}
	// Asked only of a genuine token, so garbage ids cost Redis nothing.
	if st.revoked != nil && st.revoked.Revoked(id) {
		st.mu.Lock()
		st.ended.add(id, now, sessionTokenMaxAge, endedPerSession*rt.Gen.Limits.MaxSessions)
		st.mu.Unlock()
		return nil, nil
	}
	return st.add(id, rt, c.Version, c.Caps, c.Info, p, false)
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
	if s != nil {
		if st.revoked != nil && !s.serial {
			delete(st.hashes, sessionHash(id))
		}
		if o := s.Owner(); o != "" {
			if st.byOwner[o]--; st.byOwner[o] <= 0 {
				delete(st.byOwner, o)
			}
		}
		if st.sealer.Load() != nil && !s.serial {
			// A token stays valid elsewhere until it expires; here it is over.
			st.ended.add(id, st.now(), sessionTokenMaxAge, endedPerSession*s.Route().Gen.Limits.MaxSessions)
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

// Delete ends the session with id because its client said so (DELETE):
// unlike an idle end, which only this replica saw, the id is revoked for
// the whole fleet (Revocations) until its token would expire.
func (st *Store) Delete(id string) *Session {
	if s := st.Lookup(id); s != nil {
		s.MarkEndedByClient()
	}
	s := st.Remove(id)
	if sl := st.sealer.Load(); s != nil && sl != nil && st.revoked != nil && !s.serial {
		if c, ok := sl.open(id, st.now()); ok {
			st.revoked.Revoke(id, time.Unix(c.Issued, 0).Add(sessionTokenMaxAge).Sub(st.now()))
		}
	}
	return s
}

// revokedElsewhere ends, here, the session another replica revoked
// (Revocations.Watch), so a DELETE reaches a copy already in memory.
func (st *Store) revokedElsewhere(hash string) {
	st.mu.Lock()
	id, ok := st.hashes[hash]
	s := st.sessions[id]
	st.mu.Unlock()
	if ok {
		if s != nil {
			s.MarkEndedByClient() // a DELETE on another replica
		}
		st.Remove(id)
	}
}

// Reap ends sessions unused (no request in flight, no stream open) for
// longer than their limit.
func (st *Store) Reap(limit func(*Session) time.Duration) int {
	now := st.now()
	var stale []string
	st.mu.Lock()
	for id, s := range st.sessions {
		idle := limit(s)
		s.mu.Lock()
		if s.lastUsed.Before(now.Add(-idle)) && s.InFlight() == 0 && !s.streamOpen {
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

// NewStreamID names one SSE stream within a session's event ids. The id is
// no secret (a Last-Event-ID is honoured only on its own session), only
// never used twice.
func (s *Store) NewStreamID() string {
	return s.streamPrefix + strconv.FormatUint(s.streams.Add(1), 36)
}

// newSessionID returns 256 random bits in base32 (a session id is a bearer
// value that lives for hours): unguessable and visible-ASCII as the spec
// requires.
func newSessionID() string { return rand.Text() + rand.Text() }
