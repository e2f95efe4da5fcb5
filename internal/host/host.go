// Package host owns the gateway's upstream MCP clients: it supervises each
// upstream's connections (restart with backoff, crash-loop breaker, health
// probes), the per-session and per-capability-set connections (one per
// caller for an upstream that acts for its callers, actingfor.go), and the
// upstream set itself. What an upstream's requests carry (every credential
// kind, and the HTTP clients that present them) is internal/credentials',
// built per upstream with credentials.NewUpstream. A Host starts from one
// config; a reload (Apply, reload.go) swaps in a new upstream set, keeping
// unchanged upstreams running and retiring removed or changed ones once
// their calls are done. The merged, namespaced catalog over the upstreams is
// internal/catalog's, which reaches them through catalogapi.go.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/http1"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// State is an upstream's connection state.
type State string

// Upstream states.
const (
	StateStarting State = "starting" // never connected yet
	StateReady    State = "ready"
	StateDown     State = "down" // lost or failed; being retried
	// StateBreakerOpen is a crash loop: the upstream failed
	// BreakerThreshold times within BreakerWindow, so it is retried only
	// every BreakerCooldown until it stays up.
	StateBreakerOpen State = "breaker_open"
	StateStopped     State = "stopped"
)

// Options configure a Host.
type Options struct {
	Logger *zap.Logger
	// SessionRelease is how long it takes at most for a stateful
	// upstream's slot to free without a DELETE (the router's reaping of
	// detached sessions): the Retry-After of a max_sessions refusal.
	SessionRelease time.Duration
	// ClientInfo is sent to upstreams in initialize.
	ClientInfo mcp.Implementation
	// OnNotification receives every upstream notification that is not
	// progress for a call (list_changed, resource updates, log messages).
	OnNotification func(upstream, method string, params json.RawMessage)
	// HealthInterval is how often an idle HTTP upstream is probed (ping, or
	// server/discover for 2026-07-28); HealthFailures consecutive failed
	// probes, each bounded by HealthTimeout, eject it: the connection is
	// dropped and the supervisor reconnects with backoff, the reconnection
	// being the half-open probe. Defaults 30s, 10s, 3.
	HealthInterval, HealthTimeout time.Duration
	HealthFailures                int
	// OnSessionNotification receives what a stateful upstream's per-session
	// connection sends outside any call; it concerns that session only.
	OnSessionNotification func(session, upstream, method string, params json.RawMessage)
	// OnStateChange is called when an upstream connects or is lost.
	OnStateChange func(upstream string, state State)
	// HTTPClient is used for HTTP upstreams (nil: a default with timeouts).
	HTTPClient *http.Client
	// MinBackoff and MaxBackoff bound reconnection delays (defaults 500ms, 30s).
	MinBackoff, MaxBackoff time.Duration
	// BreakerThreshold failures (a failed start or a lost connection)
	// within BreakerWindow open an upstream's crash-loop breaker: it is then
	// retried once every BreakerCooldown, and closes again once a
	// connection has stayed up for BreakerWindow (defaults 5, 60s, 5m).
	BreakerThreshold int
	BreakerWindow    time.Duration
	BreakerCooldown  time.Duration
	// Metrics records upstream state, restarts and calls (nil: none).
	Metrics *metrics.Metrics
	// Environ is the gateway's environment, from which stdio children get
	// the minimal set and their inherit_env (nil: os.Environ).
	Environ func() []string
	// SandboxLauncher is the binary that starts sandboxed children in
	// its launcher mode (sandbox.LauncherMain); "" is the running one.
	SandboxLauncher string
	// Transport, when set, makes every connection to an upstream in place
	// of its url or command (tests: an in-memory upstream).
	Transport func(upstream string) (client.Transport, error)
	// TaskKeys (the session key ring, sessions.key_file) seal the task ids
	// the catalog hands to clients, so that every replica with the ring
	// opens them (nil: a random key of this process). MaxTasks bounds the
	// 2025-11-25 tasks remembered for tasks/list (sessions.max_tasks;
	// default catalog.DefaultMaxTasks). See internal/catalog/tasks.go.
	TaskKeys [][]byte
	MaxTasks int
	// CredentialSource, when set, is asked first for each upstream's
	// credentials.Source: the per-user OAuth source plugs in here. A
	// Source of kind exchanged or per_user makes the upstream act for its
	// callers: one connection per session (per principal for stateless
	// callers), each authorized for its own principal.
	CredentialSource credentials.SourceFunc
	// UpstreamSessions, in a fleet (sessions.redis), records stateful
	// upstreams' sessions so that every replica continues the same one
	// (fleetsessions.go); ReplicaID names this replica in its records.
	// Nil: each replica's connections are its own.
	UpstreamSessions UpstreamSessions
	ReplicaID        string
	// Now is the clock upstream tokens expire by (nil: time.Now): the
	// client-credentials cache and the exchanged-token cache (the
	// exchange's actor token keeps oauth2's wall-clock cache). Tests move
	// it instead of waiting for a token to expire.
	Now func() time.Time
}

// Host owns one upstream client per configured upstream.
type Host struct {
	log  *zap.Logger
	opts Options

	// set is the current upstream set, replaced whole (copy on write) by
	// Apply: readers never block.
	set atomic.Pointer[upstreamSet]

	mu       sync.Mutex // Start, Apply, Close
	started  bool
	closed   bool
	retiring map[*Upstream]bool // replaced or removed, finishing their calls

	ext extSlot // the catalog's host-wide state: its task ids (catalogapi.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// conns is the HTTP transport the host made for its upstreams (nil
	// when Options.HTTPClient came with one): Close closes its kept
	// connections, and ConnStats reports them.
	conns *http1.Transport
}

// upstreamSet is one generation's upstreams.
type upstreamSet struct {
	byName map[string]*Upstream
	names  []string // sorted: the catalog's deterministic order
	sep    string
}

// current is the upstream set in force.
func (h *Host) current() *upstreamSet { return h.set.Load() }

// New builds a Host for cfg; Start connects the upstreams.
func New(cfg *config.Config, opts Options) *Host {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 30 * time.Second
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = 10 * time.Second
	}
	if opts.HealthFailures <= 0 {
		opts.HealthFailures = 3
	}
	var conns *http1.Transport
	if opts.HTTPClient == nil {
		conns = client.DefaultHTTPTransport()
		opts.HTTPClient = &http.Client{Transport: conns}
	}
	if opts.BreakerThreshold <= 0 {
		opts.BreakerThreshold = 5
	}
	if opts.BreakerWindow <= 0 {
		opts.BreakerWindow = 60 * time.Second
	}
	if opts.BreakerCooldown <= 0 {
		opts.BreakerCooldown = 5 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{log: opts.Logger, opts: opts, ctx: ctx, cancel: cancel, retiring: map[*Upstream]bool{}, conns: conns}
	set := &upstreamSet{byName: map[string]*Upstream{}, sep: separator(cfg)}
	for name, ucfg := range cfg.Upstreams {
		set.byName[name] = h.newUpstream(name, ucfg, set.sep)
		set.names = append(set.names, name)
	}
	sort.Strings(set.names)
	h.set.Store(set)
	return h
}

func separator(cfg *config.Config) string {
	if cfg.Separator == "" {
		return config.DefaultSeparator
	}
	return cfg.Separator
}

// newUpstream builds (but does not start) one upstream.
func (h *Host) newUpstream(name string, ucfg *config.Upstream, sep string) *Upstream {
	ctx, cancel := context.WithCancel(h.ctx)
	u := &Upstream{
		name:   name,
		cfg:    ucfg,
		sep:    sep,
		host:   h,
		log:    h.opts.Logger.With(zap.String("upstream", name)),
		state:  StateStarting,
		first:  make(chan struct{}),
		m:      h.opts.Metrics.Upstream(name),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	u.base, u.ownConns = h.upstreamBase(name, ucfg) // tls.go
	u.creds = credentials.NewUpstream(ctx, name, ucfg, u.base, credentials.Env{
		Logger: h.opts.Logger, Metrics: h.opts.Metrics, HTTPClient: h.opts.HTTPClient, Source: h.opts.CredentialSource, Now: h.opts.Now,
	})
	u.httpc = u.creds.SharedClient()
	u.startedAt.Store(time.Now().UnixNano())
	if len(ucfg.Command) > 0 {
		u.stderr = client.NewStderrLog(stderrOptions(name, ucfg, u.log, u.m)) // startup.go
	}
	u.roots = u.rootsResult
	return u
}

// Start connects every upstream concurrently; one that fails does not hold
// up or stop the others, and is retried with backoff.
func (h *Host) Start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.closed {
		return
	}
	h.started = true
	set := h.current()
	for _, name := range set.names {
		h.startLocked(set.byName[name])
	}
}

// startLocked starts u's supervisor (h.mu held).
func (h *Host) startLocked(u *Upstream) {
	u.started = true
	u.startedAt.Store(time.Now().UnixNano())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(u.done)
		if u.stderr != nil {
			defer u.stderr.Close()
		}
		u.supervise(u.ctx)
	}()
}

// Close stops every upstream — current ones and those a reload is
// retiring — and waits for their goroutines and children.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	ups := h.allLocked()
	h.mu.Unlock()
	h.cancel()
	for _, u := range ups {
		u.closeSessions()
	}
	h.wg.Wait()
	if h.conns != nil {
		h.conns.CloseIdleConnections()
	}
	for _, u := range ups {
		if u.ownConns != nil { // tls: or proxy: (tls.go)
			u.ownConns.CloseIdleConnections()
		}
	}
}

// ConnStats reports the connections to plain-http upstreams: opened so
// far, and kept idle now (zero when the host was given its HTTP client).
func (h *Host) ConnStats() (opened, idle int64) {
	if h.conns == nil {
		return 0, 0
	}
	st := h.conns.Stats()
	return st.Opened, st.Idle
}

// allLocked returns the current and the retiring upstreams (h.mu held).
func (h *Host) allLocked() []*Upstream {
	set := h.current()
	ups := make([]*Upstream, 0, len(set.names)+len(h.retiring))
	for _, name := range set.names {
		ups = append(ups, set.byName[name])
	}
	for u := range h.retiring {
		ups = append(ups, u)
	}
	return ups
}

// Names returns the upstream names in catalog order.
func (h *Host) Names() []string { return slices.Clone(h.current().names) }

// Upstream returns the named upstream, or nil.
func (h *Host) Upstream(name string) *Upstream { return h.current().byName[name] }

// Separator is the prefix separator.
func (h *Host) Separator() string { return h.current().sep }

// WaitReady waits until every upstream has made its first connection
// attempt (successful or not) or ctx ends.
func (h *Host) WaitReady(ctx context.Context) error {
	set := h.current()
	for _, name := range set.names {
		select {
		case <-set.byName[name].first:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Upstream is one supervised upstream connection.
type Upstream struct {
	roots func() json.RawMessage // rootsResult, made once (CallOptions)

	sandboxDesc    atomic.Pointer[string] // sandbox.go
	sandboxKills   atomic.Int64
	egressDenied   atomic.Int64           // sandbox.go: requests the egress proxy refused
	sandboxDenials atomic.Int64           // stderr lines reporting a permission error
	egressLast     atomic.Pointer[string] // the last host:port refused
	egressLog      logGate                // denials' log lines

	name string
	cfg  *config.Upstream
	sep  string // the host-wide separator it was built with (reload diff)
	host *Host
	log  *zap.Logger

	// ctx ends when the upstream stops (host close, or retirement after a
	// reload removed or replaced it); done is closed when its supervisor
	// has returned. started is guarded by host.mu.
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	started bool

	// inflight counts calls routed to this upstream (Enter/Exit, by the
	// catalog's View.Forward);
	// retired is set when a reload replaced or removed it, stopping once
	// it takes no new calls (reload.go).
	inflight atomic.Int64
	retired  atomic.Bool
	stopping atomic.Bool
	restarts atomic.Int64 // reconnection attempts (status.go)

	m *metrics.Upstream // nil-safe

	// startedAt (Unix nanoseconds) is when the first connection attempt
	// began: lists wait for a starting upstream until startup_list_wait
	// after it (startup.go).
	startedAt atomic.Int64
	// initialized is set once the shared connection initialized (the
	// upstream speaks no stateless revision): later connections initialize
	// at once instead of probing with server/discover (startup.go).
	initialized atomic.Bool
	// stderr logs the stdio children's stderr, all of them through one
	// rate limit (nil for HTTP upstreams).
	stderr *client.StderrLog

	// httpc serves an HTTP upstream's requests: the shared client, or with
	// oauth: one that adds the upstream's access token (creds.SharedClient).
	httpc *http.Client
	// base is the client httpc and acting-for clients are built on (the
	// host's, or one of the upstream's own for tls:/proxy:, whose
	// transport ownConns is, closed by stop).
	base     *http.Client
	ownConns *http1.Transport
	// creds are the upstream's credentials: its shared client's, and the
	// Source that authorizes an acting-for upstream's requests for their
	// caller (actingfor.go).
	creds *credentials.Upstream

	mu      sync.Mutex
	client  *client.Client
	state   State
	lastErr error
	first   chan struct{} // closed after the first connection attempt
	retryAt time.Time     // while the breaker is open: the next attempt
	pid     int           // the stdio child's process id while connected
	// caps are the capabilities of the latest connection that got ready
	// (kept while down): which lists an arrival or a loss changes.
	caps json.RawMessage

	// alt is a second connection that initializes, made on first use when
	// the primary one speaks 2026-07-28 and a caller of an older revision
	// comes along (protocol: auto).
	altMu sync.Mutex
	alt   *client.Client
	// altSessionless: the upstream's older-revision connection came back
	// without a session, so older callers are served on the primary one
	// (ClientFor). Forgotten with the primary connection (closeAlt).
	altSessionless bool

	ext extSlot // what the catalog indexes of it (catalogapi.go)

	perSession perSession // stateful: true — one connection per downstream session
	views      capViews   // exact_capabilities: true — one connection per client capability set
	// interactive gives calls that may be asked a connection where they
	// are the only call in flight (interactive.go).
	interactive interactivePool
}

// Name is the upstream's configured name.
func (u *Upstream) Name() string { return u.name }

// Required reports whether the gateway is ready only while this upstream is
// (config required: true).
func (u *Upstream) Required() bool { return u.cfg.Required }

// RetryAt is when an upstream whose crash-loop breaker is open is tried
// next (zero in any other state).
func (u *Upstream) RetryAt() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state != StateBreakerOpen {
		return time.Time{}
	}
	return u.retryAt
}

// PID is the process id of the stdio child while connected, else 0.
func (u *Upstream) PID() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pid
}

// State returns the current state and the last error.
func (u *Upstream) State() (State, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state, u.lastErr
}

// UnavailableError is returned for an upstream that is not connected.
type UnavailableError struct {
	Upstream string
	State    State
	Cause    error
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("upstream %q is unavailable (%s)", e.Upstream, e.State)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg + e.hint()
}

// Summary is the error without its cause: what a caller may be told (the
// cause can quote the upstream: a child's stderr, an HTTP error body).
func (e *UnavailableError) Summary() string {
	return fmt.Sprintf("upstream %q is unavailable (%s)", e.Upstream, e.State) + e.hint()
}

func (e *UnavailableError) hint() string {
	if e.State == StateBreakerOpen {
		return "; it keeps failing (crash loop), so mcpgw retries it only every few minutes: check its logs"
	}
	return "; mcpgw keeps retrying it in the background"
}

// Client returns the live client. While the upstream is making its first
// connection it waits for it (bounded by ctx); otherwise a disconnected
// upstream fails fast with an *UnavailableError.
func (u *Upstream) Client(ctx context.Context) (*client.Client, error) {
	u.mu.Lock()
	state := u.state
	u.mu.Unlock()
	if state == StateStarting {
		select {
		case <-u.first:
		case <-ctx.Done():
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.client == nil {
		if u.onDemand() {
			return nil, &UnavailableError{Upstream: u.name, State: u.state, Cause: errors.New(
				"it acts for each caller and has no connection of its own (give it oauth: or an Authorization header for one)")}
		}
		return nil, &UnavailableError{Upstream: u.name, State: u.state, Cause: u.lastErr}
	}
	return u.client, nil
}

// ClientFor returns the client to use for a caller: a caller of an older
// revision gets a connection of an older revision when the upstream speaks
// both, so it is served exactly as if it talked to the upstream directly
// (the upstream's own server→client requests, subscriptions and logging).
// If that connection cannot be made, or comes back without a session (an
// upstream that keeps none cannot send requests or updates on it), the
// primary one serves (and the gateway bridges input_required results).
func (u *Upstream) ClientFor(ctx context.Context, legacyCaller bool) (*client.Client, error) {
	if key, err := u.ownConnection(ctx); err != nil || key != "" { // actingfor.go
		if err != nil {
			return nil, err
		}
		return u.sessionClient(ctx, key)
	}
	c, err := u.Client(ctx)
	if err != nil {
		return c, err
	}
	initializes := !c.Modern() || (legacyCaller && u.cfg.Protocol != "2026")
	if caps, ok := CallerCapabilities(ctx); ok && initializes && u.cfg.ExactCapabilities {
		if vc, verr := u.viewClient(ctx, caps); vc != nil || verr != nil {
			return vc, verr
		}
	}
	if !legacyCaller || !c.Modern() || u.cfg.Protocol == "2026" {
		return c, nil
	}
	u.altMu.Lock()
	defer u.altMu.Unlock()
	if u.alt != nil {
		select {
		case <-u.alt.Done():
			_ = u.alt.Close()
			u.alt = nil
		default:
			return u.alt, nil
		}
	}
	if u.altSessionless {
		return c, nil
	}
	alt, aerr := u.connectWith(ctx, "legacy")
	if aerr != nil {
		u.log.Info("no legacy connection for an older caller; bridging instead", zap.Error(aerr))
		return c, nil
	}
	if alt.Sessionless() {
		// The upstream initializes but keeps no session: on that
		// connection it could neither ask the caller anything (sampling,
		// elicitation, roots) nor send a resource update, all of which its
		// 2026-07-28 connection carries (input requests bridged,
		// subscriptions as listen streams). Older callers use that one.
		_ = alt.Close()
		u.altSessionless = true
		u.log.Info("the upstream's older-revision connection has no session (it could not send requests or updates on it); older callers are bridged over 2026-07-28")
		return c, nil
	}
	u.alt = alt
	return alt, nil
}

// closeAlt closes the auxiliary connections: the legacy one and the
// capability views.
func (u *Upstream) closeAlt() {
	u.altMu.Lock()
	alt := u.alt
	u.alt = nil
	u.altSessionless = false // the next connection may be to a server that keeps sessions
	u.altMu.Unlock()
	closing := u.takeViews()
	if u.ctx.Err() != nil { // stopping for good: the interactive pool too
		closing = append(closing, u.closeInteractive()...)
	}
	for _, v := range closing {
		u.host.wg.Add(1)
		go func() {
			defer u.host.wg.Done()
			_ = v.CloseGracefully()
		}()
	}
	if alt != nil {
		// Closing can take seconds (a stdio child gets its stop graces);
		// the supervisor, which calls this, must not wait for it to
		// reconnect. Host.Close still waits for it (closeAlt runs only in
		// the supervisor goroutine, so the WaitGroup is above zero here).
		u.host.wg.Add(1)
		go func() {
			defer u.host.wg.Done()
			_ = alt.CloseGracefully()
		}()
	}
}

func (u *Upstream) setState(s State, c *client.Client, err error) {
	if s != StateReady {
		u.closeAlt()
	}
	u.connectionChanged() // a new connection may offer other tools
	u.mu.Lock()
	changed := u.state != s
	u.state, u.client, u.lastErr = s, c, err
	if c == nil {
		u.pid = 0
	} else {
		u.caps = c.InitializeResult().Capabilities
	}
	u.mu.Unlock()
	if u.retired.Load() {
		// Replaced or removed by a reload: its end is no news to clients
		// (the reload announced the change), and the metrics series of its
		// name belong to its successor, if any.
		if h := u.host; h.current().byName[u.name] == nil {
			u.m.SetState(string(s))
		}
		return
	}
	u.m.SetState(string(s))
	if changed && u.host.opts.OnStateChange != nil {
		u.host.opts.OnStateChange(u.name, s)
	}
}

// supervise keeps the upstream connected until ctx ends: connect, wait for
// the connection to fail, back off with jitter, reconnect. A crash loop
// (BreakerThreshold failures within BreakerWindow) opens the breaker: the
// upstream is then tried once per BreakerCooldown until a connection stays
// up for BreakerWindow.
func (u *Upstream) supervise(ctx context.Context) {
	if u.onDemand() {
		// No shared connection to keep (actingfor.go): the upstream is
		// ready for callers, who each get their own.
		u.setState(StateReady, nil, nil)
		close(u.first)
		<-ctx.Done()
		u.setState(StateStopped, nil, errors.New("gateway shutting down"))
		return
	}
	opts := u.host.opts
	backoff := opts.MinBackoff
	firstDone := false
	markFirst := func() {
		if !firstDone {
			firstDone = true
			close(u.first)
		}
	}
	defer markFirst()
	var failures []time.Time // within the breaker window
	halfOpen := false        // the breaker was open: one failure reopens it
	fail := func() (open bool) {
		now := time.Now()
		failures = slices.DeleteFunc(failures, func(t time.Time) bool { return now.Sub(t) > opts.BreakerWindow })
		failures = append(failures, now)
		return halfOpen || len(failures) >= opts.BreakerThreshold
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			u.m.Restart()
			u.restarts.Add(1)
		}
		c, err := u.connect(ctx)
		open := false
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			u.m.HandshakeFailed()
			open = fail()
			if !open {
				u.log.Warn("upstream failed to start; will retry", zap.Error(err), zap.Duration("retry_in", backoff))
				u.setState(StateDown, nil, err)
			}
		} else {
			u.log.Info("upstream ready", zap.String("protocol_version", c.ProtocolVersion()))
			u.remember(c) // startup.go
			u.setState(StateReady, c, nil)
			markFirst()
			connectedAt := time.Now()
			lost := u.watch(ctx, c)
			if ctx.Err() != nil {
				u.setState(StateStopped, nil, errors.New("gateway shutting down"))
				_ = c.CloseGracefully() // calls cancelled by the shutdown are cancelled upstream too
				return
			}
			err = lost
			u.setState(StateDown, nil, err)
			_ = c.Close()
			if up := time.Since(connectedAt); up >= opts.BreakerWindow {
				// It was healthy for a while: not a crash loop.
				failures, halfOpen, backoff = nil, false, opts.MinBackoff
			} else if up > opts.MaxBackoff {
				backoff = opts.MinBackoff
			}
			open = fail()
			if !open {
				u.log.Warn("lost upstream; will reconnect", zap.Error(err))
			}
		}
		var delay time.Duration
		if open {
			delay = opts.BreakerCooldown
			u.log.Error("upstream is crash-looping; breaker open, retrying slowly",
				zap.Int("failures", len(failures)), zap.Duration("window", opts.BreakerWindow),
				zap.Duration("retry_in", delay), zap.Error(err))
			u.mu.Lock()
			u.retryAt = time.Now().Add(delay)
			u.mu.Unlock()
			u.setState(StateBreakerOpen, nil, err)
			u.m.Breaker(true)
			halfOpen, failures = true, nil
		} else {
			// Full jitter keeps a fleet of gateways from reconnecting in lockstep.
			delay = backoff/2 + rand.N(backoff/2+1)
		}
		markFirst()
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		if open {
			u.m.Breaker(false) // half-open: one probe
		} else {
			backoff = min(backoff*2, opts.MaxBackoff)
		}
	}
	u.setState(StateStopped, nil, errors.New("gateway shutting down"))
}

func (u *Upstream) connect(ctx context.Context) (*client.Client, error) {
	t, err := u.transport()
	if err != nil {
		return nil, err
	}
	c, err := u.dial(ctx, t, u.cfg.Protocol, nil)
	if ch, ok := t.(client.Child); ok && err == nil {
		u.mu.Lock()
		u.pid = ch.PID()
		u.mu.Unlock()
	}
	return c, err
}

func (u *Upstream) connectWith(ctx context.Context, protocol string) (*client.Client, error) {
	return u.connectOpts(ctx, protocol, nil)
}

// connectOpts connects with the upstream's notifications going to notify
// (nil: to Options.OnNotification, for the shared connection).
func (u *Upstream) connectOpts(ctx context.Context, protocol string, notify func(method string, params json.RawMessage)) (*client.Client, error) {
	t, err := u.transport()
	if err != nil {
		return nil, err
	}
	return u.dial(ctx, t, protocol, notify)
}

func (u *Upstream) dial(ctx context.Context, t client.Transport, protocol string, notify func(method string, params json.RawMessage)) (*client.Client, error) {
	return u.dialOpts(ctx, t, protocol, json.RawMessage(gatewayCapabilities), notify)
}

// dialCaps connects a capability view: notifications go where the shared
// connection's go.
func (u *Upstream) dialCaps(ctx context.Context, protocol string, caps json.RawMessage) (*client.Client, error) {
	t, err := u.transport()
	if err != nil {
		return nil, err
	}
	return u.dialOpts(ctx, t, protocol, caps, nil)
}

// dialShared connects a fleet's per-session connection (fleetsessions.go):
// it continues resume when set, and never initializes again on its own.
func (u *Upstream) dialShared(ctx context.Context, t client.Transport, notify func(method string, params json.RawMessage), resume *client.Resumption) (*client.Client, error) {
	return u.dialWith(ctx, t, u.cfg.Protocol, json.RawMessage(gatewayCapabilities), notify, func(o *client.Options) {
		o.Resume, o.NoReinitialize = resume, true
	})
}

func (u *Upstream) dialOpts(ctx context.Context, t client.Transport, protocol string, caps json.RawMessage, notify func(method string, params json.RawMessage)) (*client.Client, error) {
	return u.dialWith(ctx, t, protocol, caps, notify, nil)
}

func (u *Upstream) dialWith(ctx context.Context, t client.Transport, protocol string, caps json.RawMessage, notify func(method string, params json.RawMessage), adjust func(*client.Options)) (*client.Client, error) {
	startup := u.cfg.StartupTimeout.D()
	if startup <= 0 {
		startup = config.DefaultStartupTimeout
	}
	cctx, cancel := client.WithBound(ctx, startup, u.setting("startup_timeout"))
	defer cancel()
	name := u.name
	opts := u.host.opts
	o := client.Options{
		Protocol:         protocol,
		PreferInitialize: u.preferInitialize(t), // startup.go
		Name:             name,
		Logger:           u.log,
		Timeout:          u.cfg.Timeout.D(),
		TimeoutSetting:   u.setting("timeout"),
		ClientInfo:       opts.ClientInfo,
		Capabilities:     caps,
		OnNotification: func(method string, params json.RawMessage) {
			switch {
			case notify != nil:
				notify(method, params)
			case opts.OnNotification != nil:
				opts.OnNotification(name, method, params)
			}
		},
		OnRequest: u.answerUnowned,
		// Requests the upstream sends are bounded (client/serverrequests.go).
		MaxServerRequests:            u.cfg.MaxServerRequests,
		MaxServerRequestsPerCall:     u.cfg.MaxServerRequestsPerCall,
		ServerRequestsSetting:        u.setting("max_server_requests"),
		ServerRequestsPerCallSetting: u.setting("max_server_requests_per_call"),
		OnRefused:                    opts.Metrics.LimitRefused,
	}
	if adjust != nil {
		adjust(&o)
	}
	return client.Connect(cctx, t, o)
}

// answerUnowned answers a server→client request that belongs to no
// downstream call the gateway can identify: none in flight, or several on
// a connection whose wire does not say (interactive.go makes that rare).
// Each refusal is logged and counted: the call it came from still ends
// with whatever the upstream makes of it.
func (u *Upstream) answerUnowned(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	switch method {
	case mcp.MethodRootsList:
		return u.rootsResult(), nil
	case mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate:
		hint := u.unattributedHint()
		u.m.Unattributed(method)
		if n, ok := u.interactive.logGate.allow(time.Now()); ok { // interactive.go: an upstream cannot flood the log
			u.log.Warn("refused a server→client request that no single call in flight can be named for",
				zap.String("method", method), zap.Int("interactive_pool", u.cfg.InteractivePool), zap.Bool("stateful", u.cfg.Stateful),
				zap.Int64("unlogged_since_last", n))
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"mcpgw: %s arrived outside any single downstream call (no call in flight, or several on a connection that does not say which one asked), so there is no client to relay it to; %s", method, hint)
	}
	return nil, nil
}

// rootsResult is the roots/list answer from config.
func (u *Upstream) rootsResult() json.RawMessage {
	type root struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	}
	roots := make([]root, 0, len(u.cfg.Roots))
	for _, r := range u.cfg.Roots {
		roots = append(roots, root{r.URI, r.Name})
	}
	b, _ := json.Marshal(map[string]any{"roots": roots})
	return b
}

// CallOptions adapts a downstream call's options to this upstream: unless
// forward_roots is set, roots/list is answered from config even during a call.
// (client.CallOptions.Roots: no wrapper made per call.)
func (u *Upstream) CallOptions(opts client.CallOptions) client.CallOptions {
	if !opts.CanAsk() || u.cfg.ForwardRoots {
		return opts
	}
	opts.Roots = u.roots
	return opts
}

func (u *Upstream) transport() (client.Transport, error) {
	return u.transportWith(u.httpc)
}

// transportWith makes a connection's transport; an HTTP one sends its
// requests with hc.
func (u *Upstream) transportWith(httpc *http.Client) (client.Transport, error) {
	if mk := u.host.opts.Transport; mk != nil {
		return mk(u.name)
	}
	switch {
	case len(u.cfg.Command) > 0:
		return client.NewStdio(client.StdioConfig{
			Argv:         u.cfg.Command,
			Env:          u.cfg.Env,
			InheritEnv:   u.cfg.InheritEnv,
			Environ:      u.host.opts.Environ,
			Dir:          u.cfg.Dir,
			MaxLineBytes: u.cfg.MaxLineBytes,
			Logger:       u.log,
			Stderr:       u.stderr,
			Sandbox:      u.sandboxConfig(), // sandbox.go
		}), nil
	case u.cfg.URL != "":
		hc := client.HTTPConfig{URL: u.cfg.URL, Headers: u.cfg.Headers, Client: httpc, Logger: u.log}
		if u.cfg.Transport == "sse" {
			return client.NewLegacySSE(hc), nil
		}
		return client.NewStreamable(hc), nil
	}
	return nil, errors.New("upstream has neither url nor command")
}
