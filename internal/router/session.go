package router

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Session is one downstream Streamable HTTP session, created by initialize.
type Session struct {
	id      string
	rte     atomic.Pointer[route] // re-resolved by a reload (route, setRoute)
	version string                // negotiated protocol revision
	caps    json.RawMessage
	info    json.RawMessage
	// owner is the Key of the principal that created the session ("" when
	// authentication is off); only that principal may use it (auth.go).
	owner string

	// stateless sessions live for one 2026-07-28 request (or one
	// subscriptions/listen stream) and are never stored.
	stateless      bool
	subscriptionID json.RawMessage // the listen stream's id, tagged on its notifications
	filter         *listenFilter   // what the listen stream opted in to
	paramHeaders   http.Header     // Mcp-Param-* headers of the request, passed upstream

	ctx    context.Context // ended by DELETE, idle reaping or shutdown
	cancel context.CancelFunc

	// outbox carries server→client messages that belong to no request (list
	// changes, resource updates) to the GET stream.
	outbox chan []byte
	// events keeps what was sent on the session's streams for Last-Event-ID.
	events *eventLog

	mu          sync.Mutex
	lastUsed    time.Time
	streamOpen  bool
	initialized bool
	logLevel    string
	inflight    map[string]context.CancelFunc    // by downstream request id
	outgoing    map[string]chan *jsonrpc.Message // relayed server→client requests, by the id the gateway gave them
	nextOut     int64
}

// route is the session's route in the generation in force: a reload moves
// the session to the new generation's route of the same path.
func (s *Session) route() *route { return s.rte.Load() }

func (s *Session) setRoute(r *route) { s.rte.Store(r) }

// ID is the session id sent in Mcp-Session-Id.
func (s *Session) ID() string { return s.id }

// Version is the negotiated protocol revision.
func (s *Session) Version() string { return s.version }

func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// track registers an in-flight request so notifications/cancelled can stop it.
func (s *Session) track(id jsonrpc.ID, cancel context.CancelFunc) {
	s.mu.Lock()
	s.inflight[string(id)] = cancel
	s.mu.Unlock()
}

func (s *Session) untrack(id jsonrpc.ID) {
	s.mu.Lock()
	delete(s.inflight, string(id))
	s.mu.Unlock()
}

// cancelRequest stops the in-flight request with the given raw id, if any.
func (s *Session) cancelRequest(id json.RawMessage) bool {
	s.mu.Lock()
	cancel := s.inflight[string(id)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// expect registers a relayed server→client request and returns its
// downstream id and the channel its answer arrives on.
func (s *Session) expect() (jsonrpc.ID, chan *jsonrpc.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextOut++
	// A string id in the gateway's own space can never equal an id the
	// client uses for its requests to us.
	id := jsonrpc.ID(fmt.Sprintf(`"mcpgw-%d"`, s.nextOut))
	ch := make(chan *jsonrpc.Message, 1)
	s.outgoing[string(id)] = ch
	return id, ch
}

func (s *Session) forgetOutgoing(id jsonrpc.ID) {
	s.mu.Lock()
	delete(s.outgoing, string(id))
	s.mu.Unlock()
}

// answer hands the client's response to the relayed request it answers.
func (s *Session) answer(m *jsonrpc.Message) bool {
	s.mu.Lock()
	ch := s.outgoing[string(m.ID)]
	delete(s.outgoing, string(m.ID))
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- m
	return true
}

// send queues a message for the GET stream; when the client keeps no stream
// open or reads too slowly the message is dropped (these are hints such as
// list_changed, which a client re-reads anyway).
func (s *Session) send(msg []byte) bool {
	select {
	case s.outbox <- msg:
		return true
	default:
		return false
	}
}

// sessionStore holds the live sessions of one router.
type sessionStore struct {
	mu       sync.Mutex
	sessions map[string]*Session
	onEnd    func(*Session) // releases what the session held elsewhere (subscriptions)

	// sealer, when sessions.key_file is set, makes session ids AEAD tokens
	// any replica with the key ring can serve (sessiontoken.go); ended
	// remembers the tokens ended here until they would expire anyway.
	sealer *sealer
	ended  map[string]time.Time
}

func newSessionStore(keys [][]byte) *sessionStore {
	st := &sessionStore{sessions: make(map[string]*Session)}
	// Keys come from ParseSessionKeys, which checks their sizes.
	st.sealer, _ = newSealer(keys)
	return st
}

func (st *sessionStore) create(rt *route, version string, caps, info json.RawMessage, p *auth.Principal) *Session {
	id := newSessionID()
	if st.sealer != nil {
		id = st.sealer.seal(sessionClaims{Route: rt.path, Owner: p.Key(), Version: version, Caps: caps, Info: info, Issued: time.Now().Unix()})
	}
	return st.add(id, rt, version, caps, info, p)
}

// add stores a new session with the given id.
func (st *sessionStore) add(id string, rt *route, version string, caps, info json.RawMessage, p *auth.Principal) *Session {
	ctx, cancel := context.WithCancel(auth.WithPrincipal(context.Background(), p))
	s := &Session{
		id:       id,
		owner:    p.Key(),
		version:  version,
		caps:     caps,
		info:     info,
		ctx:      ctx,
		cancel:   cancel,
		outbox:   make(chan []byte, 64),
		events:   newEventLog(),
		lastUsed: time.Now(),
		inflight: make(map[string]context.CancelFunc),
		outgoing: make(map[string]chan *jsonrpc.Message),
	}
	s.setRoute(rt)
	st.mu.Lock()
	if old := st.sessions[s.id]; old != nil { // rehydrated concurrently
		st.mu.Unlock()
		cancel()
		return old
	}
	st.sessions[s.id] = s
	st.mu.Unlock()
	return s
}

// get returns the session if it exists and belongs to rt's path (in any
// generation: a request routed by the previous mux just before a reload
// still finds its session).
func (st *sessionStore) get(id string, rt *route) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	st.mu.Unlock()
	if s == nil || s.route().path != rt.path {
		return nil
	}
	return s
}

// rehydrate recreates, on this replica, a session another replica (or this
// one before a restart) created: its id is a token sealed with our key
// ring, for this route, not ended here. The caller checks the principal.
func (st *sessionStore) rehydrate(id string, rt *route, p *auth.Principal) *Session {
	if st.sealer == nil {
		return nil
	}
	now := time.Now()
	st.mu.Lock()
	_, gone := st.ended[id]
	st.mu.Unlock()
	if gone {
		return nil
	}
	c, ok := st.sealer.open(id, now)
	if !ok || c.Route != rt.path || c.Owner != p.Key() {
		return nil
	}
	return st.add(id, rt, c.Version, c.Caps, c.Info, p)
}

// lookup returns the session with id, whatever its route.
func (st *sessionStore) lookup(id string) *Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sessions[id]
}

func (st *sessionStore) remove(id string) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	delete(st.sessions, id)
	if st.sealer != nil {
		// A token stays valid elsewhere until it expires; here it is over.
		if st.ended == nil {
			st.ended = map[string]time.Time{}
		}
		now := time.Now()
		st.ended[id] = now
		for k, at := range st.ended {
			if now.Sub(at) > sessionTokenMaxAge {
				delete(st.ended, k)
			}
		}
	}
	st.mu.Unlock()
	if s != nil {
		s.cancel()
		if st.onEnd != nil {
			st.onEnd(s)
		}
	}
	return s
}

// reap ends sessions idle for longer than idle.
func (st *sessionStore) reap(idle time.Duration) int {
	cutoff := time.Now().Add(-idle)
	var stale []string
	st.mu.Lock()
	for id, s := range st.sessions {
		s.mu.Lock()
		if s.lastUsed.Before(cutoff) && len(s.inflight) == 0 && !s.streamOpen {
			stale = append(stale, id)
		}
		s.mu.Unlock()
	}
	st.mu.Unlock()
	for _, id := range stale {
		st.remove(id)
	}
	return len(stale)
}

func (st *sessionStore) all() []*Session {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		out = append(out, s)
	}
	return out
}

func (st *sessionStore) closeAll() {
	for _, s := range st.all() {
		st.remove(s.id)
	}
}

// newStreamID names one SSE stream within a session's event ids.
func newStreamID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newSessionID returns 256 random bits, base64url: unguessable and
// visible-ASCII as the spec requires.
func newSessionID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the OS RNG never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
