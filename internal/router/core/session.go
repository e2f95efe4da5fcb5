package core

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// Session is what the core knows of whoever sends it requests: the route,
// the revision and client capabilities, the principal, the log threshold,
// the requests in flight and the server→client requests relayed to the
// client. Four lifetimes use one, each in a type or place of its own:
//
//   - a stored session (sessions.Session, made by NewSession): Streamable
//     HTTP, from initialize to DELETE, idle reaping or shutdown;
//   - a serial connection (serial's push connection, owning a stored
//     session): one HTTP+SSE stream or stdio, for as long as it is open;
//   - a stateless request (NewRequestSession): one 2026-07-28 request, or
//     the bridged call it starts (StartBridged), never stored;
//   - a listen stream: a stateless request's session registered with
//     AddListener while its subscriptions/listen stream is open (listen.go).
type Session struct {
	id      string
	rte     atomic.Pointer[Route] // re-resolved by a reload (Route, SetRoute)
	version mcp.Revision          // negotiated, or the request's own (stateless)
	caps    json.RawMessage
	info    json.RawMessage
	// owner is the Key of the principal that created the session ("" when
	// authentication is off); only that principal may use it.
	owner string
	// caller is what the host and the catalog read of the session on each
	// of its requests (upcall.WithCaller): made with it, not per request.
	// Its Route is the route's path, which SetRoute keeps (a reload moves
	// a session only to the same path's route).
	caller upcall.Caller

	subscriptionID json.RawMessage // a listen stream's id, tagged on its notifications

	ctx    context.Context // ended by DELETE, idle reaping or shutdown
	cancel context.CancelFunc

	// outbox carries server→client messages that belong to no request (list
	// changes, resource updates) to the session's stream.
	outbox chan []byte
	// relay, set for a stored session of a fleet (sessions.redis), carries
	// what Send is given to the replica that holds the session's GET
	// stream while no stream on this replica reads the outbox; held counts
	// those that do.
	relay atomic.Pointer[func([]byte) bool]
	held  atomic.Int32
	// byClient marks an end the client asked for (DELETE here or, in a
	// fleet, on another replica), as opposed to idle reaping or shutdown.
	byClient atomic.Bool
	// queued is how many bytes wait for the client to read them
	// (queuebytes.go).
	queued    atomic.Int64
	queueFull atomic.Bool // a message was refused for the bound since the client last read

	mu       sync.Mutex
	logLevel string
	inflight map[string]context.CancelFunc    // by downstream request id (nil until the first)
	outgoing map[string]chan *jsonrpc.Message // relayed server→client requests, by the id the gateway gave them (nil until the first)
	nextOut  int64
}

// NewSession makes the state of a stored session id on rte, owned by p.
// Its context ends with End.
func NewSession(id string, rte *Route, version mcp.Revision, caps, info json.RawMessage, p *auth.Principal) *Session {
	ctx, cancel := context.WithCancel(auth.WithPrincipal(context.Background(), p))
	s := newSession(ctx, cancel, rte, version, caps, info, p.Key(), outboxSize)
	s.id = id
	s.caller.Session = id
	return s
}

// NewRequestSession makes the state of one stateless (2026-07-28) request,
// or of one listen stream: it lives no longer than ctx and is never stored.
//
// Only a subscriptions/listen request (listens) reads an outbox: any other
// request's session has none (64 slots, 1.5 KiB, per request otherwise),
// so what is sent to it is dropped at once, as it would be unread. Only a
// listen stream's session can be ended before its request (End, by a
// reload that drops its route); any other's context is ctx itself, and End
// leaves it to the request's end (a context of its own would be four
// allocations per request for nothing).
func NewRequestSession(ctx context.Context, rte *Route, version mcp.Revision, caps, info json.RawMessage, owner, logLevel string, listens bool) *Session {
	cancel := context.CancelFunc(func() {})
	n := 0 // no outbox: a nil channel, which Send's select drops to and a reader's select never takes from
	if listens {
		ctx, cancel = context.WithCancel(ctx)
		n = outboxSize
	}
	s := newSession(ctx, cancel, rte, version, caps, info, owner, n)
	s.logLevel = logLevel
	return s
}

// outboxSize is how many messages a session's stream may fall behind by.
const outboxSize = 64

func newSession(ctx context.Context, cancel context.CancelFunc, rte *Route, version mcp.Revision, caps, info json.RawMessage, owner string, outbox int) *Session {
	var out chan []byte
	if outbox > 0 {
		out = make(chan []byte, outbox)
	}
	s := &Session{
		owner:   owner,
		version: version,
		caps:    caps,
		info:    info,
		ctx:     ctx,
		cancel:  cancel,
		outbox:  out,
		// inflight and outgoing are made on first use: a 2026-07-28
		// request's session (one per request) seldom needs either.
	}
	s.caller = upcall.Caller{Capabilities: caps, Route: rte.Path, Principal: owner}
	s.SetRoute(rte)
	return s
}

// Route is the session's route in the generation in force: a reload moves
// the session to the new generation's route of the same path.
func (s *Session) Route() *Route { return s.rte.Load() }

// SetRoute moves the session to r.
func (s *Session) SetRoute(r *Route) { s.rte.Store(r) }

// ID is the session id sent in Mcp-Session-Id ("" for a stateless request).
func (s *Session) ID() string { return s.id }

// Version is the session's revision: negotiated by initialize, or the
// stateless request's own.
func (s *Session) Version() mcp.Revision { return s.version }

// Owner is the Key of the principal the session belongs to.
func (s *Session) Owner() string { return s.owner }

// Stateless reports whether the caller speaks a stateless revision: the
// session lives for one request or listen stream and is never stored.
func (s *Session) Stateless() bool { return s.version.Stateless() }

// Context ends when the session does.
func (s *Session) Context() context.Context { return s.ctx }

// End ends the session's context, cancelling what is in flight (of a
// request session, only a listen stream's: NewRequestSession).
func (s *Session) End() { s.cancel() }

// MarkEndedByClient records, before the session ends, that its client
// ended it (DELETE).
func (s *Session) MarkEndedByClient() { s.byClient.Store(true) }

// EndedByClient reports whether the client ended the session (DELETE).
func (s *Session) EndedByClient() bool { return s.byClient.Load() }

// Outbox carries what belongs to no request (list changes, resource
// updates) to whatever stream the session's transport keeps open.
func (s *Session) Outbox() <-chan []byte { return s.outbox }

// Handshake records what initialize negotiated, for a session created
// before it (a serial connection). The caller orders it before every
// request that reads them.
func (s *Session) Handshake(version mcp.Revision, caps, info json.RawMessage) {
	s.mu.Lock()
	s.version, s.caps, s.info = version, caps, info
	s.caller.Capabilities = caps
	s.mu.Unlock()
}

// Listen makes the session a subscriptions/listen stream's: what the core
// sends it outside calls carries id.
func (s *Session) Listen(id json.RawMessage) { s.subscriptionID = id }

// SubscriptionID is the listen stream's id (nil for other sessions).
func (s *Session) SubscriptionID() json.RawMessage { return s.subscriptionID }

// InFlight is how many requests of the session are running.
func (s *Session) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// Track registers an in-flight request so notifications/cancelled can stop it.
func (s *Session) Track(id jsonrpc.ID, cancel context.CancelFunc) {
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = make(map[string]context.CancelFunc)
	}
	s.inflight[string(id)] = cancel
	s.mu.Unlock()
}

// Untrack forgets an in-flight request.
func (s *Session) Untrack(id jsonrpc.ID) {
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
	if s.outgoing == nil {
		s.outgoing = make(map[string]chan *jsonrpc.Message)
	}
	s.outgoing[string(id)] = ch
	return id, ch
}

func (s *Session) forgetOutgoing(id jsonrpc.ID) {
	s.mu.Lock()
	delete(s.outgoing, string(id))
	s.mu.Unlock()
}

// Answer hands the client's response to the relayed request it answers;
// false when it answers none.
func (s *Session) Answer(m *jsonrpc.Message) bool {
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

// RefuseOutgoing answers every relayed server→client request still waiting
// for the client with err, for when the client can no longer answer.
func (s *Session) RefuseOutgoing(err *jsonrpc.Error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.outgoing))
	for id := range s.outgoing {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.Answer(jsonrpc.NewError(jsonrpc.ID(id), err))
	}
}

// SetRelay makes Send hand its messages to relay while no stream on this
// replica reads the outbox (HoldOutbox).
func (s *Session) SetRelay(relay func([]byte) bool) { s.relay.Store(&relay) }

// HoldOutbox records that a stream on this replica reads the outbox, until
// the returned func is called.
func (s *Session) HoldOutbox() (release func()) {
	s.held.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.held.Add(-1) }) }
}

// Send queues a message for the session's stream, wherever it is: here,
// or through the relay on the replica holding it. When the client keeps
// no stream open or reads too slowly the message is dropped (these are
// hints such as a resource update, which a client re-reads anyway).
func (s *Session) Send(msg []byte) bool {
	if r := s.relay.Load(); r != nil && s.held.Load() == 0 {
		return (*r)(msg)
	}
	return s.SendHere(msg)
}

// SendHere queues a message for a stream of the session on this replica
// only: for what every replica sees for itself (list changes, each
// replica's own upstream connections report them) and for what the relay
// delivers.
func (s *Session) SendHere(msg []byte) bool {
	select {
	case s.outbox <- msg:
		return true
	default:
		return false
	}
}
