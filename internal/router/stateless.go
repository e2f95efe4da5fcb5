package router

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Cache hints on stateless list results that the upstream did not give.
// The gateway announces every catalog change on subscriptions/listen, so a
// client may keep a list for a while; reads are never cached by default.
const (
	listTTL = 30 * time.Second
)

// isStateless reports whether a POST without a session id is a 2026-07-28
// (stateless) request rather than a legacy one: it says so in its version
// header or its _meta, or it is server/discover.
func isStateless(r *http.Request, msg *jsonrpc.Message) bool {
	if v := r.Header.Get(mcp.HeaderProtocolVersion); v != "" && !mcp.IsSupported(v) {
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
	writeJSON(w, statelessStatus(e.Code), jsonrpc.NewError(id, e))
}

func statelessStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError,
		mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapability, mcp.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// stateless serves one 2026-07-28 request. Everything it needs travels in
// the request itself, so any replica can serve it: no session is looked up.
func (rt *Router) stateless(w http.ResponseWriter, r *http.Request, rte *route, msg *jsonrpc.Message) {
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
	sess, jerr := rt.statelessSession(r, rte, msg)
	if jerr != nil {
		statelessError(w, msg.ID, jerr)
		return
	}
	defer sess.cancel()

	switch msg.Method {
	case mcp.MethodServerDiscover:
		writeJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, rt.discover(rte)))
		return
	case mcp.MethodSubscriptionsListen:
		rt.listen(w, r, sess, msg)
		return
	case mcp.MethodInitialize, mcp.MethodPing, mcp.MethodLoggingSetLevel, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q does not exist in protocol revision %s", msg.Method, sess.version))
		return
	}
	if _, ok := lists[msg.Method]; !ok && !mcp.Routed(msg.Method) {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
		return
	}
	if mcp.Routed(msg.Method) && rt.challengeScopes(w, r, sess, msg) {
		return
	}
	if msg.Method == mcp.MethodToolsCall {
		if jerr := rt.checkParamHeaders(r.Context(), sess, msg, r.Header); jerr != nil {
			statelessError(w, msg.ID, jerr)
			return
		}
	}
	if mcp.Routed(msg.Method) {
		for k, v := range r.Header {
			if strings.HasPrefix(k, "Mcp-Param-") {
				if sess.paramHeaders == nil {
					sess.paramHeaders = http.Header{}
				}
				sess.paramHeaders[k] = v
			}
		}
		rt.serveBridged(w, r, sess, msg)
		return
	}
	resp := rt.statelessResult(msg.Method, rt.dispatch(r.Context(), sess, msg, nil))
	status := http.StatusOK
	if resp.Error != nil {
		status = statelessStatus(resp.Error.Code)
	}
	writeJSON(w, status, resp)
}

// statelessSession validates the per-request _meta and the mirrored headers
// and returns a session that lives for this request only.
func (rt *Router) statelessSession(r *http.Request, rte *route, msg *jsonrpc.Message) (*Session, *jsonrpc.Error) {
	meta, ok := rawjson.Get(msg.Params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta is required in protocol revision %s: it carries %s and %s", mcp.Version20260728, mcp.MetaProtocolVersion, mcp.MetaClientCapabilities)
	}
	version, ok := rawjson.GetString(meta, mcp.MetaProtocolVersion)
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required", mcp.MetaProtocolVersion)
	}
	caps, ok := rawjson.Get(meta, mcp.MetaClientCapabilities)
	if !ok || len(caps) == 0 || caps[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required (an object, {} when the client offers nothing)", mcp.MetaClientCapabilities)
	}
	if h := r.Header.Get(mcp.HeaderProtocolVersion); h != version {
		return nil, jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: MCP-Protocol-Version %q does not match _meta protocolVersion %q", h, version)
	}
	if !mcp.IsStateless(version) {
		data, _ := json.Marshal(map[string]any{"supported": mcp.AllVersions, "requested": version})
		return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version " + version, Data: data}
	}
	if h := r.Header.Get(mcp.HeaderMethod); h != msg.Method {
		return nil, jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: Mcp-Method %q does not match the body's method %q", h, msg.Method)
	}
	if field := mcp.NameHeaderField(msg.Method); field != "" {
		body, _ := rawjson.GetString(msg.Params, field)
		h, err := decodeHeaderValue(r.Header.Get(mcp.HeaderName))
		if err != nil || h != body {
			return nil, jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: Mcp-Name %q does not match params.%s %q", r.Header.Get(mcp.HeaderName), field, body)
		}
	}
	level, _ := rawjson.GetString(meta, mcp.MetaLogLevel)
	info, _ := rawjson.Get(meta, mcp.MetaClientInfo)
	ctx, cancel := context.WithCancel(r.Context())
	s := &Session{
		owner:     auth.FromContext(r.Context()).Key(),
		version:   version,
		caps:      caps,
		info:      info,
		stateless: true,
		logLevel:  level,
		ctx:       ctx,
		cancel:    cancel,
		outbox:    make(chan []byte, 64),
		inflight:  map[string]context.CancelFunc{},
		outgoing:  map[string]chan *jsonrpc.Message{},
	}
	s.setRoute(rte)
	return s, nil
}

// decodeHeaderValue undoes the =?base64?…?= sentinel clients use for header
// values that are not plain ASCII.
func decodeHeaderValue(v string) (string, error) {
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(inner)
			return string(b), err
		}
	}
	return v, nil
}

// statelessResult adapts a response for a 2026-07-28 client: results carry
// resultType (legacy upstreams omit it), cacheable results carry ttlMs and
// cacheScope, and resource-not-found uses -32602.
func (rt *Router) statelessResult(method string, resp *jsonrpc.Message) *jsonrpc.Message {
	resp = statelessResult(method, resp)
	if resp.Error != nil {
		return resp
	}
	// The client's server is the gateway: an upstream's identity in the
	// per-hop _meta is replaced by the gateway's.
	if meta, ok := rawjson.Get(resp.Result, "_meta"); ok {
		if _, has := rawjson.Get(meta, mcp.MetaServerInfo); has {
			if m, err := rawjson.Set(meta, mcp.MetaServerInfo, mustJSON(rt.opts.ServerInfo)); err == nil {
				if res, err := rawjson.Set(resp.Result, "_meta", m); err == nil {
					resp.Result = res
				}
			}
		}
	}
	return resp
}

func statelessResult(method string, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Error != nil {
		if resp.Error.Code == mcp.CodeResourceNotFound {
			e := *resp.Error
			e.Code = jsonrpc.CodeInvalidParams
			resp.Error = &e
		}
		return resp
	}
	res := resp.Result
	if _, ok := rawjson.Get(res, "resultType"); !ok {
		// An older upstream's result that carries input requests (an SDK's
		// multi-round-trip emulation does this on its second round) is an
		// input_required result, whatever it forgot to say.
		kind := "complete"
		if _, ok := rawjson.Get(res, "inputRequests"); ok {
			kind = "input_required"
		}
		if r, err := rawjson.SetString(res, "resultType", kind); err == nil {
			res = r
		}
	}
	if _, isList := lists[method]; isList || method == mcp.MethodResourcesRead {
		ttl := listTTL.Milliseconds()
		if method == mcp.MethodResourcesRead {
			ttl = 0
		}
		if _, ok := rawjson.Get(res, "ttlMs"); !ok {
			if r, err := rawjson.Set(res, "ttlMs", json.RawMessage(jsonInt(ttl))); err == nil {
				res = r
			}
		}
		if _, ok := rawjson.Get(res, "cacheScope"); !ok {
			if r, err := rawjson.SetString(res, "cacheScope", "public"); err == nil {
				res = r
			}
		}
	}
	resp.Result = res
	return resp
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// discover answers server/discover for a route.
func (rt *Router) discover(rte *route) json.RawMessage {
	b, _ := json.Marshal(struct {
		ResultType        string          `json:"resultType"`
		TTLMs             int64           `json:"ttlMs"`
		CacheScope        string          `json:"cacheScope"`
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		ServerInfo        any             `json:"serverInfo"`
		Instructions      string          `json:"instructions,omitempty"`
		Meta              map[string]any  `json:"_meta"`
	}{
		ResultType:        "complete",
		TTLMs:             listTTL.Milliseconds(),
		CacheScope:        "public",
		SupportedVersions: mcp.AllVersions,
		Capabilities:      rte.view.WithTaskCapabilities(capabilities(), true), // the tasks extension when an upstream has it
		ServerInfo:        rt.opts.ServerInfo,
		Instructions:      rte.view.Instructions(),
		Meta:              map[string]any{mcp.MetaServerInfo: rt.opts.ServerInfo},
	})
	return b
}

// listenFilter is what a subscriptions/listen stream opted in to.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

func (f *listenFilter) wants(method string) bool {
	switch method {
	case mcp.NotificationToolsListChanged:
		return f.ToolsListChanged
	case mcp.NotificationPromptsChanged:
		return f.PromptsListChanged
	case mcp.NotificationResourcesChanged:
		return f.ResourcesListChanged
	}
	return false
}

// listen serves subscriptions/listen: an SSE stream that first acknowledges
// what it will deliver, then carries the opted-in change notifications,
// each tagged with the subscription id (the request's id).
func (rt *Router) listen(w http.ResponseWriter, r *http.Request, sess *Session, msg *jsonrpc.Message) {
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications is required"))
		return
	}
	if !accepts(r, mcp.ContentTypeEventStream) {
		statelessError(w, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "subscriptions/listen answers with an event stream: Accept must include text/event-stream"))
		return
	}
	f := p.Notifications
	sess.subscriptionID = json.RawMessage(msg.ID)
	sess.filter = f
	// Resource subscriptions share the legacy reference counting.
	var acked []string
	for _, uri := range f.ResourceSubscriptions {
		sub := jsonrpc.NewRequest(msg.ID, mcp.MethodResourcesSubscribe, mustJSON(map[string]string{"uri": uri}))
		if resp := rt.subscribe(r.Context(), sess, sub); resp.Error == nil {
			acked = append(acked, uri)
		} else {
			rt.log.Debug("listen: resource subscription refused", zap.String("uri", uri), zap.String("error", resp.Error.Message))
		}
	}
	defer rt.endSubscriptions(sess)
	ack := *f
	ack.ResourceSubscriptions = acked
	rt.addListener(sess)
	defer rt.removeListener(sess)

	sw := sse.NewWriter(w)
	ackParams, _ := json.Marshal(map[string]any{"notifications": ack, "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.subscriptionID}})
	if b, err := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationSubscriptionsAcked, ackParams)); err == nil {
		_ = sw.Write(sse.Event{Data: b})
	}
	keep := time.NewTicker(rt.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.ctx.Done(): // its route went away in a reload
			return
		case <-rt.drain:
			// Ending gracefully: the listen request gets its result.
			res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.subscriptionID}})
			if b, err := jsonrpc.Encode(jsonrpc.NewResult(msg.ID, res)); err == nil {
				_ = sw.Write(sse.Event{Data: b})
			}
			return
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

func (rt *Router) addListener(s *Session) {
	rt.listenersMu.Lock()
	rt.listeners[s] = true
	rt.listenersMu.Unlock()
}

func (rt *Router) removeListener(s *Session) {
	rt.listenersMu.Lock()
	delete(rt.listeners, s)
	rt.listenersMu.Unlock()
}

// listenersFor returns the listen streams that want method from one of ups.
func (rt *Router) listenersFor(method string, ups map[string]bool) []*Session {
	rt.listenersMu.Lock()
	defer rt.listenersMu.Unlock()
	var out []*Session
	for s := range rt.listeners {
		if s.filter.wants(method) && slices.ContainsFunc(s.route().view.Upstreams(), func(u string) bool { return ups[u] }) {
			out = append(out, s)
		}
	}
	return out
}

// tag adds the session's subscription id to a notification's params, for
// delivery on a subscriptions/listen stream; legacy sessions are unchanged.
func (s *Session) tag(params json.RawMessage) json.RawMessage {
	if s.subscriptionID == nil {
		return params
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	meta, _ := rawjson.Get(params, "_meta")
	meta, err := rawjson.Set(meta, mcp.MetaSubscriptionID, s.subscriptionID)
	if err != nil {
		meta, _ = json.Marshal(map[string]json.RawMessage{mcp.MetaSubscriptionID: s.subscriptionID})
	}
	out, err := rawjson.Set(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}
