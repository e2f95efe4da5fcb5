package faulty

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Bounds of the HTTP side's per-session state.
const (
	maxCutStreams   = 64   // drop answers awaiting a resume, per session
	maxExpiredMemo  = 4096 // tokens whose expire already fired
	outboxSize      = 64   // notifications queued for a session's GET stream
	keepAlivePeriod = 10 * time.Second
)

// HTTPHandler serves Streamable HTTP (2025-03-26 to 2025-11-25: initialize,
// Mcp-Session-Id, POST answered with JSON or, for tool calls, SSE; GET for
// the standalone stream and for resuming with Last-Event-ID; DELETE) at
// whatever path it is mounted on.
type HTTPHandler struct {
	s *Server

	mu       sync.Mutex
	sessions map[string]*httpSession
	epoch    context.Context // cancelled by a crash: every call in flight aborts
	crash    context.CancelFunc
	expired  map[string]bool // tokens whose expire fault fired: the retry is answered
	expOrder []string
	nextID   int
	streams  atomic.Int64 // numbers the calls' SSE streams
}

type httpSession struct {
	id       string
	version  string
	lastUsed time.Time // under HTTPHandler.mu
	ctx      context.Context
	end      context.CancelFunc // DELETE, expiry, eviction or a crash
	outbox   chan []byte

	mu       sync.Mutex
	getOpen  bool
	inflight inflight
	cut      map[string][]sse.Event // drop: the rest of each cut stream
	cutOrder []string
}

// HTTP returns the server's Streamable HTTP handler. Each call returns a
// handler with its own sessions.
func (s *Server) HTTP() *HTTPHandler {
	h := &HTTPHandler{s: s, sessions: map[string]*httpSession{}, expired: map[string]bool{}}
	h.epoch, h.crash = context.WithCancel(context.Background())
	return h
}

// Sessions is the number of sessions the handler holds.
func (h *HTTPHandler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// InFlight is the number of tool calls being served.
func (h *HTTPHandler) InFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, sess := range h.sessions {
		n += sess.inflight.len()
	}
	return n
}

// Crash makes the handler behave as a restarted server: every session is
// forgotten (HTTP 404 from now on) and every call in flight is aborted,
// its connection closed without an answer.
func (h *HTTPHandler) Crash() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.crash()
	for id, sess := range h.sessions {
		sess.end()
		delete(h.sessions, id)
	}
	h.epoch, h.crash = context.WithCancel(context.Background())
}

func (h *HTTPHandler) currentEpoch() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

// ServeHTTP implements http.Handler.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		sess := h.lookup(r.Header.Get(mcp.HeaderSessionID))
		if sess == nil {
			httpError(w, http.StatusNotFound, "session not found")
			return
		}
		h.forget(sess)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "use POST, GET or DELETE")
	}
}

func (h *HTTPHandler) create(version string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sessions) >= h.s.opts.MaxSessions {
		var oldest *httpSession
		for _, s := range h.sessions {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		oldest.end()
		delete(h.sessions, oldest.id)
	}
	h.nextID++
	ctx, end := context.WithCancel(context.Background())
	sess := &httpSession{
		id:       fmt.Sprintf("faulty-%d-%d", time.Now().UnixNano(), h.nextID),
		version:  version,
		lastUsed: h.s.opts.Now(),
		ctx:      ctx,
		end:      end,
		outbox:   make(chan []byte, outboxSize),
		cut:      map[string][]sse.Event{},
	}
	h.sessions[sess.id] = sess
	return sess
}

// lookup finds a live session and marks it used; an idle one past the TTL
// is forgotten.
func (h *HTTPHandler) lookup(id string) *httpSession {
	if id == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sess := h.sessions[id]
	if sess == nil {
		return nil
	}
	now := h.s.opts.Now()
	if ttl := h.s.opts.SessionTTL; ttl > 0 && now.Sub(sess.lastUsed) > ttl {
		sess.end()
		delete(h.sessions, id)
		return nil
	}
	sess.lastUsed = now
	return sess
}

func (h *HTTPHandler) forget(sess *httpSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sess.end()
	delete(h.sessions, sess.id)
}

// expireOnce reports whether the expire fault should fire for token: once
// per token, so the caller's retry on a new session is answered.
func (h *HTTPHandler) expireOnce(token string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.expired[token] {
		return false
	}
	h.expired[token] = true
	h.expOrder = append(h.expOrder, token)
	if len(h.expOrder) > maxExpiredMemo {
		delete(h.expired, h.expOrder[0])
		h.expOrder = h.expOrder[1:]
	}
	return true
}

func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxStdinLine+1))
	if err != nil {
		return
	}
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeParseError, "%v", err)))
		return
	}
	if msg.Kind() == jsonrpc.KindRequest && msg.Method == mcp.MethodInitialize {
		resp := h.s.answer(msg)
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(resp.Result, &res)
		sess := h.create(res.ProtocolVersion)
		w.Header().Set(mcp.HeaderSessionID, sess.id)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	id := r.Header.Get(mcp.HeaderSessionID)
	if id == "" && h.s.opts.Modern && (modern(msg) || msg.Method == mcp.MethodServerDiscover) {
		h.stateless(w, r, msg)
		return
	}
	if id == "" {
		httpError(w, http.StatusBadRequest, "missing Mcp-Session-Id; initialize first")
		return
	}
	sess := h.lookup(id)
	if sess == nil {
		httpError(w, http.StatusNotFound, "session not found or expired; initialize again")
		return
	}
	switch msg.Kind() {
	case jsonrpc.KindNotification:
		if msg.Method == mcp.NotificationCancelled {
			sess.inflight.cancel(msg.Params)
		}
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse:
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindRequest:
		f, ok := isFault(msg)
		if !ok {
			writeJSON(w, http.StatusOK, h.s.answer(msg))
			return
		}
		h.s.count(f.Kind)
		h.call(w, r, sess, msg, f, false)
	}
}

// stateless serves a 2026-07-28 request: no session; results say
// resultType; list changes come on subscriptions/listen.
func (h *HTTPHandler) stateless(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	if msg.Kind() != jsonrpc.KindRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == mcp.MethodSubscriptionsListen {
		h.listen(w, r, msg)
		return
	}
	f, ok := isFault(msg)
	if !ok {
		writeJSON(w, http.StatusOK, complete(h.s.answer(msg), true))
		return
	}
	h.s.count(f.Kind)
	// A session of this request alone: nothing outlives it.
	ctx, end := context.WithCancel(context.Background())
	defer end()
	sess := &httpSession{ctx: ctx, end: end, cut: map[string][]sse.Event{}}
	h.call(w, r, sess, msg, f, true)
}

// listen serves subscriptions/listen: an acknowledgement, then each tool
// list change, tagged with the request's id, until the client goes.
func (h *HTTPHandler) listen(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	epoch := h.currentEpoch()
	tools, ack := listenParams(msg)
	changes := make(chan struct{}, 1)
	if tools {
		stop := h.s.listen(func([]byte) {
			select {
			case changes <- struct{}{}:
			default: // one pending change says it all
			}
		})
		defer stop()
	}
	sw := sse.NewWriter(w)
	if sw.Write(sse.Event{Data: tagged(mcp.NotificationSubscriptionsAcked, msg.ID, map[string]any{"notifications": ack})}) != nil {
		return
	}
	keep := time.NewTicker(keepAlivePeriod)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-epoch.Done():
			panic(http.ErrAbortHandler)
		case <-changes:
			if sw.Write(sse.Event{Data: tagged(mcp.NotificationToolsListChanged, msg.ID, nil)}) != nil {
				return
			}
		case <-keep.C:
			if sw.Comment("keep-alive") != nil {
				return
			}
		}
	}
}

// call serves one fault over HTTP; mod marks a 2026-07-28 request, which
// has no session to expire and no stream to resume.
func (h *HTTPHandler) call(w http.ResponseWriter, r *http.Request, sess *httpSession, msg *jsonrpc.Message, f Fault, mod bool) {
	if mod {
		f.NoResume = true
		if f.Kind == Expire {
			f.Kind = Echo
		}
	}
	epoch := h.currentEpoch()
	// The call lives as long as its connection, its session and the
	// server (a crash ends it); ctx also ends with a notifications/cancelled
	// naming it, which hang ignores.
	life, end := context.WithCancel(r.Context())
	defer end()
	defer context.AfterFunc(epoch, end)()
	defer context.AfterFunc(sess.ctx, end)()
	ctx, cancel := context.WithCancel(life)
	defer cancel()
	sess.inflight.track(json.RawMessage(msg.ID), cancel)
	defer sess.inflight.untrack(json.RawMessage(msg.ID))
	// After a crash nothing more is written: the handler aborts, which
	// closes the connection without an answer.
	defer func() {
		if epoch.Err() != nil {
			panic(http.ErrAbortHandler)
		}
	}()

	cs := newCallStream(w, r, h.streams.Add(1))
	answer := func(extra ...string) {
		cs.finish(complete(jsonrpc.NewResult(msg.ID, result(f.Token, 0, extra...)), mod))
	}
	token := progressToken(msg.Params)
	switch f.Kind {
	case Echo, Grandchild:
		answer()
	case Slow:
		if progressEvery(ctx, f, func(i, n int) { cs.event(notification(token, i, n)) }) {
			answer()
		}
	case Hang:
		cs.open()
		<-life.Done()
	case Crash:
		if sleep(ctx, f.Delay) {
			h.Crash()
		}
	case Reset:
		if sleep(ctx, f.Delay) {
			reset(w)
		}
	case Expire:
		if !h.expireOnce(f.Token) {
			answer("retried after expiry")
			return
		}
		h.forget(sess)
		httpError(w, http.StatusNotFound, "session expired; initialize again")
	case Garbage:
		for _, g := range garbage(f.Bytes) {
			cs.event(g)
		}
		answer()
	case Huge:
		cs.finish(complete(jsonrpc.NewResult(msg.ID, result(f.Token, f.Bytes)), mod))
	case Stderr:
		flood(h.s.opts.Stderr, f.Bytes)
		answer()
	case Drop:
		if !cs.sse {
			answer()
			return
		}
		cs.open()
		for i := 1; i <= f.Events; i++ {
			cs.event(notification(token, i, f.Events))
		}
		if !sleep(ctx, f.Delay) || f.NoResume {
			return
		}
		b, _ := jsonrpc.Encode(complete(jsonrpc.NewResult(msg.ID, result(f.Token, 0)), mod))
		sess.keepCut(cs.stream, []sse.Event{{ID: cs.nextID(), Data: b}})
	case ListChanged:
		h.s.changeTools()
		answer()
	}
}

// reset closes the connection with an RST: the request was read, nothing
// is answered.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (sess *httpSession) keepCut(stream string, rest []sse.Event) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.cut[stream] = rest
	sess.cutOrder = append(sess.cutOrder, stream)
	if len(sess.cutOrder) > maxCutStreams {
		delete(sess.cut, sess.cutOrder[0])
		sess.cutOrder = sess.cutOrder[1:]
	}
}

func (sess *httpSession) takeCut(stream string) ([]sse.Event, bool) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	rest, ok := sess.cut[stream]
	delete(sess.cut, stream)
	return rest, ok
}

func (h *HTTPHandler) get(w http.ResponseWriter, r *http.Request) {
	sess := h.lookup(r.Header.Get(mcp.HeaderSessionID))
	if sess == nil {
		httpError(w, http.StatusNotFound, "session not found or expired; initialize again")
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), mcp.ContentTypeEventStream) {
		httpError(w, http.StatusNotAcceptable, "GET opens an event stream: Accept must include text/event-stream")
		return
	}
	epoch := h.currentEpoch()
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		stream, _, _ := strings.Cut(last, "/")
		rest, ok := sess.takeCut(stream)
		if !ok {
			httpError(w, http.StatusBadRequest, "no stream "+strconv.Quote(stream)+" to resume")
			return
		}
		sw := sse.NewWriter(w)
		for _, ev := range rest {
			_ = sw.Write(ev)
		}
		return
	}
	sess.mu.Lock()
	if sess.getOpen {
		sess.mu.Unlock()
		httpError(w, http.StatusConflict, "this session already has a GET stream")
		return
	}
	sess.getOpen = true
	sess.mu.Unlock()
	stop := h.s.listen(func(b []byte) {
		select {
		case sess.outbox <- b:
		default: // a client that does not read loses notifications, never blocks us
		}
	})
	defer stop()
	defer func() {
		sess.mu.Lock()
		sess.getOpen = false
		sess.mu.Unlock()
	}()
	sw := sse.NewWriter(w)
	keep := time.NewTicker(keepAlivePeriod)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.ctx.Done():
			return
		case <-epoch.Done():
			panic(http.ErrAbortHandler)
		case b := <-sess.outbox:
			if sw.Write(sse.Event{Data: b}) != nil {
				return
			}
		case <-keep.C:
			if sw.Comment("keep-alive") != nil {
				return
			}
		}
	}
}

// callStream answers one tool call: with SSE when the client accepts it
// (notifications first, each event with an id "<stream>/<n>" so that a cut
// stream can be resumed), else with one JSON body.
type callStream struct {
	w      http.ResponseWriter
	sse    bool
	sw     *sse.Writer
	stream string
	n      int
}

func newCallStream(w http.ResponseWriter, r *http.Request, n int64) *callStream {
	return &callStream{
		w:      w,
		sse:    strings.Contains(r.Header.Get("Accept"), mcp.ContentTypeEventStream),
		stream: "s" + strconv.FormatInt(n, 10),
	}
}

func (c *callStream) nextID() string {
	c.n++
	return c.stream + "/" + strconv.Itoa(c.n)
}

// open sends the SSE headers and a priming event (an id, no data), so the
// stream can be resumed before its first message.
func (c *callStream) open() {
	if !c.sse || c.sw != nil {
		return
	}
	c.sw = sse.NewWriter(c.w)
	_ = c.sw.Write(sse.Event{ID: c.stream + "/0", Retry: 200})
}

// event sends one message during the call (dropped without SSE).
func (c *callStream) event(b []byte) {
	if !c.sse {
		return
	}
	c.open()
	_ = c.sw.Write(sse.Event{ID: c.nextID(), Data: b})
}

// finish sends the answer.
func (c *callStream) finish(m *jsonrpc.Message) {
	if c.sse {
		b, _ := jsonrpc.Encode(m)
		c.event(b)
		return
	}
	writeJSON(c.w, http.StatusOK, m)
}

func writeJSON(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	b, _ := jsonrpc.Encode(m)
	w.Header().Set("Content-Type", mcp.ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func httpError(w http.ResponseWriter, status int, text string) {
	writeJSON(w, status, jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "%s", text)))
}
