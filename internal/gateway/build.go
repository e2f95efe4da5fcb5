package gateway

import (
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/login"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// The one builder of a gateway, Caddy style: every part is provisioned in
// order and, as it is made, what takes it down again is pushed on an undo
// stack; when a later part fails, the stack runs in reverse, so nothing a
// failed start made (a Redis client and its health check, an exporter, an
// audit file) outlives it. Start, ServeStdio and the CLI's pin build with
// build; Reload builds the new generation with newGeneration, swaps it in
// only when all of it succeeded, and then lets the old one go.

// mode is what a build is for: it decides which parts are made.
type mode int

const (
	// modeServe is Start: authentication, the fleet's shared state
	// (sessions.redis), per-user authorization, metrics and listeners.
	modeServe mode = iota
	// modeStdio is ServeStdio: one session over stdin/stdout, no
	// listener, no authentication, nothing shared with a fleet.
	modeStdio
	// modePin is the CLI's pin: the upstreams alone, no router.
	modePin
)

// undo is a cleanup stack: each part pushes what stops it; run stops them
// newest first and empties the stack.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

// generation is what one config generation needs beside the upstreams:
// built whole before any of it is used, so a reload that fails to build
// one changes nothing.
type generation struct {
	authn *auth.Authenticator // nil: no authentication (or stdio)
	pol   policySet
	audit *audit.Logger // nil when audit: is off
	keys  [][]byte      // the session key ring (nil: none, or stdio)
	// undo takes down what this generation made itself (not what it
	// carried on from the one before): its audit log.
	undo undo
}

// newGeneration builds the generation of cfg. prev and prevCfg, when set
// (Reload), are the generation in force and its config: the parts the
// new config leaves as they were carry on (the authenticator, the rate
// limit buckets, the audit log). On error nothing it made is left open.
func newGeneration(cfg *config.Config, opts Options, m mode, limiterOpts []policy.LimiterOption, prev *generation, prevCfg *config.Config) (_ *generation, err error) {
	g := &generation{}
	defer func() {
		if err != nil {
			g.undo.run()
		}
	}()
	if m == modeServe {
		if prev != nil && !authChanged(prevCfg, cfg) {
			g.authn = prev.authn
		} else if g.authn, err = newAuthenticator(cfg, opts); err != nil {
			return nil, err
		}
	}
	if g.pol, err = buildPolicy(cfg, limiterOpts...); err != nil {
		return nil, err
	}
	if prev != nil && prev.pol.limiter != nil && reflect.DeepEqual(prevCfg.Policy.RateLimits, cfg.Policy.RateLimits) {
		g.pol.limiter = prev.pol.limiter // the buckets carry on
	}
	if m == modeServe {
		// On a reload the key ring is reread: a rotation (new key first,
		// old kept until no session uses it) drops no session.
		if g.keys, err = loadSessionKeys(cfg, opts.StateDir, opts.Logger); err != nil {
			return nil, err
		}
	}
	if prev != nil && !auditChanged(prevCfg, cfg) {
		g.audit = prev.audit
	} else {
		if g.audit, err = openAudit(cfg, opts.Logger); err != nil { // audit.go
			return nil, err
		}
		if a := g.audit; a != nil {
			g.undo.push(func() { closeAudit(a, opts.Logger) })
		}
	}
	return g, nil
}

// auditChanged reports whether the audit log must be opened anew.
func auditChanged(a, b *config.Config) bool { return !reflect.DeepEqual(a.Audit, b.Audit) }

// closeAudit closes an audit log, warning when its last records may be lost.
func closeAudit(a *audit.Logger, log *zap.Logger) {
	if err := a.Close(); err != nil {
		log.Warn("audit log: close failed; the last records may be lost", zap.Error(err))
	}
}

// built is one assembled gateway that does not serve yet: its upstreams
// are not started, no listener is open.
type built struct {
	gen     *generation
	shared  *shared // the zero value when not modeServe or without sessions.redis
	tracing *telemetry.Provider
	perUser *perUser      // nil unless modeServe
	login   *login.Server // login: (login.go); nil when off or not modeServe
	local   *auth.LocalIssuer
	host    *host.Host
	router  *router.Router // nil in modePin
	// undo takes every part down, newest first: the router, the host,
	// the exporter, the generation, the shared state.
	undo undo
}

// build assembles what m needs of cfg. mets and red are Start's metrics
// and log redactor (nil elsewhere). On error everything made so far has
// been taken down again.
func build(cfg *config.Config, opts Options, m mode, mets *metrics.Metrics, red *redactor) (_ *built, err error) {
	b := &built{shared: &shared{}}
	defer func() {
		if err != nil {
			b.undo.run()
		}
	}()
	clientInfo := mcp.Implementation{Name: "mcpgw", Version: opts.Version}
	if m == modePin {
		clientInfo.Name = "mcpgw-pin"
		b.host = host.New(cfg, host.Options{Logger: opts.Logger.Named("host"), ClientInfo: clientInfo})
		b.undo.push(b.host.Close)
		return b, nil
	}
	if m == modeStdio && cfg.Audit != nil && cfg.Audit.Output == config.AuditStdout {
		return nil, fmt.Errorf("audit.output: stdout carries the MCP messages in stdio mode; set audit.output to stderr or a file path")
	}
	if m == modeServe {
		if b.shared, err = newShared(cfg, mets, opts.Logger, red); err != nil { // redis.go
			return nil, err
		}
		b.undo.push(b.shared.close)
		if b.login, err = newLogin(cfg, opts, mets); err != nil { // login.go
			return nil, err
		}
		if lg := b.login; lg != nil {
			b.undo.push(func() { _ = lg.Close() })
			// The routes accept the tokens the gateway's own
			// authorization server issues.
			b.local = &auth.LocalIssuer{Issuer: lg.Issuer(), Keys: lg.KeySet(), Active: lg.Active}
			opts.Auth.Local = b.local
		}
	}
	if b.gen, err = newGeneration(cfg, opts, m, b.shared.limiterOptions(), nil, nil); err != nil {
		return nil, err
	}
	b.gen.authn.ShareDPoPReplay(b.shared.dpopReplay(cfg)) // dpop.go
	b.undo.push(b.gen.undo.run)
	if b.gen.pol.intercept, err = buildIntercept(cfg, mets, opts.Logger); err != nil { // intercept.go
		return nil, err
	}
	var tracer trace.Tracer
	if b.tracing, tracer, err = startTracing(cfg, opts, red); err != nil { // tracing.go
		return nil, err
	}
	b.undo.push(func() { stopTracing(b.tracing, opts.Logger) })

	wire := newWiring() // upstream events reach the router once it exists
	ho := host.Options{
		Logger:     opts.Logger.Named("host"),
		ClientInfo: clientInfo,
		MaxTasks:   sessionsSection(cfg).MaxTasks,
	}
	ro := router.Options{
		Logger:     opts.Logger.Named("router"),
		ServerInfo: clientInfo,
		Policy:     b.gen.pol.policy,
		Limiter:    b.gen.pol.limiter,
		Pinner:     b.gen.pol.pinner,
		Audit:      b.gen.audit,
		Intercept:  b.gen.pol.intercept,
		Tracer:     tracer,
	}
	if m == modeServe {
		var browsers peruser.BrowserUsers // loginbrowsers.go: per-user start links open only in their user's browser
		if b.login != nil {
			browsers = loginBrowsers{b.login}
		}
		if b.perUser, err = newPerUser(cfg, b.gen.keys, b.shared, mets, opts.Logger, opts.Now, browsers); err != nil { // peruser.go
			return nil, err
		}
		var idle, detached time.Duration
		if cfg.Sessions != nil {
			idle, detached = cfg.Sessions.IdleTimeout.D(), cfg.Sessions.DetachedTimeout.D()
		}
		ho.SessionRelease = router.SessionRelease(idle, detached)
		ho.Metrics = mets
		ho.TaskKeys = b.gen.keys // task ids every replica with the ring opens (catalog/tasks.go)
		ho.CredentialSource = b.perUser.source
		ho.UpstreamSessions = b.shared.upstreamSessions() // a stateful upstream's session is the fleet's (host/fleetsessions.go)
		ho.ReplicaID = b.shared.replica
		ho.Now = opts.Now

		ro.SessionKeys = b.gen.keys
		ro.AdvertiseURL = sessionsSection(cfg).AdvertiseURL
		ro.IdleTimeout, ro.DetachedTimeout = idle, detached
		ro.Replay = replayLimits(cfg)
		ro.Events = b.shared.eventStore()
		ro.Revocations = b.shared.revocations()
		ro.Relay = b.shared.relayer()
		ro.Subscriptions = b.shared.subscriptions()
		ro.Metrics = mets
		ro.Auth = b.gen.authn
		ro.PerUser = b.perUser.sources
		ro.Login = b.login
	}
	b.host = host.New(cfg, wire.hostOptions(ho))
	b.undo.push(b.host.Close)
	b.router = router.New(cfg, b.host, ro)
	b.undo.push(b.router.Close)
	if b.perUser != nil {
		b.perUser.rt.Store(b.router)
	}
	wire.connect(b.host, b.router)
	return b, nil
}
