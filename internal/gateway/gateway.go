// Package gateway assembles one running mcpgw: the host (upstream clients
// and catalog), the router (downstream endpoint) and the MCP listener, and
// owns their start and orderly stop.
package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/login"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/telemetry"
	"github.com/mcpgw/mcpgw/internal/tlsconf"
)

// Options configure a Gateway.
type Options struct {
	Logger  *zap.Logger
	Version string
	// Listener, when set, is used instead of listening on cfg.Listen (tests).
	Listener net.Listener
	// Metrics records the gateway's metrics. When nil and the admin
	// listener is on, the gateway makes its own (on a new registry).
	Metrics *metrics.Metrics
	// AdminListener, when set, serves the admin endpoints instead of
	// listening on cfg.Admin.Listen (tests).
	AdminListener net.Listener
	// ShutdownDelay is how long Shutdown keeps serving after /readyz turns
	// 503, so that load balancers stop sending new traffic first.
	ShutdownDelay time.Duration
	// Auth tunes the authenticator (tests: HTTP client, clock, key refresh);
	// its Logger is set by Start.
	Auth auth.Options
	// TracerProvider, when set, makes the spans instead of the OTLP
	// exporter of the tracing: section or the OTEL_* environment (tests).
	TracerProvider trace.TracerProvider
	// Getenv reads the OTEL_* environment (nil: os.LookupEnv).
	Getenv func(string) (string, bool)
	// StateDir, when set, is where the gateway keeps its session key ring
	// when sessions.key_file names none (created on first start, reused
	// after), so that a restart keeps the sessions it issued. Empty: no
	// ring unless configured (tests); `mcpgw run` sets config.StateDir.
	StateDir string
	// Now is the clock upstream tokens (client credentials and per-user)
	// expire by (nil: time.Now): tests move it instead of waiting a
	// token's life.
	Now func() time.Time
}

// Gateway is one running mcpgw.
type Gateway struct {
	log    *zap.Logger
	cfg    atomic.Pointer[config.Config] // the config in force (Reload replaces it)
	host   *host.Host
	router *router.Router
	srv    *http.Server
	ln     net.Listener

	serveErr chan error
	stopOnce sync.Once

	opts      Options
	metrics   *metrics.Metrics
	admin     *http.Server // nil when the admin listener is off
	adminLn   net.Listener
	listening atomic.Bool // the MCP listener is serving
	draining  atomic.Bool // Shutdown has begun: not ready

	// adminAccess is who may read the admin listener (adminaccess.go);
	// each reload replaces it.
	adminAccess atomic.Pointer[adminAccess]

	tracing *telemetry.Provider // nil when tracing is off (or injected); flushed by Shutdown
	started time.Time
	reloads reloadHistory // the status page's reload history (status.go)
	shared  *shared       // sessions.redis (redis.go); closed by Shutdown
	perUser *perUser      // auth.per_user sources (peruser.go)
	login   *login.Server // login: (login.go); nil when off

	// Reload (reload.go): one at a time, never during Shutdown.
	reloadMu  sync.Mutex
	red       *redactor       // the log's secret scrubber; a reload adds the new secrets
	gen       *generation     // in force (build.go); its audit log is closed by Shutdown
	oldAudits []*audit.Logger // replaced by reloads; closed by Shutdown
}

// Start builds the gateway for cfg, connects its upstreams in the
// background and starts serving.
func Start(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	var red *redactor
	opts.Logger, red = redactingLogger(opts.Logger, cfg.Secrets()) // no secret in any log line (redact.go)
	if opts.Version == "" {
		opts.Version = "dev"
	}
	var err error
	g := &Gateway{log: opts.Logger, red: red, serveErr: make(chan error, 1), opts: opts, metrics: opts.Metrics, started: time.Now()}
	g.cfg.Store(cfg)
	if g.metrics == nil && (opts.AdminListener != nil || cfg.Admin != nil) {
		g.metrics = metrics.New(prometheus.NewRegistry(), metrics.Options{Version: opts.Version, MaxNames: cfg.Admin.MaxNames()})
	}
	b, err := build(cfg, opts, modeServe, g.metrics, red) // build.go
	if err != nil {
		return nil, err
	}
	// From here on a failure unwinds the build, and the listeners with it.
	ok := false
	defer func() {
		if !ok {
			b.undo.run()
		}
	}()
	g.gen, g.shared, g.tracing, g.perUser, g.host, g.router = b.gen, b.shared, b.tracing, b.perUser, b.host, b.router
	if g.login = b.login; g.login != nil {
		g.opts.Auth.Local = b.local // reloads build their authenticators with it
	}
	warnPolicy(cfg, opts.Logger)
	g.metrics.SetRouteSource(g.router.RouteStats)
	g.metrics.SetUpstreamConnSource(g.host.ConnStats)
	g.metrics.ConfigLoaded()
	g.reloads.add(ReloadEvent{Time: g.started, Initial: true, OK: true})

	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w (is another mcpgw running? change listen:)", cfg.Listen, err)
		}
	}
	b.undo.push(func() { _ = ln.Close() })
	if cfg.TLS != nil {
		st, err := tlsconf.NewServer("tls", cfg.TLS, tlsconf.Options{Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		ln = tls.NewListener(ln, st.Config())
	}
	if err := g.listenAdmin(); err != nil { // admin.go
		return nil, err
	}
	ok = true
	g.ln = ln
	headerTimeout := cfg.ReadHeaderTimeout.D()
	if headerTimeout <= 0 {
		headerTimeout = config.DefaultReadHeaderTimeout
	}
	g.srv = &http.Server{
		Handler:           g.router,
		ReadHeaderTimeout: headerTimeout, // read_header_timeout
		// No ReadTimeout/WriteTimeout: SSE streams live long. Bodies are
		// bounded by max_body_bytes and read_body_timeout (the router's
		// edge.BodyDeadline), idle keep-alives by IdleTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       zap.NewStdLog(opts.Logger.Named("http")),
	}
	g.host.Start()
	g.listening.Store(true)
	go func() {
		err := g.srv.Serve(ln)
		g.listening.Store(false)
		g.serveErr <- err
	}()
	g.serveAdmin()
	return g, nil
}

// Addr is the MCP listener's address.
func (g *Gateway) Addr() net.Addr { return g.ln.Addr() }

// Host returns the gateway's host (for tests and admin).
func (g *Gateway) Host() *host.Host { return g.host }

// Err returns a channel that yields if the listener fails.
func (g *Gateway) Err() <-chan error { return g.serveErr }

// Shutdown stops the gateway gracefully: /readyz turns 503 at once; after
// Options.ShutdownDelay (bounded by ctx) it stops accepting requests and
// new sessions, ends standalone streams, waits for in-flight requests up
// to ctx, ends sessions, stops every upstream and finally closes the admin
// listener.
func (g *Gateway) Shutdown(ctx context.Context) error {
	var err error
	g.stopOnce.Do(func() {
		g.draining.Store(true)
		g.reloadMu.Lock() // waits for a reload under way; none starts after draining
		defer g.reloadMu.Unlock()
		if d := g.opts.ShutdownDelay; d > 0 {
			g.log.Info("not ready; serving on while load balancers notice", zap.Duration("shutdown_delay", d))
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		g.srv.SetKeepAlivesEnabled(false)
		// End GET streams first: they would otherwise keep Shutdown
		// waiting until ctx expires. In-flight calls go on.
		g.router.Drain()
		if e := g.srv.Shutdown(ctx); e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = e
			// The drain ran out: every call still running is answered
			// with an error naming the shutdown (and cancelled) before
			// its connection closes.
			g.router.Cut()
			cctx, cancel := context.WithTimeout(context.Background(), cutGrace)
			_ = g.srv.Shutdown(cctx)
			cancel()
			_ = g.srv.Close()
		}
		g.router.Close()
		if g.login != nil {
			if e := g.login.Close(); e != nil { // after the router: its last grants are written
				g.log.Error("login: cannot write the state file; the last grants are lost", zap.Error(e))
			}
		}
		g.shared.close() // after the router: its last events are copied
		g.host.Close()
		stopTracing(g.tracing, g.log) // the last spans, now that every call has ended
		for _, a := range append(g.oldAudits, g.gen.audit) {
			closeAudit(a, g.log)
		}
		g.closeAdmin()
	})
	return err
}

// cutGrace is how long Shutdown waits, once the drain timeout ran out, for
// the calls it cut to be answered before it closes their connections.
const cutGrace = 2 * time.Second

// newAuthenticator builds the downstream authenticator (nil when no auth is
// configured) and warns loudly when a non-loopback listener serves without
// authentication, which validation allows only with insecure_no_auth.
func newAuthenticator(cfg *config.Config, opts Options) (*auth.Authenticator, error) {
	ao := opts.Auth
	ao.Logger = opts.Logger.Named("auth")
	a, err := auth.New(cfg, ao)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if a == nil {
		host, _, _ := net.SplitHostPort(cfg.Listen)
		if !config.IsLoopbackHost(host) {
			opts.Logger.Warn("AUTHENTICATION IS OFF on a non-loopback listener (auth.insecure_no_auth: true): anyone who can reach " + cfg.Listen + " can use every upstream; configure auth.oidc or auth.api_keys")
		}
		return nil, nil
	}
	opts.Logger.Info("authentication on", zap.Strings("issuers", a.Issuers()), zap.Int("api_keys", len(cfg.Auth.APIKeys)))
	return a, nil
}

// warnPolicy warns about a policy that hides everything.
func warnPolicy(cfg *config.Config, log *zap.Logger) {
	if cfg.Auth != nil && cfg.Policy.Default == config.PolicyDeny && len(cfg.Policy.Rules) == 0 {
		log.Warn("policy: default deny and no rules: every tool, prompt and resource is hidden from every caller; add policy.rules to allow some")
	}
	for _, w := range cfg.Warnings() { // what mcpgw validate warns about
		log.Warn(w)
	}
}

// policySet is the access policy of one config generation.
type policySet struct {
	policy  *policy.Policy
	limiter *policy.Limiter
	pinner  *policy.Pinner
	// intercept is the interceptors (intercept.go; nil: none).
	intercept *intercept.Set
}

// buildPolicy compiles the policy section; a policy that cannot be
// enforced as written stops the gateway rather than serving without it.
func buildPolicy(cfg *config.Config, limiterOpts ...policy.LimiterOption) (policySet, error) {
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		return policySet{}, fmt.Errorf("policy: %w", err)
	}
	pinner, err := policy.NewPinner(cfg.Policy.Pinning)
	if err != nil {
		return policySet{}, err
	}
	return policySet{policy: pol, limiter: policy.NewLimiter(cfg.Policy.RateLimits, limiterOpts...), pinner: pinner}, nil
}

// replayLimits are the bounds of the sessions' replay logs (sessions.replay).
func replayLimits(cfg *config.Config) sessions.Limits {
	r := cfg.ReplayLimits()
	return sessions.Limits{SessionEvents: r.SessionEvents, SessionBytes: r.SessionBytes, TotalBytes: r.TotalBytes}
}

// loadSessionKeys reads sessions.key_file, the AEAD key ring that lets any
// replica serve a legacy session. Without one it uses the ring in
// stateDir, made on first start (nil when stateDir is empty too).
func loadSessionKeys(cfg *config.Config, stateDir string, log *zap.Logger) ([][]byte, error) {
	if cfg.Sessions == nil || cfg.Sessions.KeyFile == "" {
		if stateDir == "" {
			return nil, nil
		}
		path := filepath.Join(stateDir, sessions.DefaultKeyRingFile)
		keys, created, err := sessions.LoadOrCreateKeyRing(path)
		if err != nil {
			return nil, fmt.Errorf("session key ring (no sessions.key_file set, so the gateway keeps its own): %w", err)
		}
		if created {
			log.Info("made a session key ring in the state directory; sessions survive a restart (set sessions.key_file to share one between replicas)", zap.String("file", path))
		}
		return keys, nil
	}
	data, err := os.ReadFile(cfg.Sessions.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("sessions.key_file: %w; create it with one key per line, e.g. `openssl rand -base64 32 > %s`", err, cfg.Sessions.KeyFile)
	}
	keys, err := sessions.ParseSessionKeys(data)
	if err != nil {
		return nil, fmt.Errorf("sessions.key_file %s: %w", cfg.Sessions.KeyFile, err)
	}
	return keys, nil
}

// wiring connects a host's upstream events to the router, which is built
// after the host (it needs the host's views): events wait until it exists.
type wiring struct {
	ready sync.WaitGroup
	h     *host.Host
	rt    *router.Router
}

func newWiring() *wiring {
	w := &wiring{}
	w.ready.Add(1)
	return w
}

// connect is called once, when the router exists.
func (w *wiring) connect(h *host.Host, rt *router.Router) {
	w.h, w.rt = h, rt
	w.ready.Done()
}

// hostOptions returns opts with the event callbacks that reach the router.
func (w *wiring) hostOptions(opts host.Options) host.Options {
	opts.OnNotification = func(upstream, method string, params json.RawMessage) {
		w.ready.Wait()
		catalog.Changed(w.h, upstream, method) // what the catalog indexed of that list is listed again
		if method == mcp.NotificationResourcesChanged {
			// Tools name their UI resources: one that another upstream now
			// shares (or no longer does) is shown in another form.
			w.rt.ListChanged(upstream, mcp.NotificationToolsListChanged)
		}
		w.rt.UpstreamNotification(upstream, method, params)
	}
	opts.OnSessionNotification = func(session, upstream, method string, params json.RawMessage) {
		w.ready.Wait()
		w.rt.SessionNotification(session, upstream, method, params)
	}
	opts.OnStateChange = func(upstream string, s host.State) {
		w.ready.Wait()
		// An upstream coming or going changes the lists it offers (one
		// that arrives late, after lists were answered without it, too).
		if s == host.StateReady || s == host.StateDown {
			changes := mcp.ListChangedNotifications()
			if u := w.h.Upstream(upstream); u != nil {
				changes = u.ListChanges()
			}
			for _, method := range changes {
				w.rt.ListChanged(upstream, method)
			}
		}
		if s == host.StateReady {
			w.rt.UpstreamReady(upstream)
		}
	}
	return opts
}
