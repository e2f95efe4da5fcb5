// Package streamable is mcpgw's Streamable HTTP transport on every route:
// POST, GET and DELETE on the route path, for sessions started by
// initialize (2025-03-26 to 2025-11-25: Mcp-Session-Id, resumable SSE
// streams, the standalone GET stream) and for stateless 2026-07-28
// requests (per-request _meta, Mcp-* header checks, subscriptions/listen,
// bridged input requests), and the JSON-RPC batches of 2025-03-26
// sessions (batch.go). It carries messages to and from the core and keeps
// nothing a request does not need.
package streamable

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// Transport serves the Streamable HTTP endpoints of every route.
type Transport struct {
	log       *zap.Logger
	core      *core.Core
	sessions  *sessions.Store
	keepAlive time.Duration     // interval of SSE comment keep-alives
	forward   http.RoundTripper // passes bridged retries to the replica holding their call (bridgeforward.go)
}

// New makes the transport over c, storing sessions in st.
func New(c *core.Core, st *sessions.Store, keepAlive time.Duration) *Transport {
	return &Transport{log: c.Logger(), core: c, sessions: st, keepAlive: keepAlive, forward: forwardTransport()}
}

// Post serves POST on the route path.
func (t *Transport) Post(w http.ResponseWriter, r *http.Request, rte *core.Route) {
	if r.Header.Get("Accept") != "" && !edge.Accepts(r, mcp.ContentTypeJSON) && !edge.Accepts(r, mcp.ContentTypeEventStream) {
		edge.Error(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Accept must include application/json and text/event-stream")
		return
	}
	body, ok := edge.ReadBody(w, r, rte.Gen.MaxBody)
	if !ok {
		return
	}
	if isBatch(body) && r.Header.Get(mcp.HeaderSessionID) != "" {
		t.batch(w, r, rte, body) // batch.go: 2025-03-26 sessions only
		return
	}
	msg, perr := edge.ParseMessage(body)
	if perr != nil {
		edge.WriteJSON(w, http.StatusBadRequest, perr)
		return
	}

	// The one reading of the params: everything below reads this view of
	// them, and the bytes only to forward them (mcp.ReadParams).
	var view mcp.Params // on this stack: what is kept of it is copied (core.DecideParams)
	view.Read(msg.Method, msg.Params)
	p := &view
	if r.Header.Get(mcp.HeaderSessionID) == "" && isStateless(r, msg, p) {
		t.stateless(w, r, rte, msg, p)
		return
	}
	if msg.Kind() == jsonrpc.KindRequest && msg.Method == mcp.MethodInitialize {
		t.initialize(w, r, rte, msg)
		return
	}
	sess, ok := t.session(w, r, rte)
	if !ok {
		return
	}
	sess.Touch()
	switch msg.Kind() {
	case jsonrpc.KindNotification:
		t.core.Notification(sess.Session, msg)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse:
		// The client's answer to a request the gateway relayed from an upstream.
		if !sess.Answer(msg) {
			t.log.Debug("dropping a response to no pending server→client request", zap.String("id", msg.ID.String()))
		}
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindRequest:
		t.request(w, r, sess, msg, p)
	}
}

// session finds the request's session, answering 400/404 itself when it
// cannot.
func (t *Transport) session(w http.ResponseWriter, r *http.Request, rte *core.Route) (*sessions.Session, bool) {
	id := r.Header.Get(mcp.HeaderSessionID)
	if id == "" {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id header; send initialize first to start a session")
		return nil, false
	}
	sess := t.sessions.Get(id, rte)
	if sess == nil {
		// Another replica's session, sealed with our key ring?
		var err error
		if sess, err = t.sessions.Rehydrate(id, rte, auth.FromContext(r.Context())); err != nil {
			refuse(w, nil, err)
			return nil, false
		}
	}
	if sess == nil || !edge.OwnedBy(r, sess.Owner(), sess.Route().Path, t.log) {
		edge.Error(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found or ended; start a new one with initialize")
		return nil, false
	}
	if v := mcp.Revision(r.Header.Get(mcp.HeaderProtocolVersion)); v != "" && !v.Initializes() {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "unsupported MCP-Protocol-Version "+string(v)+"; supported: "+mcp.JoinRevisions(mcp.SupportedVersions))
		return nil, false
	}
	return sess, true
}

func (t *Transport) initialize(w http.ResponseWriter, r *http.Request, rte *core.Route, msg *jsonrpc.Message) {
	if edge.RefuseWhileDraining(w, t.core.Draining()) {
		return
	}
	p, version, jerr := core.NegotiateInitialize(msg.Params)
	if jerr != nil {
		edge.WriteJSON(w, http.StatusOK, jsonrpc.NewError(msg.ID, jerr))
		return
	}
	sess, err := t.sessions.Create(rte, version, p.Capabilities, p.ClientInfo, auth.FromContext(r.Context()))
	if err != nil {
		t.log.Warn("session refused", zap.String("route", rte.Path), zap.Error(err))
		refuse(w, msg.ID, err)
		return
	}
	t.log.Info("session started", zap.String("route", rte.Path), zap.Stringer("protocol_version", version), core.ClientField(p.ClientInfo))
	w.Header().Set(mcp.HeaderSessionID, sess.ID())
	edge.WriteJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, t.core.InitializeResult(r.Context(), rte, version)))
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

// challengeScopes makes the access decision on a routed request and, when
// the policy refuses it only for missing scopes, answers 403
// insufficient_scope before any stream starts (then it returns nil).
func (t *Transport) challengeScopes(w http.ResponseWriter, r *http.Request, sess *core.Session, msg *jsonrpc.Message, p *mcp.Params) *core.Verdict {
	rte := sess.Route()
	v := t.core.DecideParams(r.Context(), rte, msg, p)
	required, detail, ok := t.core.ScopeChallenge(r.Context(), rte, msg, v)
	if !ok {
		return v
	}
	g := edge.Guard{Auth: rte.Gen.Auth, Route: rte.Path, Resource: rte.Resource, Scopes: rte.Scopes, RequireDPoP: rte.RequireDPoP, Log: t.log, Metrics: t.core.Metrics()}
	g.Refuse(w, r, &auth.Error{Reason: auth.InsufficientScope, Detail: detail, Scopes: required})
	t.core.Metrics().RequestOutcome(rte.Path, msg.Method, metrics.OutcomeDenied) // refused by the policy before dispatch
	return nil
}

// request answers one request. Routed requests answer on an SSE stream
// when the client accepts one, so that what the upstream sends during the
// call (progress, log messages, sampling/elicitation/roots requests) reaches
// this caller on this call's own stream; everything else answers JSON.
func (t *Transport) request(w http.ResponseWriter, r *http.Request, sess *sessions.Session, msg *jsonrpc.Message, p *mcp.Params) {
	var v *core.Verdict
	if mcp.Routed(msg.Method) {
		if v = t.challengeScopes(w, r, sess.Session, msg, p); v == nil {
			return
		}
	}
	if !mcp.Routed(msg.Method) || !edge.Accepts(r, mcp.ContentTypeEventStream) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(sess.Context(), cancel) // DELETE ends in-flight calls too
		defer stop()
		sess.Track(msg.ID, cancel)
		defer sess.Untrack(msg.ID)
		edge.WriteJSON(w, http.StatusOK, t.core.Handle(ctx, sess.Session, msg, v, nil))
		return
	}
	// A streamed call belongs to the session, not to the connection: if the
	// stream breaks, the call goes on and the client resumes with
	// Last-Event-ID. notifications/cancelled, DELETE or the session's end
	// stop it.
	ctx, cancel := context.WithCancel(auth.WithPrincipal(sess.Context(), auth.FromContext(r.Context())))
	ctx = edge.WithRequestLog(ctx, r.Context())                      // request_id on this call's log lines
	ctx = telemetry.WithTrace(ctx, telemetry.TraceFrom(r.Context())) // trace context passed upstream
	defer cancel()
	sess.Track(msg.ID, cancel)
	defer sess.Untrack(msg.ID)
	route := sess.Route().Path
	t.core.Metrics().CallStream(route, +1)       // metrics
	defer t.core.Metrics().CallStream(route, -1) // metrics
	rw := newHeldWriter(w, sess.Events, t.sessions.NewStreamID(), msg.ID, sess.Version().AtLeast(mcp.Version20251125))
	// A client that goes away while the call runs has cut the stream (no
	// write may fail until the call's next event): tell the log now, as a
	// resume on another replica may follow at once. Stopped before the
	// handler returns, which ends r's context too. Only a log that cares
	// (sessions.redis) is watched for: the watch costs six allocations of
	// every call, and the in-memory log's cut is a no-op.
	stopCut := noCut
	if rw.cutter != nil {
		stopCut = context.AfterFunc(r.Context(), rw.cut)
	}
	// The hold: most calls answer well within sessions.priming_hold, and
	// one write instead of two is a tenth or more of the gateway's CPU per
	// small call (a syscall, which on loopback also runs the receiver's
	// TCP path, a packet, a wakeup of the client). A call still running
	// after it gets its priming event then. The hold is no worse for the
	// client than a JSON answer, which carries no event id at all.
	hold := sess.Route().Gen.Limits.PrimingHold
	if !rw.held || hold <= 0 {
		rw.flushPriming() // priming_hold: 0s, the spec's "immediately"
		hold = 0
	}
	resp := t.core.Serve(ctx, sess.Session, msg, v, rw, hold)
	if b, err := jsonrpc.Encode(resp); err == nil {
		rw.writeLast(b)
	}
	stopCut()
	sess.Events.Finish(rw.stream)
}

// noCut is the stop of a cut nobody watches for.
func noCut() bool { return false }

// Get serves GET on the route path: the session's standalone stream, or
// the rest of a lost stream (Last-Event-ID).
func (t *Transport) Get(w http.ResponseWriter, r *http.Request, rte *core.Route) {
	if !edge.Accepts(r, mcp.ContentTypeEventStream) {
		edge.Error(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "GET opens an event stream: Accept must include text/event-stream")
		return
	}
	sess, ok := t.session(w, r, rte)
	if !ok {
		return
	}
	lastID := r.Header.Get("Last-Event-ID")
	if lastID != "" && replay(w, r, sess, lastID, t.core.Metrics()) {
		return // the rest of a POST stream; the standalone stream is another matter
	}
	if !sess.OpenStream() {
		edge.Error(w, http.StatusConflict, jsonrpc.CodeInvalidRequest, "this session already has an open GET stream")
		return
	}
	defer sess.CloseStream()
	dl := newStreamDeadline(w, rte) // deadline.go
	defer dl.arm()                  // the response's last bytes get one timeout more
	rw := newResumableWriter(w, sess.Events, sessions.StandaloneStream, nil, sess.Version().AtLeast(mcp.Version20251125))
	if !rw.live {
		dl.failed(t.core, t.log, "GET", rte)
		return
	}
	if stream, seq, ok := sessions.ParseEventID(lastID); ok && stream == sessions.StandaloneStream {
		missed, err := sess.Events.Since(sessions.StandaloneStream, seq)
		if errors.Is(err, sessions.ErrPurged) {
			// What was lost were hints (list changes, resource updates):
			// the client is told to re-read everything instead.
			for _, m := range mcp.ListChangedNotifications() {
				if b, err := jsonrpc.Encode(jsonrpc.NewNotification(m, nil)); err == nil {
					rw.write(b)
				}
			}
		}
		for _, e := range missed.Events {
			dl.arm()
			if rw.sw.Write(sse.Event{ID: e.ID(), Name: "message", Data: e.Data}) != nil {
				dl.failed(t.core, t.log, "GET", rte)
				return
			}
		}
	}
	keep := time.NewTicker(t.keepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.Context().Done():
			return
		case <-t.core.Draining():
			return
		case b := <-sess.Outbox():
			dl.arm()
			rw.write(b)
			if !rw.live {
				dl.failed(t.core, t.log, "GET", rte)
				return
			}
		case <-keep.C:
			dl.arm()
			if rw.sw.Comment("keep-alive") != nil {
				dl.failed(t.core, t.log, "GET", rte)
				return
			}
		}
	}
}

// Delete serves DELETE on the route path: the client ends its session.
func (t *Transport) Delete(w http.ResponseWriter, r *http.Request, rte *core.Route) {
	sess, ok := t.session(w, r, rte)
	if !ok {
		return
	}
	t.sessions.Delete(sess.ID())
	t.log.Info("session ended by client", zap.String("route", rte.Path))
	w.WriteHeader(http.StatusNoContent)
}
