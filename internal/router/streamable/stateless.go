package streamable

import (
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// isStateless reports whether a POST without a session id is a 2026-07-28
// (stateless) request rather than a session revision's first one: it says so in its version
// header or its _meta, or it is server/discover.
func isStateless(r *http.Request, msg *jsonrpc.Message, p *mcp.Params) bool {
	if v := mcp.Revision(r.Header.Get(mcp.HeaderProtocolVersion)); v != "" && !v.Initializes() {
		return true
	}
	return msg.Method == mcp.MethodServerDiscover || p.Stateless()
}

// statelessError answers a stateless request with a JSON-RPC error and the
// HTTP status the 2026-07-28 transport assigns to its code.
func statelessError(w http.ResponseWriter, id jsonrpc.ID, e *jsonrpc.Error) {
	edge.WriteJSON(w, core.StatelessStatus(e.Code), jsonrpc.NewError(id, e))
}

// stateless serves one 2026-07-28 request. Everything it needs travels in
// the request itself, so any replica can serve it: no session is looked up.
func (t *Transport) stateless(w http.ResponseWriter, r *http.Request, rte *core.Route, msg *jsonrpc.Message, p *mcp.Params) {
	switch msg.Kind() {
	case jsonrpc.KindNotification:
		// 2026-07-28 defines no client notifications over HTTP (closing the
		// stream cancels); accept and ignore, as the transport says.
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindResponse:
		statelessError(w, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "clients send no responses in 2026-07-28; answer input requests by retrying with inputResponses"))
		return
	}
	if msg.Method == mcp.MethodPing && !p.Stateless() {
		// 2026-07-28 removed ping, but the Go SDK's client still sends one
		// (no _meta, the version only in its header), and its server
		// answers: so does the gateway, as leniently. A ping that says it
		// is 2026-07-28 in _meta is refused below as the revision says.
		edge.WriteJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, []byte(`{}`)))
		return
	}
	sess, jerr := t.statelessSession(r, rte, msg, p)
	if jerr != nil {
		statelessError(w, msg.ID, jerr)
		return
	}
	defer sess.End()

	switch msg.Method {
	case mcp.MethodServerDiscover:
		edge.WriteJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, t.core.Discover(r.Context(), rte)))
		return
	case mcp.MethodSubscriptionsListen:
		t.listen(w, r, sess, msg)
		return
	}
	if jerr := core.CheckStatelessMethod(msg.Method, sess.Version()); jerr != nil {
		statelessError(w, msg.ID, jerr)
		return
	}
	var v *core.Verdict
	if mcp.Routed(msg.Method) {
		if v = t.challengeScopes(w, r, sess, msg, p); v == nil {
			return
		}
	}
	if msg.Method == mcp.MethodToolsCall {
		if jerr := checkParamHeaders(r.Context(), sess, p, r.Header); jerr != nil {
			statelessError(w, msg.ID, jerr)
			return
		}
	}
	if mcp.Routed(msg.Method) {
		t.bridged(w, r, sess, msg, v)
		return
	}
	resp := t.core.StatelessResult(msg.Method, t.core.Handle(r.Context(), sess, msg, nil, nil))
	status := http.StatusOK
	if resp.Error != nil {
		status = core.StatelessStatus(resp.Error.Code)
	}
	edge.WriteJSON(w, status, resp)
}

// statelessSession validates the per-request _meta and the mirrored headers
// and returns a session that lives for this request only.
func (t *Transport) statelessSession(r *http.Request, rte *core.Route, msg *jsonrpc.Message, p *mcp.Params) (*core.Session, *jsonrpc.Error) {
	m, jerr := core.StatelessMetaOf(p)
	if jerr != nil {
		return nil, jerr
	}
	if h := r.Header.Get(mcp.HeaderProtocolVersion); h != m.RawVersion {
		return nil, jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: MCP-Protocol-Version %q does not match _meta protocolVersion %q", h, m.Version)
	}
	if jerr := m.CheckVersion(); jerr != nil {
		return nil, jerr
	}
	if jerr := mcp.CheckMirrorParams(r.Header, msg.Method, p); jerr != nil {
		return nil, jerr
	}
	return core.NewRequestSession(r.Context(), rte, m.Version, m.Caps, m.Info, auth.FromContext(r.Context()).Key(), m.Level, msg.Method == mcp.MethodSubscriptionsListen), nil
}

// listen serves subscriptions/listen: an SSE stream that first acknowledges
// what it will deliver, then carries the opted-in change notifications,
// each tagged with the subscription id (the request's id).
func (t *Transport) listen(w http.ResponseWriter, r *http.Request, sess *core.Session, msg *jsonrpc.Message) {
	if !edge.Accepts(r, mcp.ContentTypeEventStream) {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "subscriptions/listen answers with an event stream: Accept must include text/event-stream"))
		return
	}
	ack, end, jerr := t.core.OpenListen(r.Context(), sess, msg)
	if jerr != nil {
		statelessError(w, msg.ID, jerr)
		return
	}
	defer end()

	rte := sess.Route()
	dl := newStreamDeadline(w, rte) // deadline.go
	defer dl.arm()
	sw := sse.NewWriter(w)
	if sw.Write(sse.Event{Data: ack}) != nil {
		dl.failed(t.core, t.log, "subscriptions/listen", rte)
		return
	}
	keep := time.NewTicker(t.keepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.Context().Done(): // its route went away in a reload
			return
		case <-t.core.Draining():
			// Ending gracefully: the listen request gets its result.
			if b, err := jsonrpc.Encode(core.ListenResult(sess, msg.ID)); err == nil {
				dl.arm()
				_ = sw.Write(sse.Event{Data: b})
			}
			return
		case b := <-sess.Outbox():
			dl.arm()
			if sw.Write(sse.Event{Data: b}) != nil {
				dl.failed(t.core, t.log, "subscriptions/listen", rte)
				return
			}
		case <-keep.C:
			dl.arm()
			if sw.Comment("keep-alive") != nil {
				dl.failed(t.core, t.log, "subscriptions/listen", rte)
				return
			}
		}
	}
}
