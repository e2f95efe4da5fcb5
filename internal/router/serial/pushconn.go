// Package serial is mcpgw's downstream transports where everything the
// gateway sends a client travels on one ordered channel: the 2024-11-05
// HTTP+SSE transport (GET <route>/sse and POST <route>/message,
// legacysse.go) and stdio (stdio.go). One connection is one stored
// session; the connection (pushconn.go) takes client messages as they
// come, runs requests concurrently through the core and answers each
// exactly once. Over stdio, 2026-07-28 requests are served statelessly
// beside the session (stdio2026.go).
package serial

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// pushConn is one downstream session on a transport where everything the
// gateway sends the client — responses, what upstreams send during a call,
// session notifications — travels on one ordered channel that the transport
// writes out: the legacy 2024-11-05 HTTP+SSE stream, or stdout for stdio.
// Client messages arrive separately and are handled as they come; requests
// run concurrently and each is answered exactly once.
//
// The session is created with the connection, before initialize: the
// protocol revision, capabilities and client info are set by the client's
// initialize, and requests other than ping wait for it.
type pushConn struct {
	t         *Transport
	sess      *sessions.Session
	transport string // for logs

	// out carries responses and per-call events to the transport's writer
	// (sessions.sse_queue of them; a writer that cannot write ends the
	// session, which releases whoever waits for room). Each message in it
	// is charged to the session's sessions.queue_bytes until the writer
	// takes it (core's queuebytes.go). Session notifications stay in
	// sess.outbox, which the writer also reads.
	out chan []byte

	mu      sync.Mutex
	closed  bool          // the transport is ending: no new work starts
	ready   bool          // initialize was answered
	pending int           // goroutines started for client messages and not done
	quiet   chan struct{} // signalled when pending drops to zero
	wg      sync.WaitGroup

	// noInput is set when the client can send nothing more (stdin reached
	// EOF): server→client requests can no longer be answered, so they fail
	// at once instead of holding their call until it times out.
	noInput atomic.Bool

	// modern serves 2026-07-28 requests beside the session (stdio only;
	// nil elsewhere: stdio2026.go).
	modern *modern
}

// newPushConn starts the connection's session, or refuses with a
// *limits.Refusal when the session bounds are full.
func (t *Transport) newPushConn(rte *core.Route, transport string, p *auth.Principal) (*pushConn, error) {
	sess, err := t.sessions.CreateSerial(rte, p)
	if err != nil {
		return nil, err
	}
	// The connection is the session's stream for its whole life: the idle
	// reaper leaves it alone, and a Streamable GET cannot open a second one.
	sess.OpenStream()
	return &pushConn{
		t:         t,
		sess:      sess,
		transport: transport,
		out:       make(chan []byte, rte.Gen.Limits.SSEQueue), // sessions.sse_queue
		quiet:     make(chan struct{}, 1),
	}, nil
}

// errEnded: the connection is ending and took nothing more.
var errEnded = errors.New("mcpgw: the connection is ending")

// handle takes one client message. It returns errEnded when the connection
// is ending and the message was not taken, and a *limits.Refusal for a
// request when the session already runs sessions.max_requests_per_session
// (the caller answers it).
func (c *pushConn) handle(msg *jsonrpc.Message) error {
	c.sess.Touch()
	switch msg.Kind() {
	case jsonrpc.KindNotification:
		if c.isClosed() {
			return errEnded
		}
		c.t.core.Notification(c.sess.Session, msg)
	case jsonrpc.KindResponse:
		if c.isClosed() {
			return errEnded
		}
		// The client's answer to a request relayed from an upstream.
		if !c.sess.Answer(msg) {
			c.t.log.Debug("dropping a response to no pending server→client request", zap.String("id", msg.ID.String()), zap.String("transport", c.transport))
		}
	default:
		return c.request(msg)
	}
	return nil
}

// initialized reports whether initialize was answered. Session
// notifications (sess.outbox) are dropped until it was: the spec allows
// nothing but pings and logs before it.
func (c *pushConn) initialized() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

func (c *pushConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// request starts answering one request. The request is registered for
// notifications/cancelled before handle returns, so a cancellation sent
// right after it always finds it.
func (c *pushConn) request(msg *jsonrpc.Message) error {
	if msg.Method == mcp.MethodInitialize {
		// InitializeResult waits for starting upstreams; waited for here,
		// outside the lock, it finds them settled.
		c.sess.Route().View.AwaitStarting(c.sess.Context())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errEnded
	}
	// Requests are answered on the connection, not on the POST that
	// carried them, so nothing else bounds how many a client starts.
	if max := c.sess.Route().Gen.Limits.MaxRequestsPerSession; c.pending >= max {
		c.t.core.Metrics().LimitRefused("sessions.max_requests_per_session")
		return &limits.Refusal{Bound: "sessions.max_requests_per_session", Max: max, What: "requests in flight on this session", PerPrincipal: true, RetryAfter: 1}
	}
	// Nor, in bytes, how much of what it has not read it makes the
	// gateway hold: while sessions.queue_bytes wait, it is told to read.
	if r := c.t.core.QueueFull(c.sess.Session); r != nil {
		return r
	}
	// The one reading of the params: below, the view is read, and the
	// bytes only to forward them (mcp.ReadParams).
	p := mcp.ReadParams(msg.Method, msg.Params)
	if c.modern != nil && msg.Method != mcp.MethodInitialize && (msg.Method == mcp.MethodServerDiscover || p.Stateless()) {
		c.statelessLocked(msg, p) // stdio2026.go
		return nil
	}
	var reply *jsonrpc.Message
	switch {
	case msg.Method == mcp.MethodInitialize:
		reply = c.initializeLocked(msg)
	case c.ready || msg.Method == mcp.MethodPing:
	case msg.Method == mcp.MethodServerDiscover:
		// Clients that try 2026-07-28 first fall back to initialize on
		// this error.
		reply = jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "%s belongs to the stateless %s revision, which this %s transport does not carry; send initialize", msg.Method, mcp.Version20260728, c.transport))
	default:
		reply = jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "session not initialized: send initialize before %s", msg.Method))
	}
	if reply != nil {
		c.replyLocked(reply)
		return nil
	}
	ctx, cancel := context.WithCancel(c.sess.Context()) // the session's end cancels the call
	c.sess.Track(msg.ID, cancel)
	c.goLocked(func() {
		defer c.sess.Untrack(msg.ID)
		defer cancel()
		c.emitMessage(c.call(ctx, msg, p))
	})
	return nil
}

// initializeLocked negotiates the session's revision as the Streamable
// initialize does and returns the response.
func (c *pushConn) initializeLocked(msg *jsonrpc.Message) *jsonrpc.Message {
	if c.ready {
		return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "this session is already initialized; open a new connection to start another"))
	}
	p, version, jerr := core.NegotiateInitialize(msg.Params)
	if jerr != nil {
		return jsonrpc.NewError(msg.ID, jerr)
	}
	// Written before ready is set under c.mu: every request goroutine that
	// reads them is started after, under the same lock.
	c.sess.Handshake(version, p.Capabilities, p.ClientInfo)
	c.ready = true
	c.t.log.Info("session started", zap.String("route", c.sess.Route().Path), zap.String("transport", c.transport),
		zap.Stringer("protocol_version", version), core.ClientField(p.ClientInfo))
	return jsonrpc.NewResult(msg.ID, c.t.core.InitializeResult(c.sess.Context(), c.sess.Route(), version))
}

// call dispatches one request. A routed call gets a callStream whose events
// (progress, log messages, server→client requests) go out on this
// connection ahead of the call's response.
func (c *pushConn) call(ctx context.Context, msg *jsonrpc.Message, p *mcp.Params) *jsonrpc.Message {
	if !mcp.Routed(msg.Method) {
		return c.t.core.Handle(ctx, c.sess.Session, msg, nil, nil)
	}
	v := c.t.core.DecideParams(ctx, c.sess.Route(), msg, p) // the verdict carries the view down
	return c.t.core.Serve(ctx, c.sess.Session, msg, v, core.EmitFunc(c.event), 0)
}

// event sends one per-call message. Once the client can answer nothing
// more, a relayed request is failed as soon as it is out. Past
// sessions.queue_bytes a hint is dropped and a server→client request is
// answered with the refusal in the client's place, which the upstream
// gets.
func (c *pushConn) event(b []byte) {
	if r := c.t.core.ReserveQueued(c.sess.Session, len(b)); r != nil {
		if m, err := jsonrpc.Parse(b); err == nil && m.Kind() == jsonrpc.KindRequest {
			c.sess.Answer(jsonrpc.NewError(m.ID, r.JSONRPC()))
		}
		return
	}
	c.put(b)
	if c.noInput.Load() {
		c.refuseOutgoing()
	}
}

// refuseOutgoing answers every relayed server→client request still waiting
// for the client with an error, for when the client can no longer answer.
func (c *pushConn) refuseOutgoing() {
	c.sess.RefuseOutgoing(jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the %s client closed its input, so it cannot answer this request", c.transport))
}

// goLocked runs f in a goroutine owned by the connection: stop waits for it.
func (c *pushConn) goLocked(f func()) {
	c.pending++
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.finished()
		f()
	}()
}

func (c *pushConn) finished() {
	c.mu.Lock()
	c.pending--
	idle := c.pending == 0
	c.mu.Unlock()
	if idle {
		select {
		case c.quiet <- struct{}{}:
		default:
		}
	}
}

// replyLocked queues an answer the caller already has: at once when the
// writer has room (keeping it in order with what follows), else from an
// owned goroutine so that the caller never blocks on a slow client.
func (c *pushConn) replyLocked(m *jsonrpc.Message) {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		return
	}
	c.t.core.ChargeQueued(c.sess.Session, len(b)) // an error or initialize's answer: small, and due
	select {
	case c.out <- b:
	default:
		c.goLocked(func() { c.put(b) })
	}
}

// emitMessage sends one answer to the client. One that would take the
// session past sessions.queue_bytes (or the process past
// sessions.queue_total_bytes) is answered with that refusal instead: its
// request still gets exactly one answer, and the gateway does not hold
// what the client does not read.
func (c *pushConn) emitMessage(m *jsonrpc.Message) bool {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		b, _ = jsonrpc.Encode(jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "could not encode response")))
	}
	if r := c.t.core.ReserveQueued(c.sess.Session, len(b)); r != nil {
		c.t.log.Debug("answer replaced by a refusal: the client does not read its stream", zap.String("bound", r.Bound), zap.Int("bytes", len(b)), zap.String("transport", c.transport))
		return c.emit(encodeRefusal(m.ID, r))
	}
	return c.put(b)
}

func encodeRefusal(id jsonrpc.ID, r *limits.Refusal) []byte {
	b, _ := jsonrpc.Encode(jsonrpc.NewError(id, r.JSONRPC()))
	return b
}

// emit charges b to the session's queue and hands it to the writer:
// for what must go out whatever the bound (small answers, refusals).
func (c *pushConn) emit(b []byte) bool {
	c.t.core.ChargeQueued(c.sess.Session, len(b))
	return c.put(b)
}

// put hands b, already charged, to the writer, waiting while it is busy;
// it gives up only when the session ends, when there is no one left to
// tell.
func (c *pushConn) put(b []byte) bool {
	select {
	case c.out <- b:
		return true
	case <-c.sess.Context().Done():
		c.t.core.ReleaseQueued(c.sess.Session, len(b))
		return false
	}
}

// taken releases the charge of a message the writer took from out.
func (c *pushConn) taken(b []byte) {
	c.t.core.ReleaseQueued(c.sess.Session, len(b))
}

// closeIfIdle stops new work and reports true when nothing is running;
// otherwise it changes nothing.
func (c *pushConn) closeIfIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending > 0 {
		return false
	}
	c.closed = true
	return true
}

// stop ends the connection: no new work starts, the session ends
// (cancelling calls in flight) and stop waits for the connection's
// goroutines.
func (c *pushConn) stop() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.t.sessions.Remove(c.sess.ID())
	c.wg.Wait()
	// What the client never read is released with it.
	for {
		select {
		case b := <-c.out:
			c.taken(b)
		default:
			return
		}
	}
}
