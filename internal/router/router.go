// Package router is mcpgw's downstream side: the Streamable HTTP endpoint of
// every configured route (chi), downstream sessions, edge checks (Origin,
// Host, body size), and the dispatch of each MCP request to the host's
// merged catalog or to the upstream that owns it.
package router

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Options configure a Router.
type Options struct {
	Logger *zap.Logger
	// ServerInfo is what initialize reports as serverInfo.
	ServerInfo mcp.Implementation
	// IdleTimeout ends sessions unused for this long (default 1h).
	IdleTimeout time.Duration
	// KeepAlive is the interval of SSE comment keep-alives (default 25s).
	KeepAlive time.Duration
	// Metrics counts requests and streams (nil: none; see metrics.go).
	Metrics *metrics.Metrics
	// Auth authenticates every request on every route (nil: requests are
	// anonymous; see auth.go).
	Auth *auth.Authenticator
	// Policy decides what each principal may list and call (nil: all;
	// see guard.go). Limiter applies the rate limits (nil: none).
	Policy  *policy.Policy
	Limiter *policy.Limiter
	// SessionKeys, when set (sessions.key_file, from ParseSessionKeys),
	// make legacy session ids AEAD tokens any replica with the same keys
	// can serve (sessiontoken.go).
	SessionKeys [][]byte
	// AdvertiseURL (sessions.advertise_url) is where the other replicas
	// reach this one: bridged retries that reach them are forwarded here
	// (bridgeforward.go). Only with SessionKeys.
	AdvertiseURL string
	// Pinner checks tool definitions against the pinning lock (nil: off).
	Pinner *policy.Pinner
	// Audit records tool calls, prompt gets, resource reads and refusals
	// (nil: off; see audit.go).
	Audit *audit.Logger
}

// Router serves every route of the config generation in force. A reload
// (Reload, reload.go) swaps in a new generation — routes, views, policy,
// limiter, pinner, authenticator, audit log, edge settings and the chi mux —
// atomically; sessions survive it.
type Router struct {
	log       *zap.Logger
	opts      Options
	host      *host.Host
	gen       atomic.Pointer[generation] // read once per request
	sessions  *sessionStore
	subs      *subscriptions
	changes   chan listChange
	legacy    *legacySSE
	pinWarned sync.Map // pinning verdicts already logged

	listenersMu sync.Mutex
	listeners   map[*Session]bool // open subscriptions/listen streams

	bridge  *bridge      // legacy upstreams' input requests parked for 2026-07-28 clients
	forward *http.Client // passes bridged retries to the replica holding their call (bridgeforward.go)

	levelsMu sync.Mutex
	levels   map[string]string // log level last asked of each shared upstream

	stop      chan struct{}
	drain     chan struct{} // closed by Drain: no new sessions, GET streams end
	wg        sync.WaitGroup
	goMu      sync.Mutex // guards closed against goOwned's wg.Add
	closed    bool       // Close began: goOwned starts nothing
	once      sync.Once
	drainOnce sync.Once
}

// generation is everything one config generation decides about serving.
type generation struct {
	mux    chi.Router
	routes []*route // in config order (ServeStdio, stdio.go)
	byPath map[string]*route

	auth    *auth.Authenticator // nil: no authentication (auth.go)
	policy  *policy.Policy      // nil: all allowed (guard.go)
	limiter *policy.Limiter     // nil: no rate limits
	pinner  *policy.Pinner      // nil: pinning off
	audit   *audit.Logger       // nil: audit off (audit.go)
	// privateLists: lists depend on who asks (auth or policy rules), so
	// 2026 list results are cacheScope private.
	privateLists bool
	origins      map[string]bool
	hosts        []string // allowed Host names on a loopback listener; nil = any
	maxBody      int64
}

type route struct {
	path     string
	view     *host.View
	resource string   // canonical URI (token audience), when auth is on
	scopes   []string // every caller needs these (auth.required_scopes + the route's)
	gen      *generation
}

// New builds the router for cfg over h.
func New(cfg *config.Config, h *host.Host, opts Options) *Router {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = time.Hour
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 25 * time.Second
	}
	if opts.ServerInfo.Name == "" {
		opts.ServerInfo = mcp.Implementation{Name: "mcpgw", Version: "dev"}
	}
	rt := &Router{
		log:       opts.Logger,
		opts:      opts,
		host:      h,
		sessions:  newSessionStore(opts.SessionKeys),
		subs:      newSubscriptions(),
		changes:   make(chan listChange, 64),
		listeners: map[*Session]bool{},
		levels:    map[string]string{},
		bridge:    newBridge(opts.Metrics, opts.SessionKeys, opts.AdvertiseURL),
		forward:   forwardClient(),
		stop:      make(chan struct{}),
		drain:     make(chan struct{}),
	}
	rt.legacy = rt.newLegacySSE() // 2024-11-05 HTTP+SSE endpoints (legacysse.go)
	rt.gen.Store(rt.build(cfg, opts))

	rt.sessions.onEnd = func(s *Session) {
		rt.endSubscriptions(s)
		h.ReleaseSession(s.id) // stateful upstreams' per-session connections
	}
	rt.wg.Add(2)
	go rt.reaper()
	go rt.coalesce()
	return rt
}

// build makes the generation of cfg over the host's current upstream set,
// with the authenticator, policy, limiter, pinner and audit log of opts.
func (rt *Router) build(cfg *config.Config, opts Options) *generation {
	g := &generation{
		byPath:       map[string]*route{},
		auth:         opts.Auth,
		policy:       opts.Policy,
		limiter:      opts.Limiter,
		pinner:       opts.Pinner,
		audit:        opts.Audit,
		privateLists: opts.Auth != nil || (cfg.Policy != nil && len(cfg.Policy.Rules) > 0),
		origins:      map[string]bool{},
		maxBody:      cfg.MaxBodyBytes,
		hosts:        allowedHosts(cfg),
	}
	if g.maxBody <= 0 {
		g.maxBody = 4 << 20
	}
	for _, o := range cfg.AllowedOrigins {
		g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}

	mux := chi.NewRouter()
	mux.Use(rt.requestID) // X-Request-Id, request_id on log lines (requestid.go)
	mux.Use(rt.edge(g))
	taken := map[string]bool{} // route paths, never shadowed by legacy endpoints
	for _, rc := range cfg.Routes {
		taken[rc.Path] = true
	}
	for _, rc := range cfg.Routes {
		r := &route{path: rc.Path, view: rt.host.RouteView(rc), gen: g}
		if g.auth != nil {
			r.resource, r.scopes = g.auth.Resource(rc.Path), g.auth.RequiredScopes(rc.Scopes)
		}
		// Authentication, after the edge checks and before any handler
		// reads the body (auth.go).
		mux := mux.With(rt.authenticate(r))
		g.routes = append(g.routes, r)
		g.byPath[r.path] = r
		rt.legacy.register(mux, r, taken) // GET <path>/sse, POST <path>/message
		mux.Post(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.post(w, req, r) })
		mux.Get(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.get(w, req, r) })
		mux.Delete(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.delete(w, req, r) })
	}
	rt.serveMetadata(mux, cfg, g) // RFC 9728 documents (auth.go)
	mux.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "method "+req.Method+" not allowed; MCP uses POST, GET and DELETE")
	})
	mux.NotFound(func(w http.ResponseWriter, req *http.Request) {
		httpError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "no MCP route at "+req.URL.Path)
	})
	g.mux = mux
	return g
}

// current is the generation in force.
func (rt *Router) current() *generation { return rt.gen.Load() }

// ServeHTTP serves the MCP listener with the generation in force.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.current().mux.ServeHTTP(w, r) }

// Drain prepares a graceful stop: new sessions are refused and GET streams
// end (clients reconnect elsewhere), while in-flight requests go on.
func (rt *Router) Drain() {
	rt.drainOnce.Do(func() { close(rt.drain) })
}

// Close ends every session, cancelling what is still in flight, and stops
// the router's goroutines.
func (rt *Router) Close() {
	rt.Drain()
	rt.once.Do(func() {
		rt.goMu.Lock()
		rt.closed = true
		rt.goMu.Unlock()
		close(rt.stop)
		rt.bridge.closeAll()
		rt.sessions.closeAll()
		rt.wg.Wait()
	})
}

// goOwned runs f on a goroutine Close waits for, unless Close has begun
// (then it reports false and runs nothing): a WaitGroup must not be added
// to once it may be waited on at zero.
func (rt *Router) goOwned(f func()) bool {
	rt.goMu.Lock()
	defer rt.goMu.Unlock()
	if rt.closed {
		return false
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		f()
	}()
	return true
}

func (rt *Router) reaper() {
	defer rt.wg.Done()
	tick := time.NewTicker(min(rt.opts.IdleTimeout/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-rt.stop:
			return
		case <-tick.C:
			if n := rt.sessions.reap(rt.opts.IdleTimeout); n > 0 {
				rt.log.Info("ended idle sessions", zap.Int("count", n))
			}
		}
	}
}

// allowedHosts returns the Host names accepted when the listener is on
// loopback (DNS-rebinding protection), or nil when any Host is fine.
func allowedHosts(cfg *config.Config) []string {
	h, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil || !isLoopbackName(h) {
		return nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	return hosts
}

func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// edge runs the checks every request passes before anything else: Host on a
// loopback listener and Origin against allowed_origins.
func (rt *Router) edge(g *generation) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return rt.edgeHandler(g, next) }
}

func (rt *Router) edgeHandler(g *generation, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.hosts != nil {
			h := r.Host
			if hn, _, err := net.SplitHostPort(h); err == nil {
				h = hn
			}
			h = strings.Trim(strings.ToLower(h), "[]")
			if !slices.Contains(g.hosts, h) && !isLoopbackIP(h) {
				rt.logger(r.Context()).Warn("refused request with a non-loopback Host on a loopback listener", zap.String("host", r.Host))
				httpError(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Host "+r.Host+" is not allowed on this loopback listener (DNS-rebinding protection); set public_url to serve another name")
				return
			}
		}
		if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o) {
			rt.logger(r.Context()).Warn("refused request from an Origin not in allowed_origins", zap.String("origin", o))
			httpError(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Origin "+o+" is not allowed; add it to allowed_origins to serve this web app")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed accepts the configured origins and, on a loopback
// listener, pages served from loopback themselves (a local app talking to a
// local gateway); a page from any other site is refused.
func (g *generation) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if g.origins[o] {
		return true
	}
	if g.hosts == nil {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackName(u.Hostname())
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func accepts(r *http.Request, mediaType string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt == mediaType || mt == "*/*" {
			return true
		}
	}
	return false
}

func (rt *Router) post(w http.ResponseWriter, r *http.Request, rte *route) {
	if r.Header.Get("Accept") != "" && !accepts(r, mcp.ContentTypeJSON) && !accepts(r, mcp.ContentTypeEventStream) {
		httpError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "Accept must include application/json and text/event-stream")
		return
	}
	msg, ok := rt.readMessage(w, r, rte) // pushconn.go
	if !ok {
		return
	}

	if r.Header.Get(mcp.HeaderSessionID) == "" && isStateless(r, msg) {
		rt.stateless(w, r, rte, msg)
		return
	}
	if msg.Kind() == jsonrpc.KindRequest && msg.Method == mcp.MethodInitialize {
		rt.initialize(w, r, rte, msg)
		return
	}
	sess, ok := rt.session(w, r, rte)
	if !ok {
		return
	}
	sess.touch()
	switch msg.Kind() {
	case jsonrpc.KindNotification:
		rt.notification(sess, msg)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse:
		// The client's answer to a request the gateway relayed from an upstream.
		if !sess.answer(msg) {
			rt.log.Debug("dropping a response to no pending server→client request", zap.String("id", msg.ID.String()))
		}
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindRequest:
		rt.request(w, r, sess, msg)
	}
}

// session finds the request's session, answering 400/404 itself when it
// cannot.
func (rt *Router) session(w http.ResponseWriter, r *http.Request, rte *route) (*Session, bool) {
	id := r.Header.Get(mcp.HeaderSessionID)
	if id == "" {
		httpError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id header; send initialize first to start a session")
		return nil, false
	}
	sess := rt.sessions.get(id, rte)
	if sess == nil {
		// Another replica's session, sealed with our key ring?
		sess = rt.sessions.rehydrate(id, rte, auth.FromContext(r.Context()))
	}
	if sess == nil || !rt.ownedBy(sess, r) {
		httpError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "session not found or ended; start a new one with initialize")
		return nil, false
	}
	if v := r.Header.Get(mcp.HeaderProtocolVersion); v != "" && !mcp.IsSupported(v) {
		httpError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "unsupported MCP-Protocol-Version "+v+"; supported: "+strings.Join(mcp.SupportedVersions, ", "))
		return nil, false
	}
	return sess, true
}

func (rt *Router) initialize(w http.ResponseWriter, r *http.Request, rte *route, msg *jsonrpc.Message) {
	if rt.refuseWhileDraining(w) {
		return
	}
	p, version, jerr := negotiateInitialize(msg.Params) // pushconn.go
	if jerr != nil {
		writeJSON(w, http.StatusOK, jsonrpc.NewError(msg.ID, jerr))
		return
	}
	sess := rt.sessions.create(rte, version, p.Capabilities, p.ClientInfo, auth.FromContext(r.Context()))
	rt.log.Info("session started", zap.String("route", rte.path), zap.String("protocol_version", version), zap.ByteString("client", p.ClientInfo))
	w.Header().Set(mcp.HeaderSessionID, sess.id)
	writeJSON(w, http.StatusOK, jsonrpc.NewResult(msg.ID, rt.initializeResult(rte, version)))
}

// refuseWhileDraining answers 503 when the gateway is shutting down and no
// new session may start; it reports whether it answered.
func (rt *Router) refuseWhileDraining(w http.ResponseWriter) bool {
	select {
	case <-rt.drain:
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "mcpgw is shutting down; retry against another replica")
		return true
	default:
		return false
	}
}

// capabilities are what every route offers: the gateway can answer each of
// these whichever upstreams are up, and lists change as upstreams come and go.
func capabilities() json.RawMessage {
	return json.RawMessage(`{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{}}`)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (rt *Router) notification(sess *Session, msg *jsonrpc.Message) {
	switch msg.Method {
	case mcp.NotificationInitialized:
		sess.mu.Lock()
		sess.initialized = true
		sess.mu.Unlock()
	case mcp.NotificationCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil && p.RequestID != nil {
			sess.cancelRequest(p.RequestID)
		}
	}
}

// request answers one request. Routed requests answer on an SSE stream
// when the client accepts one, so that what the upstream sends during the
// call (progress, log messages, sampling/elicitation/roots requests) reaches
// this caller on this call's own stream; everything else answers JSON.
func (rt *Router) request(w http.ResponseWriter, r *http.Request, sess *Session, msg *jsonrpc.Message) {
	if mcp.Routed(msg.Method) && rt.challengeScopes(w, r, sess, msg) {
		return
	}
	if !mcp.Routed(msg.Method) || !accepts(r, mcp.ContentTypeEventStream) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(sess.ctx, cancel) // DELETE ends in-flight calls too
		defer stop()
		sess.track(msg.ID, cancel)
		defer sess.untrack(msg.ID)
		writeJSON(w, http.StatusOK, rt.dispatch(ctx, sess, msg, nil))
		return
	}
	// A streamed call belongs to the session, not to the connection: if the
	// stream breaks, the call goes on and the client resumes with
	// Last-Event-ID. notifications/cancelled, DELETE or the session's end
	// stop it.
	ctx, cancel := context.WithCancel(auth.WithPrincipal(sess.ctx, auth.FromContext(r.Context())))
	ctx = withRequestLog(ctx, r.Context())                     // request_id on this call's log lines (requestid.go)
	ctx = client.WithTrace(ctx, client.TraceFrom(r.Context())) // trace context passed upstream
	defer cancel()
	sess.track(msg.ID, cancel)
	defer sess.untrack(msg.ID)
	cs := newCallStream(ctx, sess)
	rt.opts.Metrics.CallStream(sess.route().path, +1)       // metrics
	defer rt.opts.Metrics.CallStream(sess.route().path, -1) // metrics
	done := make(chan *jsonrpc.Message, 1)
	go func() { done <- rt.dispatch(ctx, sess, msg, cs) }()
	rw := newResumableWriter(w, sess.events, newStreamID(), sess.version >= mcp.Version20251125)
	for {
		select {
		case b := <-cs.events:
			rw.write(b)
		case resp := <-done:
			for len(cs.events) > 0 {
				rw.write(<-cs.events)
			}
			if b, err := jsonrpc.Encode(resp); err == nil {
				rw.write(b)
			}
			sess.events.finish(rw.stream)
			return
		}
	}
}

func (rt *Router) get(w http.ResponseWriter, r *http.Request, rte *route) {
	if !accepts(r, mcp.ContentTypeEventStream) {
		httpError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "GET opens an event stream: Accept must include text/event-stream")
		return
	}
	sess, ok := rt.session(w, r, rte)
	if !ok {
		return
	}
	lastID := r.Header.Get("Last-Event-ID")
	if lastID != "" && rt.replay(w, r, sess, lastID) {
		return // the rest of a POST stream; the standalone stream is another matter
	}
	sess.mu.Lock()
	if sess.streamOpen {
		sess.mu.Unlock()
		httpError(w, http.StatusConflict, jsonrpc.CodeInvalidRequest, "this session already has an open GET stream")
		return
	}
	sess.streamOpen = true
	sess.mu.Unlock()
	defer func() {
		sess.mu.Lock()
		sess.streamOpen = false
		sess.lastUsed = time.Now()
		sess.mu.Unlock()
	}()
	rw := newResumableWriter(w, sess.events, standaloneStream, sess.version >= mcp.Version20251125)
	if stream, seq, ok := parseEventID(lastID); ok && stream == standaloneStream {
		missed, _, _, _ := sess.events.since(standaloneStream, seq)
		for _, e := range missed {
			if rw.sw.Write(sse.Event{ID: eventID(e.stream, e.seq), Name: "message", Data: e.data}) != nil {
				return
			}
		}
	}
	keep := time.NewTicker(rt.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.ctx.Done():
			return
		case <-rt.drain:
			return
		case b := <-sess.outbox:
			rw.write(b)
			if !rw.live {
				return
			}
		case <-keep.C:
			if rw.sw.Comment("keep-alive") != nil {
				return
			}
		}
	}
}

func (rt *Router) delete(w http.ResponseWriter, r *http.Request, rte *route) {
	sess, ok := rt.session(w, r, rte)
	if !ok {
		return
	}
	rt.sessions.remove(sess.id)
	rt.log.Info("session ended by client", zap.String("route", rte.path))
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		b, _ = jsonrpc.Encode(jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "could not encode response")))
	}
	w.Header().Set("Content-Type", mcp.ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// httpError answers an HTTP-level refusal with a JSON-RPC error body, which
// MCP clients know how to show.
func httpError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, jsonrpc.NewError(nil, &jsonrpc.Error{Code: code, Message: msg}))
}
