// Package router assembles mcpgw's downstream side for one config
// generation at a time: the chi mux of every route (edge checks and
// authentication from package edge, the Streamable HTTP transport, the
// legacy HTTP+SSE endpoints, the RFC 9728 metadata documents), the stored
// sessions (package sessions) and the core that answers requests (package
// core); stdio is served by the same core. A reload swaps in a new
// generation atomically; sessions survive it.
package router

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/login"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/router/serial"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/router/streamable"
)

// CodeRateLimited is the JSON-RPC error for a request over a rate limit;
// its data carries retryAfterSeconds (implementation-defined range).
const CodeRateLimited = mcp.CodeRateLimited

// Options configure a Router.
type Options struct {
	Logger *zap.Logger
	// ServerInfo is what initialize reports as serverInfo.
	ServerInfo mcp.Implementation
	// IdleTimeout ends sessions unused for this long (default 1h).
	IdleTimeout time.Duration
	// DetachedTimeout ends a session of a route with a stateful upstream
	// sooner, once nothing holds it (default 2m; never after IdleTimeout).
	DetachedTimeout time.Duration
	// KeepAlive is the interval of SSE comment keep-alives (default 25s).
	KeepAlive time.Duration
	// Metrics counts requests and streams (nil: none; see metrics.go).
	Metrics *metrics.Metrics
	// Tracer makes a server span per request (nil: tracing off).
	Tracer trace.Tracer
	// Auth authenticates every request on every route (nil: requests are
	// anonymous).
	Auth *auth.Authenticator
	// Policy decides what each principal may list and call (nil: all).
	// Limiter applies the rate limits (nil: none).
	Policy  *policy.Policy
	Limiter *policy.Limiter
	// SessionKeys, when set (sessions.key_file, from ParseSessionKeys),
	// make session ids AEAD tokens any replica with the same keys
	// can serve.
	SessionKeys [][]byte
	// AdvertiseURL (sessions.advertise_url) is where the other replicas
	// reach this one: bridged retries that reach them are forwarded here.
	// Only with SessionKeys.
	AdvertiseURL string
	// Replay bounds the sessions' replay logs (sessions.replay; the zero
	// value: config's defaults).
	Replay sessions.Limits
	// Events keeps the sessions' replay logs (nil: a MemoryEvents bounded
	// by Replay); with sessions.redis, a RedisEvents the caller closes.
	Events sessions.EventStore
	// Revocations shares the ids of DELETEd sessions with the fleet (nil:
	// each replica remembers its own).
	Revocations sessions.Revocations
	// Relay carries what a session is sent to the replica holding its GET
	// stream (nil: each replica delivers to its own streams only).
	Relay sessions.Relay
	// Subscriptions record which replica holds each session's resource
	// subscriptions (nil: this replica alone).
	Subscriptions core.SharedSubscriptions
	// Pinner checks tool definitions against the pinning lock (nil: off).
	Pinner *policy.Pinner
	// Audit records tool calls, prompt gets, resource reads and refusals
	// (nil: off).
	Audit *audit.Logger
	// Intercept is the interceptors (nil: none).
	Intercept *intercept.Set
	// PerUser are the per-user authorization sources of the upstreams
	// with auth.per_user, by upstream name: their pages are served at
	// /oauth/upstream/NAME/{start,callback,token} (peruser.go).
	PerUser map[string]*peruser.Source
	// Login is the gateway's own authorization server (login:; nil: off):
	// its endpoints and metadata are served beside the routes (login.go).
	Login *login.Server
}

// Router serves every route of the config generation in force. A reload
// (Reload, reload.go) swaps in a new generation — routes, views, policy,
// limiter, pinner, authenticator, audit log, edge settings and the chi mux —
// atomically; sessions survive it.
type Router struct {
	log        *zap.Logger
	opts       Options
	host       *host.Host
	gen        atomic.Pointer[generation] // read once per request
	core       *core.Core
	sessions   *sessions.Store
	streamable *streamable.Transport
	serial     *serial.Transport
}

// generation is everything one config generation decides about serving.
type generation struct {
	*core.Generation
	mux chi.Router
}

// New builds the router for cfg over h.
func New(cfg *config.Config, h *host.Host, opts Options) *Router {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = time.Hour
	}
	opts.DetachedTimeout = detachedTimeout(opts.IdleTimeout, opts.DetachedTimeout)
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 25 * time.Second
	}
	if opts.Replay == (sessions.Limits{}) {
		r := (&config.Config{}).ReplayLimits()
		opts.Replay = sessions.Limits{SessionEvents: r.SessionEvents, SessionBytes: r.SessionBytes, TotalBytes: r.TotalBytes}
	}
	rt := &Router{log: opts.Logger, opts: opts, host: h}
	events := opts.Events
	if events == nil {
		events = sessions.NewMemoryEvents(opts.Replay, opts.Metrics)
	}
	rt.sessions = sessions.NewStore(sessions.StoreOptions{
		Keys:        opts.SessionKeys,
		Events:      events,
		Revocations: opts.Revocations,
		Relay:       opts.Relay,
		Metrics:     opts.Metrics, // refusals by the session bounds
		OnEnd: func(s *sessions.Session) {
			rt.core.EndSession(s.Session) // subscriptions, stateful upstreams' per-session connections
		},
	})
	rt.core = core.New(h, core.Options{
		Logger:       opts.Logger,
		ServerInfo:   opts.ServerInfo,
		Metrics:      opts.Metrics,
		Tracer:       opts.Tracer,
		SessionKeys:  opts.SessionKeys,
		AdvertiseURL: opts.AdvertiseURL,
		Current:      func() *core.Generation { return rt.current().Generation },
		Sessions:     stored{rt.sessions},
		Shared:       opts.Subscriptions,
		TaskNotification: func(upstream, session string, params json.RawMessage) (string, json.RawMessage, bool) {
			return catalog.TaskNotification(h, upstream, session, params) // the host's task index
		},
	})
	rt.streamable = streamable.New(rt.core, rt.sessions, opts.KeepAlive)
	rt.serial = serial.New(rt.core, rt.sessions, opts.KeepAlive) // 2024-11-05 HTTP+SSE endpoints and stdio
	rt.gen.Store(rt.build(cfg, opts))
	rt.core.Go(rt.reaper)
	return rt
}

// stored shows the session store to the core.
type stored struct{ st *sessions.Store }

func (s stored) All() []*core.Session {
	all := s.st.All()
	out := make([]*core.Session, len(all))
	for i, x := range all {
		out[i] = x.Session
	}
	return out
}

func (s stored) Lookup(id string) *core.Session {
	if x := s.st.Lookup(id); x != nil {
		return x.Session
	}
	return nil
}

func (s stored) Remove(id string) { s.st.Remove(id) }

// build makes the generation of cfg over the host's current upstream set,
// with the authenticator, policy, limiter, pinner and audit log of opts.
func (rt *Router) build(cfg *config.Config, opts Options) *generation {
	g := &generation{Generation: &core.Generation{
		ByPath:       map[string]*core.Route{},
		Auth:         opts.Auth,
		Policy:       opts.Policy,
		Limiter:      opts.Limiter,
		Pinner:       opts.Pinner,
		Audit:        opts.Audit,
		Intercept:    opts.Intercept,
		PrivateLists: opts.Auth != nil || (cfg.Policy != nil && len(cfg.Policy.Rules) > 0),
		MaxBody:      cfg.MaxBodyBytes,
		Limits:       core.LimitsOf(cfg),
	}}
	if g.MaxBody <= 0 {
		g.MaxBody = 4 << 20
	}

	mux := chi.NewRouter()
	mux.Use(edge.RequestIDs(rt.log))                                      // X-Request-Id, request_id on log lines
	mux.Use(edge.BodyDeadline(g.Limits.ReadBodyTimeout, rt.opts.Metrics)) // read_body_timeout (edge/deadline.go)
	mux.Use(edge.NewChecks(cfg.Listen, cfg.PublicURL, rt.allowedOrigins(cfg)).Middleware(rt.log))
	mux.Use(edge.CORS)         // allowed origins' pages may call with fetch (edge/cors.go)
	taken := map[string]bool{} // route paths, never shadowed by HTTP+SSE endpoints
	for _, rc := range cfg.Routes {
		taken[rc.Path] = true
	}
	curated := map[string]map[string]string{}
	for _, rc := range cfg.Routes {
		r := &core.Route{Path: rc.Path, View: catalog.RouteView(rt.host, rc), Gen: g.Generation, RequireDPoP: rc.RequireDPoP}
		if g.Auth != nil {
			r.Resource, r.Scopes = g.Auth.Resource(rc.Path), g.Auth.RequiredScopes(rc.Scopes)
		}
		// Authentication, after the edge checks and before any handler
		// reads the body.
		guard := edge.Guard{Auth: g.Auth, Route: r.Path, Resource: r.Resource, Scopes: r.Scopes, RequireDPoP: r.RequireDPoP, Log: rt.log, Metrics: rt.opts.Metrics,
			Forward: forwardedNames(cfg, rc)} // forward.go
		mux := mux.With(guard.Authenticate)
		g.Routes = append(g.Routes, r)
		curated[r.Path] = r.View.Curation().Renames() // mcpgw_curated_tool_names
		g.ByPath[r.Path] = r
		rt.serial.Register(mux, r, taken) // GET <path>/sse, POST <path>/message
		mux.Post(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.streamable.Post(w, req, r) })
		mux.Get(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.streamable.Get(w, req, r) })
		mux.Delete(rc.Path, func(w http.ResponseWriter, req *http.Request) { rt.streamable.Delete(w, req, r) })
	}
	// The generation is swapped in as soon as it is built: its curated
	// names replace the last one's.
	rt.opts.Metrics.ResetCuratedNames()
	for path, names := range curated {
		rt.opts.Metrics.SetCuratedNames(path, names)
	}
	serveMetadata(mux, cfg.PublicURL, g.Generation) // RFC 9728 documents (metadata.go)
	rt.servePerUser(mux, cfg, g.Generation)         // per-user authorization pages (peruser.go)
	rt.serveLogin(mux, cfg)                         // the gateway's authorization server (login.go)
	mux.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", "GET, POST, DELETE")
		edge.Error(w, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, "method "+req.Method+" not allowed; MCP uses POST, GET and DELETE")
	})
	mux.NotFound(func(w http.ResponseWriter, req *http.Request) {
		edge.Error(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "no MCP route at "+req.URL.Path)
	})
	g.mux = mux
	return g
}

// current is the generation in force.
func (rt *Router) current() *generation { return rt.gen.Load() }

// ServeHTTP serves the MCP listener with the generation in force.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.current().mux.ServeHTTP(w, r) }

// SetSessionKeys swaps in a rotated session key ring (sessions.key_file
// reread by a reload): sessions sealed with a key still in it go on.
func (rt *Router) SetSessionKeys(keys [][]byte) error {
	if err := rt.sessions.SetKeys(keys); err != nil {
		return err
	}
	rt.core.SetSessionKeys(keys) // the bridge's requestStates
	return nil
}

// Drain prepares a graceful stop: new sessions are refused and GET streams
// end (clients reconnect elsewhere), while in-flight requests go on.
func (rt *Router) Drain() { rt.core.Drain() }

// Cut answers every request still running (the drain timeout ran out)
// with an error naming the shutdown, cancelling it: call it after Drain and
// before closing the connections.
func (rt *Router) Cut() { rt.core.Cut() }

// Close ends every session, cancelling what is still in flight, and stops
// the router's goroutines.
func (rt *Router) Close() { rt.core.Close(rt.sessions.CloseAll) }

// UpstreamNotification takes a notification an upstream sent outside any
// call and delivers it to the sessions it concerns.
func (rt *Router) UpstreamNotification(upstream, method string, params json.RawMessage) {
	rt.core.UpstreamNotification(upstream, method, params)
}

// ElicitationComplete tells the session a URL-mode elicitation went to
// that the user finished it (best effort; see core/elicitations.go).
func (rt *Router) ElicitationComplete(id string) { rt.core.ElicitationComplete(id) }

// ListChanged queues a list_changed notification for every session whose
// route includes upstream.
func (rt *Router) ListChanged(upstream, method string) { rt.core.ListChanged(upstream, method) }

// UpstreamReady restores the subscriptions sessions hold on an upstream
// that (re)connected.
func (rt *Router) UpstreamReady(upstream string) { rt.core.UpstreamReady(upstream) }

// SessionNotification takes what a stateful upstream's per-session
// connection sent outside any call: it concerns that session only.
func (rt *Router) SessionNotification(session, upstream, method string, params json.RawMessage) {
	rt.core.SessionNotification(session, upstream, method, params)
}

// DefaultDetachedTimeout is sessions.detached_timeout's default.
const DefaultDetachedTimeout = 2 * time.Minute

func (rt *Router) reaper() {
	tick := time.NewTicker(rt.reapTick())
	defer tick.Stop()
	for {
		select {
		case <-rt.core.Done():
			return
		case <-tick.C:
			if n := rt.sessions.Reap(rt.idleLimit); n > 0 {
				rt.log.Info("ended idle sessions", zap.Int("count", n))
			}
		}
	}
}

// reapTick is how often the reaper looks: often enough that a session
// ends within a quarter of its limit after it (at most a minute).
func (rt *Router) reapTick() time.Duration { return reapTick(rt.opts.DetachedTimeout) }

func reapTick(detached time.Duration) time.Duration { return min(detached/4, time.Minute) }

// detachedTimeout is the detached timeout in force: the default for 0,
// never longer than the idle timeout.
func detachedTimeout(idle, detached time.Duration) time.Duration {
	if idle <= 0 {
		idle = time.Hour
	}
	if detached <= 0 {
		detached = DefaultDetachedTimeout
	}
	return min(detached, idle)
}

// SessionRelease is the longest a stateful upstream's slot stays taken by
// a session whose client left without DELETE, for the given
// sessions.idle_timeout and detached_timeout (0: their defaults).
func SessionRelease(idle, detached time.Duration) time.Duration {
	d := detachedTimeout(idle, detached)
	return d + reapTick(d)
}

// idleLimit is how long session s may go unused before it is ended: a
// session of a route with a stateful upstream holds that upstream's
// session (a child, for stdio), so it ends after DetachedTimeout once its
// client is gone (clients that never DELETE: the Inspector CLI, the
// TypeScript SDK v1's close()); with a key ring, a client that does come
// back has its session recreated from its id, with a new upstream session.
func (rt *Router) idleLimit(s *sessions.Session) time.Duration {
	if rte := s.Route(); rte != nil && rte.View != nil && rte.View.HasStateful() {
		return rt.opts.DetachedTimeout
	}
	return rt.opts.IdleTimeout
}
