package serial

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// The 2024-11-05 HTTP+SSE transport is served on every route, for clients
// that predate Streamable HTTP:
//
//	GET  <route>/sse                    opens the session's event stream; its
//	                                    first event, "endpoint", names the URI
//	                                    to POST to
//	POST <route>/message?sessionId=ID   one client message; 202 Accepted, the
//	                                    answer comes on the stream
//
// The stream is the session: closing it ends the session and cancels what
// is in flight. The edge checks (Origin, Host) and authentication are the
// mux's middleware and apply here as on the Streamable endpoint; the
// session belongs to the principal that opened the stream.

// Transport serves both serial transports; it holds the open legacy SSE
// connections.
type Transport struct {
	log       *zap.Logger
	core      *core.Core
	sessions  *sessions.Store
	keepAlive time.Duration // interval of SSE comment keep-alives

	mu    sync.Mutex
	conns map[string]*pushConn // legacy SSE connections, by session id
}

// New makes the serial transports over c, storing sessions in st.
func New(c *core.Core, st *sessions.Store, keepAlive time.Duration) *Transport {
	return &Transport{log: c.Logger(), core: c, sessions: st, keepAlive: keepAlive, conns: map[string]*pushConn{}}
}

// Register adds rte's legacy endpoints to mux, unless a configured route
// (taken) already uses one of their paths.
func (l *Transport) Register(mux chi.Router, rte *core.Route, taken map[string]bool) {
	base := strings.TrimSuffix(rte.Path, "/")
	stream, post := base+"/sse", base+"/message"
	if taken[stream] || taken[post] {
		l.log.Warn("legacy HTTP+SSE endpoints of this route are not served: a route uses their path",
			zap.String("route", rte.Path), zap.String("sse", stream), zap.String("message", post))
		return
	}
	mux.Get(stream, func(w http.ResponseWriter, r *http.Request) { l.stream(w, r, rte, post) })
	mux.Post(post, func(w http.ResponseWriter, r *http.Request) { l.message(w, r, rte) })
}

func (l *Transport) get(id string) *pushConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[id]
}

// stream serves GET <route>/sse: it creates the session, announces the
// message endpoint and writes everything for the session until the client
// goes, the session ends or, after Drain, nothing is left in flight.
func (l *Transport) stream(w http.ResponseWriter, r *http.Request, rte *core.Route, post string) {
	if r.Header.Get("Accept") != "" && !edge.Accepts(r, mcp.ContentTypeEventStream) {
		edge.Error(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "GET opens an event stream: Accept must include text/event-stream")
		return
	}
	if edge.RefuseWhileDraining(w, l.core.Draining()) {
		return
	}
	c, err := l.newPushConn(rte, "legacy-sse", auth.FromContext(r.Context()))
	if err != nil {
		l.log.Warn("legacy SSE session refused", zap.String("route", rte.Path), zap.Error(err))
		refuse(w, nil, err)
		return
	}
	id := c.sess.ID()
	l.mu.Lock()
	l.conns[id] = c
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.conns, id)
		l.mu.Unlock()
		c.stop()
		l.log.Info("legacy SSE session ended", zap.String("route", rte.Path))
	}()

	// Every write has sessions.sse_write_timeout to go out: a client that
	// stops reading fills the network buffers, the write times out, and
	// the deferred stop ends its session — which releases every call
	// waiting for room in c.out and cancels what it had in flight.
	rc := http.NewResponseController(w)
	timeout := rte.Gen.Limits.SSEWriteTimeout
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(timeout)) } // unsupported (tests' recorders): no bound
	// The deadline stays on the connection, so it is not reused after the
	// stream, and the response's last bytes get one timeout more.
	w.Header().Set("Connection", "close")
	defer deadline()
	sw := sse.NewWriter(w)
	timedOut := func(err error, since time.Time) bool {
		if err == nil || (!errors.Is(err, os.ErrDeadlineExceeded) && time.Since(since) < timeout) {
			return false
		}
		l.core.Metrics().LimitRefused("sessions.sse_write_timeout")
		l.log.Warn("legacy SSE client did not read its stream; disconnected (sessions.sse_write_timeout)",
			zap.String("route", rte.Path), zap.Duration("sse_write_timeout", timeout), zap.Int("queued", len(c.out)))
		return true
	}
	writeEvent := func(ev sse.Event) bool {
		start := time.Now()
		deadline()
		err := sw.Write(ev)
		timedOut(err, start)
		return err == nil
	}
	if !writeEvent(sse.Event{Name: "endpoint", Data: []byte(post + "?sessionId=" + url.QueryEscape(id))}) {
		return
	}
	write := func(b []byte) bool { return writeEvent(sse.Event{Name: "message", Data: b}) }
	keep := time.NewTicker(l.keepAlive)
	defer keep.Stop()
	drain := l.core.Draining()
	var quiet chan struct{}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.sess.Context().Done():
			return
		case <-drain:
			// Shutting down: let what is in flight finish and be answered,
			// then end the stream; clients reconnect elsewhere.
			drain, quiet = nil, c.quiet
			if c.closeIfIdle() {
				flushOut(c, write)
				return
			}
		case <-quiet:
			if c.closeIfIdle() {
				flushOut(c, write)
				return
			}
		case b := <-c.out:
			c.taken(b)
			if !write(b) {
				return
			}
		case b := <-c.sess.Outbox():
			if c.initialized() && !write(b) {
				return
			}
		case <-keep.C:
			start := time.Now()
			deadline()
			if err := sw.Comment("keep-alive"); err != nil {
				timedOut(err, start)
				return
			}
		}
	}
}

// flushOut writes what is still queued for an idle connection.
func flushOut(c *pushConn, write func([]byte) bool) {
	for len(c.out) > 0 {
		b := <-c.out
		c.taken(b)
		if !write(b) {
			return
		}
	}
}

// message serves POST <route>/message?sessionId=ID: the message is taken
// (202 Accepted) and answered on the session's stream.
func (l *Transport) message(w http.ResponseWriter, r *http.Request, rte *core.Route) {
	id := r.URL.Query().Get("sessionId")
	if id == "" {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "missing sessionId query parameter; open "+strings.TrimSuffix(rte.Path, "/")+"/sse and POST to the endpoint it announces")
		return
	}
	c := l.get(id)
	if c == nil || c.sess.Route().Path != rte.Path || !edge.OwnedBy(r, c.sess.Owner(), c.sess.Route().Path, l.log) {
		edge.Error(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found or ended; open a new event stream at "+strings.TrimSuffix(rte.Path, "/")+"/sse")
		return
	}
	msg, ok := edge.ReadMessage(w, r, rte.Gen.MaxBody)
	if !ok {
		return
	}
	if err := c.handle(msg); err != nil {
		if errors.Is(err, errEnded) {
			edge.Error(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session ended; open a new event stream at "+strings.TrimSuffix(rte.Path, "/")+"/sse")
			return
		}
		// Refused (sessions.max_requests_per_session): answered here, on
		// the POST, since the session's stream has no room for it.
		refuse(w, msg.ID, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// refuse answers a request refused by a bound (a *limits.Refusal: 503 or
// 429, Retry-After and a JSON-RPC error naming the bound's key).
func refuse(w http.ResponseWriter, id jsonrpc.ID, err error) {
	var lr *limits.Refusal
	if !errors.As(err, &lr) {
		edge.Error(w, http.StatusInternalServerError, jsonrpc.CodeInternalError, "mcpgw: "+err.Error())
		return
	}
	lr.Write(w, id)
}
