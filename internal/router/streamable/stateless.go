package streamable

import (
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// isStateless reports whether a POST without a session id is a 2026-07-28
// (stateless) request rather than a session revision's first one: it says so in its version
// header or its _meta, or it is server/discover.
func isStateless(r *http.Request, msg *jsonrpc.Message) bool {
	if v := mcp.Revision(r.Header.Get(mcp.HeaderProtocolVersion)); v != "" && !v.Initializes() {
		return true
	}
	if msg.Method == mcp.MethodServerDiscover {
		return true
	}
	meta, ok := rawjson.Get(msg.Params, "_meta")
	if !ok {
		return false
	}
	_, ok = rawjson.Get(meta, mcp.MetaProtocolVersion)
	return ok
}

// statelessError answers a stateless request with a JSON-RPC error and the
// HTTP status the 2026-07-28 transport assigns to its code.
func statelessError(w http.ResponseWriter, id jsonrpc.ID, e *jsonrpc.Error) {
	edge.WriteJSON(w, core.StatelessStatus(e.Code), jsonrpc.NewError(id, e))
}

// stateless serves one 2026-07-28 request. Everything it needs travels in
// the request itself, so any replica can serve it: no session is looked up.
func (t *Transport) stateless(w http.ResponseWriter, r *http.Request, rte *core.Route, msg *jsonrpc.Message) {
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
	sess, jerr := t.statelessSession(r, rte, msg)
	if jerr != nil {
		statelessError(w, msg.ID, jerr)
		return
	}
	defer sess.End()

	switch msg.Method {
	case mcp.MethodServerDiscover:
		edge.WriteJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, t.core.Discover(rte)))
		return
	case mcp.MethodSubscriptionsListen:
		t.listen(w, r, sess, msg)
		return
	case mcp.MethodInitialize, mcp.MethodPing, mcp.MethodLoggingSetLevel, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q does not exist in protocol revision %s", msg.Method, sess.Version()))
		return
	}
	if !core.IsList(msg.Method) && !mcp.Routed(msg.Method) {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
		return
	}
	var v *core.Verdict
	if mcp.Routed(msg.Method) {
		if v = t.challengeScopes(w, r, sess, msg); v == nil {
			return
		}
	}
	if msg.Method == mcp.MethodToolsCall {
		if jerr := checkParamHeaders(r.Context(), sess, msg, r.Header); jerr != nil {
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
func (t *Transport) statelessSession(r *http.Request, rte *core.Route, msg *jsonrpc.Message) (*core.Session, *jsonrpc.Error) {
	meta, ok := rawjson.Get(msg.Params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta is required in protocol revision %s: it carries %s and %s", mcp.Version20260728, mcp.MetaProtocolVersion, mcp.MetaClientCapabilities)
	}
	v, ok := rawjson.GetString(meta, mcp.MetaProtocolVersion)
	version := mcp.Revision(v)
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required", mcp.MetaProtocolVersion)
	}
	caps, ok := rawjson.Get(meta, mcp.MetaClientCapabilities)
	if !ok || len(caps) == 0 || caps[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required (an object, {} when the client offers nothing)", mcp.MetaClientCapabilities)
	}
	if h := r.Header.Get(mcp.HeaderProtocolVersion); h != v {
		return nil, jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: MCP-Protocol-Version %q does not match _meta protocolVersion %q", h, version)
	}
	if !version.Stateless() {
		data, _ := json.Marshal(map[string]any{"supported": mcp.AllVersions, "requested": version})
		return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version " + v, Data: data}
	}
	if jerr := mcp.CheckMirrorHeaders(r.Header, msg.Method, msg.Params); jerr != nil {
		return nil, jerr
	}
	level, _ := rawjson.GetString(meta, mcp.MetaLogLevel)
	info, _ := rawjson.Get(meta, mcp.MetaClientInfo)
	return core.NewRequestSession(r.Context(), rte, version, caps, info, auth.FromContext(r.Context()).Key(), level), nil
}

// listen serves subscriptions/listen: an SSE stream that first acknowledges
// what it will deliver, then carries the opted-in change notifications,
// each tagged with the subscription id (the request's id).
func (t *Transport) listen(w http.ResponseWriter, r *http.Request, sess *core.Session, msg *jsonrpc.Message) {
	var p struct {
		Notifications *mcp.ListenFilter `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications is required"))
		return
	}
	if !edge.Accepts(r, mcp.ContentTypeEventStream) {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "subscriptions/listen answers with an event stream: Accept must include text/event-stream"))
		return
	}
	f := p.Notifications
	sess.Listen(json.RawMessage(msg.ID))
	// Resource subscriptions share the sessions' reference counting.
	var acked []string
	for _, uri := range f.ResourceSubscriptions {
		uriParams, _ := json.Marshal(map[string]string{"uri": uri})
		sub := jsonrpc.NewRequest(msg.ID, mcp.MethodResourcesSubscribe, uriParams)
		// Through Handle, as resources/subscribe: the access policy and the
		// rate limits apply to what a listen stream watches too.
		if resp := t.core.Handle(r.Context(), sess, sub, nil, nil); resp.Error == nil {
			acked = append(acked, uri)
		} else {
			t.log.Debug("listen: resource subscription refused", zap.String("uri", uri), zap.String("error", resp.Error.Message))
		}
	}
	defer t.core.EndSubscriptions(sess)
	ack := *f
	ack.ResourceSubscriptions = acked
	t.core.AddListener(sess, f)
	defer t.core.RemoveListener(sess)

	sw := sse.NewWriter(w)
	ackParams, _ := json.Marshal(map[string]any{"notifications": ack, "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.SubscriptionID()}})
	if b, err := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationSubscriptionsAcked, ackParams)); err == nil {
		_ = sw.Write(sse.Event{Data: b})
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
			res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.SubscriptionID()}})
			if b, err := jsonrpc.Encode(jsonrpc.NewResult(msg.ID, res)); err == nil {
				_ = sw.Write(sse.Event{Data: b})
			}
			return
		case b := <-sess.Outbox():
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
