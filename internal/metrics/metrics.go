// Package metrics holds mcpgw's Prometheus metrics (namespace mcpgw_) on a
// registry the caller injects: nothing is registered globally, so tests and
// several gateways in one process never collide.
//
// A nil *Metrics, and a nil *Upstream from it, record nothing: components
// built without metrics (most tests) need no special case.
//
// The hot path (one request, one upstream call) resolves no label values by
// hashing: per-route and per-upstream series are looked up once and kept, and
// the method label is an index into a fixed table, so the set of series is
// bounded by the config (routes, upstreams) times fixed lists (methods,
// outcomes, states) whatever clients send.
package metrics

import (
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Namespace prefixes every mcpgw metric.
const Namespace = "mcpgw"

// Methods are the values of the method label: the method table's
// labelled methods (mcp.LabelMethods); anything else is "other", so a
// client sending made-up methods cannot grow the series count.
var Methods = append(mcp.LabelMethods(), "other")

var methodIndex = func() map[string]int {
	m := make(map[string]int, len(Methods))
	for i, name := range Methods {
		m[name] = i
	}
	return m
}()

func methodIdx(method string) int {
	if i, ok := methodIndex[method]; ok {
		return i
	}
	return len(Methods) - 1
}

// Outcome is the outcome label of mcpgw_requests_total.
type Outcome int

// Outcomes of a request.
const (
	OutcomeOK          Outcome = iota // a result
	OutcomeError                      // a JSON-RPC error from the upstream, or an internal one
	OutcomeInvalid                    // the client's mistake: unknown name or method, bad params
	OutcomeUnavailable                // the upstream is down (or its connection broke mid-call)
	OutcomeTimeout                    // timed out or cancelled
	OutcomeDenied                     // refused by the access policy or definition pinning
	OutcomeRateLimited                // refused by a rate limit or concurrency cap
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "error", "invalid", "unavailable", "timeout", "denied", "rate_limited"}

func (o Outcome) String() string { return outcomeNames[o] }

// OutcomeOf classifies a response by its error (nil: a result).
func OutcomeOf(e *jsonrpc.Error) Outcome {
	if e == nil {
		return OutcomeOK
	}
	switch e.Code {
	case mcp.CodeUpstreamUnavailable:
		return OutcomeUnavailable
	case mcp.CodeRequestTimeout:
		return OutcomeTimeout
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound,
		jsonrpc.CodeInvalidParams, mcp.CodeResourceNotFound:
		return OutcomeInvalid
	}
	return OutcomeError
}

// States are the values of the state label of mcpgw_upstream_state (the
// host's upstream states).
var States = []string{"starting", "ready", "down", "breaker_open", "stopped"}

// Call error reasons (mcpgw_upstream_call_errors_total's reason label).
const (
	ReasonUnavailable   = iota // no connection to the upstream
	ReasonTimeout              // the call timed out
	ReasonCancelled            // the caller went away
	ReasonTransport            // the connection broke during the call
	ReasonErrorResponse        // the upstream answered a JSON-RPC error
	numReasons
)

var reasonNames = [numReasons]string{"unavailable", "timeout", "cancelled", "transport", "error_response"}

// Stream kinds (mcpgw_streams_open's kind label).
const (
	StreamCall       = "call"       // an SSE response to one request, open while it runs
	StreamStandalone = "standalone" // a session's GET stream, or a legacy HTTP+SSE session's stream
	StreamListen     = "listen"     // a 2026-07-28 subscriptions/listen stream
)

// RouteStats is what a router reports about one route at scrape time.
type RouteStats struct {
	Route      string
	Sessions   int // live stateful sessions (Streamable HTTP and legacy HTTP+SSE)
	Standalone int // open GET / legacy SSE streams
	Listen     int // open subscriptions/listen streams
}

// Metrics is every mcpgw metric, registered on one registry.
type Metrics struct {
	reg  *prometheus.Registry
	cred *credentialSeries // upstream credentials (credentials.go)

	requests *prometheus.CounterVec
	routes   sync.Map // route path -> *routeSeries

	callDuration   *prometheus.HistogramVec
	callErrors     *prometheus.CounterVec
	inflight       *prometheus.GaugeVec
	state          *prometheus.GaugeVec
	up             *prometheus.GaugeVec
	restarts       *prometheus.CounterVec
	handshakeFails *prometheus.CounterVec
	breakerOpen    *prometheus.GaugeVec
	breakerOpens   *prometheus.CounterVec
	stderrLines    *prometheus.CounterVec
	stderrProbe    *prometheus.CounterVec
	sandbox        *prometheus.CounterVec // sandbox.go
	egressConns    *prometheus.CounterVec // sandbox.go
	egressBytes    *prometheus.CounterVec
	egressTunnels  *prometheus.GaugeVec
	listCache      *prometheus.GaugeVec
	listUncached   *prometheus.CounterVec
	upMu           sync.Mutex
	upstreams      map[string]*Upstream

	reloads          *prometheus.CounterVec
	reloadOK         prometheus.Gauge
	reloadOKTime     prometheus.Gauge
	reloadFailedTime prometheus.Gauge

	authFailures    *prometheus.CounterVec
	policyDecisions *prometheus.CounterVec
	rateLimited     *prometheus.CounterVec

	bridgeParked prometheus.Gauge
	bridgeRounds *prometheus.CounterVec

	limitRefusals *prometheus.CounterVec
	intercept     interceptMetrics     // intercept.go
	curated       *prometheus.GaugeVec // curation.go
	// unattributed and interactiveConns: issue 30 (internal/host/interactive.go).
	unattributed     *prometheus.CounterVec
	interactiveConns *prometheus.GaugeVec
	limitMu          sync.Mutex
	limitSeries      map[string]prometheus.Counter

	replayBytes   prometheus.Gauge
	replayTrimmed *prometheus.CounterVec
	replayPurged  prometheus.Counter
	tasksTracked  prometheus.Gauge
	pinVerdicts   prometheus.Gauge
	tasksRefused  *prometheus.CounterVec

	sources *sourceCollector

	ops *opsMetrics // request latency and per-name series (ops.go)
}

// Options configure New.
type Options struct {
	// Version is reported by mcpgw_build_info.
	Version string
	// NoRuntimeCollectors leaves out the Go runtime and process collectors.
	NoRuntimeCollectors bool
	// MaxNames bounds the tool, prompt and resource names of the per-name
	// series, each kind apart (admin.max_metric_names; default 200).
	MaxNames int
}

// New registers mcpgw's metrics (and the Go and process collectors) on reg.
func New(reg *prometheus.Registry, opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	m := &Metrics{reg: reg, upstreams: map[string]*Upstream{}}
	f := factory{reg}
	m.requests = f.counterVec("requests_total",
		"Downstream MCP requests answered, by route, method and outcome (ok, error, invalid, unavailable, timeout, denied, rate_limited).",
		"route", "method", "outcome")
	m.intercept = newInterceptMetrics(reg) // intercept.go
	m.curated = newCuratedNames(reg)       // curation.go
	m.callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "upstream_call_duration_seconds",
		Help:    "Duration of requests mcpgw sent to an upstream on a client's behalf, by upstream and method.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"upstream", "method"})
	reg.MustRegister(m.callDuration)
	m.callErrors = f.counterVec("upstream_call_errors_total",
		"Upstream calls that did not return a result, by upstream and reason (unavailable, timeout, cancelled, transport, error_response).",
		"upstream", "reason")
	m.inflight = f.gaugeVec("upstream_inflight_calls", "Calls in flight to each upstream.", "upstream")
	m.state = f.gaugeVec("upstream_state",
		"Upstream connection state: 1 for the current state (starting, ready, down, breaker_open, stopped), 0 for the others.",
		"upstream", "state")
	m.up = f.gaugeVec("upstream_up", "Whether the upstream is connected and ready (1) or not (0).", "upstream")
	m.restarts = f.counterVec("upstream_restarts_total",
		"Reconnection attempts after the upstream failed or was lost (for a stdio upstream: child processes respawned).", "upstream")
	m.handshakeFails = f.counterVec("upstream_handshake_failures_total",
		"Connection attempts that failed: the child did not start, the server did not answer, or the handshake failed.", "upstream")
	m.breakerOpen = f.gaugeVec("upstream_breaker_open",
		"1 while the upstream's crash-loop breaker is open (failing repeatedly; retried slowly), else 0.", "upstream")
	m.breakerOpens = f.counterVec("upstream_breaker_opens_total", "Times the upstream's crash-loop breaker opened.", "upstream")
	m.stderrLines = f.counterVec("upstream_stderr_lines_total",
		"Lines the upstream's stdio children wrote on stderr, by outcome: logged, dropped (over the upstream's stderr rate limit; reported in a summary line), suppressed (below the gateway's log level).",
		"upstream", "outcome")
	m.stderrProbe = f.counterVec("upstream_stderr_probe_lines_total",
		"Stderr lines written while a child answered the gateway's server/discover probe: logged at debug and kept out of the 'last stderr' of error messages (also counted in upstream_stderr_lines_total).",
		"upstream")

	m.sandbox = f.counterVec("upstream_sandbox_events_total",
		"Sandboxed stdio children by event: started, refused (the kernel could not apply the sandbox; the child was not started), killed_memory and killed_max_processes (stopped by that sandbox limit), denied_reported (a stderr line of the child reporting a permission error: EACCES, EPERM).",
		"upstream", "event")
	m.egressConns = f.counterVec("sandbox_egress_connections_total",
		"Connections sandboxed children (network: egress) made to the gateway's egress proxy, by result: allowed (relayed to a listed host), denied (a host:port not in sandbox.egress), over_limit (past sandbox.egress_max_tunnels), bad_request (not a proxy request), dial_failed (listed, but unreachable from the gateway).",
		"upstream", "result")
	m.egressBytes = f.counterVec("sandbox_egress_bytes_total",
		"Bytes the egress proxy relayed for sandboxed children, by direction: sent (child to host), received (host to child).",
		"upstream", "direction")
	m.egressTunnels = f.gaugeVec("sandbox_egress_tunnels",
		"Open egress proxy tunnels of the upstream's sandboxed children (bounded per child by sandbox.egress_max_tunnels).",
		"upstream")

	m.listCache = f.gaugeVec("upstream_list_cache_bytes",
		"Bytes of the upstream's complete lists (tools, prompts, resources, templates) the catalog keeps to answer list requests without asking it (at most 32 MiB per upstream; dropped on list_changed and reconnects).",
		"upstream")
	m.listUncached = f.counterVec("upstream_list_uncacheable_total",
		"Complete list walks the catalog did not keep, by reason: too_large (over the per-upstream bound), private (the upstream marked a page cacheScope private), unannounced (the upstream declares no listChanged and gave no positive ttlMs); such lists are asked of the upstream on every request.",
		"upstream", "reason")

	m.reloads = f.counterVec("config_reloads_total", "Configuration reloads, by result (success, failure).", "result")
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.reloadOK = f.gauge("config_last_reload_successful", "Whether the last configuration load or reload succeeded (1) or failed (0).")
	m.reloadOKTime = f.gauge("config_last_reload_success_timestamp_seconds", "Unix time of the last successful configuration load or reload.")
	m.reloadFailedTime = f.gauge("config_last_reload_failure_timestamp_seconds", "Unix time of the last failed configuration reload (0: none).")

	m.authFailures = f.counterVec("auth_failures_total",
		"Downstream requests refused by authentication, by reason.", "reason")
	m.policyDecisions = f.counterVec("policy_decisions_total",
		"Policy decisions on tools, prompts and resources, by route and decision (allow, deny).", "route", "decision")
	m.rateLimited = f.counterVec("rate_limited_total", "Downstream requests refused by a rate limit, by route.", "route")

	m.bridgeParked = f.gauge("bridge_parked_calls",
		"Calls of 2026-07-28 clients to legacy upstreams parked while their client answers input_required (at most sessions.max_parked_calls per replica).")
	m.bridgeRounds = f.counterVec("bridge_rounds_total",
		"Bridged input_required rounds by outcome: asked (input_required returned), resumed (a retry answered the upstream), refused (a requestState was not accepted), full (no room to park), missing_capability (-32021), forwarded (a retry passed to the replica holding its call).",
		"outcome")
	for _, o := range []string{BridgeAsked, BridgeResumed, BridgeRefused, BridgeFull, BridgeMissingCapability, BridgeForwarded} {
		m.bridgeRounds.WithLabelValues(o)
	}

	m.cred = newCredentialSeries(f) // credentials.go
	m.limitRefusals = f.counterVec("limit_refusals_total",
		"Requests refused, and clients disconnected, because a configured bound was full, by bound (its config key, e.g. sessions.max_sessions).",
		"bound")
	m.limitSeries = map[string]prometheus.Counter{}
	m.unattributed = f.counterVec("upstream_requests_unattributed_total",
		"Server→client requests (sampling, elicitation) an upstream sent on a connection shared by several calls in flight, refused because no single call could be named as theirs, by upstream and method.",
		"upstream", "method")
	m.interactiveConns = f.gaugeVec("upstream_interactive_connections",
		"Connections of an upstream's interactive pool (upstreams.NAME.interactive_pool), by state: busy (serving one interactive call) or idle.",
		"upstream", "state")
	for _, b := range Bounds {
		m.limitSeries[b] = m.limitRefusals.WithLabelValues(b)
	}
	m.replayBytes = f.gauge("replay_log_bytes",
		"Bytes of session stream events kept for Last-Event-ID replay, all sessions together (bounded by sessions.replay.total_bytes).")
	m.replayTrimmed = f.counterVec("replay_events_trimmed_total",
		"Session stream events dropped from the replay logs, by the bound that dropped them: session (session_events or session_bytes) or total (total_bytes).",
		"bound")
	for _, b := range []string{ReplayBoundSession, ReplayBoundTotal} {
		m.replayTrimmed.WithLabelValues(b)
	}
	m.replayPurged = f.counter("replay_purged_total",
		"Replays (Last-Event-ID) that asked for events already trimmed; the client was told they are gone.")
	m.tasksTracked = f.gauge("tasks_tracked",
		"2025-11-25 tasks this replica remembers for tasks/list and notifications/tasks/status (at most sessions.max_tasks).")
	m.pinVerdicts = f.gauge("pin_verdicts",
		"Tools whose latest definition-pinning verdict this replica remembers, so that each is logged once per definition (at most 10000; past that some are forgotten and may be logged again).")
	m.tasksRefused = f.counterVec("tasks_refused_total",
		"Task requests refused by the gateway, by reason: full (a task-augmented tools/call while sessions.max_tasks tasks are held), not_found (a task id that is not the caller's: unknown, altered, another principal's or another route's).",
		"reason")
	for _, r := range []string{"full", "not_found"} {
		m.tasksRefused.WithLabelValues(r)
	}

	info := f.gaugeVec("build_info", "Always 1; labels carry mcpgw's version and the Go version it was built with.", "version", "goversion")
	info.WithLabelValues(opts.Version, runtime.Version()).Set(1)

	m.ops = newOpsMetrics(f, opts.MaxNames) // ops.go
	m.sources = newSourceCollector(m)
	reg.MustRegister(m.sources)
	if !opts.NoRuntimeCollectors {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry is the registry the metrics are on.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
}

type factory struct{ reg prometheus.Registerer }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

// lazy holds a series resolved on first use, so that only label
// combinations that happened are exported.
type lazy[T any] struct{ p atomic.Pointer[T] }

func (l *lazy[T]) get(resolve func() T) T {
	if p := l.p.Load(); p != nil {
		return *p
	}
	v := resolve()
	l.p.CompareAndSwap(nil, &v) // a racing resolve returns the same child
	return v
}

// routeSeries are one route's pre-resolved series.
type routeSeries struct {
	requests    []lazy[prometheus.Counter] // [method*numOutcomes+outcome], len(Methods)*numOutcomes
	callStreams atomic.Int64
}

func (m *Metrics) route(path string) *routeSeries {
	if rs, ok := m.routes.Load(path); ok {
		return rs.(*routeSeries)
	}
	rs, _ := m.routes.LoadOrStore(path, &routeSeries{requests: make([]lazy[prometheus.Counter], len(Methods)*int(numOutcomes))})
	return rs.(*routeSeries)
}

// Request counts one answered downstream request: e is the response's
// error, nil for a result.
func (m *Metrics) Request(route, method string, e *jsonrpc.Error) {
	m.RequestOutcome(route, method, OutcomeOf(e))
}

// RequestOutcome counts one downstream request with a known outcome.
func (m *Metrics) RequestOutcome(route, method string, o Outcome) {
	if m == nil {
		return
	}
	mi := methodIdx(method)
	c := m.route(route).requests[mi*int(numOutcomes)+int(o)].get(func() prometheus.Counter {
		return m.requests.WithLabelValues(route, Methods[mi], outcomeNames[o])
	})
	c.Inc()
}

// CallStream records an SSE response stream opening (+1) or closing (-1).
func (m *Metrics) CallStream(route string, delta int) {
	if m == nil {
		return
	}
	m.route(route).callStreams.Add(int64(delta))
}

// SetRouteSource installs the function that reports sessions and long-lived
// streams at scrape time (the router's). Counting them when scraped keeps
// every session and stream operation free of metric updates.
func (m *Metrics) SetRouteSource(f func() []RouteStats) {
	if m == nil {
		return
	}
	m.sources.mu.Lock()
	m.sources.routes = f
	m.sources.mu.Unlock()
}

// SetUpstreamConnSource installs the function that reports the
// connections to plain-http upstreams at scrape time (the host's).
func (m *Metrics) SetUpstreamConnSource(f func() (opened, idle int64)) {
	if m == nil {
		return
	}
	m.sources.mu.Lock()
	m.sources.conns = f
	m.sources.mu.Unlock()
}

// AuthFailure counts a request refused by authentication. reason must come
// from a fixed set (e.g. missing_token, invalid_token, expired, audience,
// insufficient_scope, unknown_key), never from the request.
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// PolicyDecision counts a policy decision on route ("allow", "deny", or
// "unpinned" for a call refused by definition pinning).
func (m *Metrics) PolicyDecision(route, decision string) {
	if m != nil {
		m.policyDecisions.WithLabelValues(route, decision).Inc()
	}
}

// RateLimited counts a request refused by a rate limit on route.
func (m *Metrics) RateLimited(route string) {
	if m != nil {
		m.rateLimited.WithLabelValues(route).Inc()
	}
}

// Bridge round outcomes (mcpgw_bridge_rounds_total's outcome label).
const (
	BridgeAsked             = "asked"
	BridgeResumed           = "resumed"
	BridgeRefused           = "refused"
	BridgeFull              = "full"
	BridgeMissingCapability = "missing_capability"
	BridgeForwarded         = "forwarded"
)

// BridgeParked moves the number of parked bridged calls by delta.
func (m *Metrics) BridgeParked(delta int) {
	if m != nil {
		m.bridgeParked.Add(float64(delta))
	}
}

// BridgeRound counts one bridged round's outcome (Bridge* constants).
func (m *Metrics) BridgeRound(outcome string) {
	if m != nil {
		m.bridgeRounds.WithLabelValues(outcome).Inc()
	}
}

// Bounds are the values of mcpgw_limit_refusals_total's bound label that
// exist from the start (each at 0); a stateful upstream's bounds,
// upstreams.NAME.max_sessions and .max_sessions_per_principal, appear when
// first refused. Every value is a config key, so the set is bounded by the
// config.
var Bounds = []string{
	"sessions.max_sessions", "sessions.max_sessions_per_principal",
	"sessions.max_requests_per_session", "sessions.max_replay_streams",
	"sessions.sse_write_timeout",
	"sessions.max_parked_calls", "sessions.max_parked_calls_per_principal",
	"read_body_timeout",
}

// LimitRefused counts one refusal by the bound with config key bound.
func (m *Metrics) LimitRefused(bound string) {
	if m == nil {
		return
	}
	m.limitMu.Lock()
	c := m.limitSeries[bound]
	if c == nil {
		c = m.limitRefusals.WithLabelValues(bound)
		m.limitSeries[bound] = c
	}
	m.limitMu.Unlock()
	c.Inc()
}

// Bounds that trim the replay logs (ReplayTrimmed).
const (
	ReplayBoundSession = "session"
	ReplayBoundTotal   = "total"
)

// ReplayBytes sets the bytes held by the replay logs.
func (m *Metrics) ReplayBytes(n int64) {
	if m != nil {
		m.replayBytes.Set(float64(n))
	}
}

// ReplayTrimmed counts n events dropped by bound (ReplayBound*).
func (m *Metrics) ReplayTrimmed(n int, bound string) {
	if m != nil {
		m.replayTrimmed.WithLabelValues(bound).Add(float64(n))
	}
}

// ReplayPurged counts a replay that asked for trimmed events.
func (m *Metrics) ReplayPurged() {
	if m != nil {
		m.replayPurged.Inc()
	}
}

// TasksTracked sets how many 2025-11-25 tasks the gateway remembers.
func (m *Metrics) TasksTracked(n int) {
	if m != nil {
		m.tasksTracked.Set(float64(n))
	}
}

// PinVerdicts sets how many tools' pinning verdicts the gateway remembers.
func (m *Metrics) PinVerdicts(n int) {
	if m != nil {
		m.pinVerdicts.Set(float64(n))
	}
}

// TaskRefused counts a task-augmented call refused because the task index
// is full.
func (m *Metrics) TaskRefused() {
	if m != nil {
		m.tasksRefused.WithLabelValues("full").Inc()
	}
}

// TaskNotFound counts a task request whose id is not the caller's.
func (m *Metrics) TaskNotFound() {
	if m != nil {
		m.tasksRefused.WithLabelValues("not_found").Inc()
	}
}

// ConfigLoaded records the configuration loaded at start.
func (m *Metrics) ConfigLoaded() {
	if m == nil {
		return
	}
	m.reloadOK.Set(1)
	m.reloadOKTime.SetToCurrentTime()
}

// ConfigReload records the result of a configuration reload.
func (m *Metrics) ConfigReload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.reloadOK.Set(1)
		m.reloadOKTime.SetToCurrentTime()
		return
	}
	m.reloads.WithLabelValues("failure").Inc()
	m.reloadOK.Set(0)
	m.reloadFailedTime.SetToCurrentTime()
}

// Stderr line outcomes (mcpgw_upstream_stderr_lines_total's outcome label).
const (
	StderrLogged     = iota // written to the gateway's log
	StderrDropped           // over the upstream's rate limit
	StderrSuppressed        // below the gateway's log level
	numStderrOutcomes
)

var stderrOutcomeNames = [numStderrOutcomes]string{"logged", "dropped", "suppressed"}

// Upstream returns the series of the named upstream, creating them on first
// use; a nil *Metrics returns nil, which records nothing.
func (m *Metrics) Upstream(name string) *Upstream {
	if m == nil {
		return nil
	}
	m.upMu.Lock()
	defer m.upMu.Unlock()
	if u := m.upstreams[name]; u != nil {
		return u
	}
	u := &Upstream{m: m, name: name, durations: make([]lazy[prometheus.Observer], len(Methods)),
		restarts:          m.restarts.WithLabelValues(name),
		handshakeFailures: m.handshakeFails.WithLabelValues(name),
		breakerOpens:      m.breakerOpens.WithLabelValues(name),
		breakerOpen:       m.breakerOpen.WithLabelValues(name),
		inflight:          m.inflight.WithLabelValues(name),
		up:                m.up.WithLabelValues(name),
		stderrProbe:       m.stderrProbe.WithLabelValues(name),
		listCache:         m.listCache.WithLabelValues(name),
	}
	for i, o := range stderrOutcomeNames {
		u.stderr[i] = m.stderrLines.WithLabelValues(name, o)
	}
	for _, r := range ListUncacheableReasons {
		m.listUncached.WithLabelValues(name, r)
	}
	u.states = make([]prometheus.Gauge, len(States))
	for i, s := range States {
		u.states[i] = m.state.WithLabelValues(name, s)
	}
	u.SetState("starting")
	m.upstreams[name] = u
	return u
}

// Upstream is one upstream's series. Its methods are safe on nil.
type Upstream struct {
	m    *Metrics
	name string

	states            []prometheus.Gauge
	up                prometheus.Gauge
	restarts          prometheus.Counter
	handshakeFailures prometheus.Counter
	breakerOpens      prometheus.Counter
	breakerOpen       prometheus.Gauge
	inflight          prometheus.Gauge
	durations         []lazy[prometheus.Observer] // by method index, len(Methods)
	errors            [numReasons]lazy[prometheus.Counter]
	stderr            [numStderrOutcomes]prometheus.Counter
	stderrProbe       prometheus.Counter
	listCache         prometheus.Gauge
}

// ListCacheBytes sets the bytes of the upstream's lists the catalog keeps.
func (u *Upstream) ListCacheBytes(n int64) {
	if u != nil {
		u.listCache.Set(float64(n))
	}
}

// ListUncacheableReasons are the reasons of ListUncacheable.
var ListUncacheableReasons = []string{"too_large", "private", "unannounced"}

// ListUncacheable counts a complete list walk not kept, for reason (one
// of ListUncacheableReasons).
func (u *Upstream) ListUncacheable(reason string) {
	if u != nil {
		u.m.listUncached.WithLabelValues(u.name, reason).Inc()
	}
}

// StderrLine counts one stderr line of a stdio child by outcome (a Stderr*
// constant); probe marks a line written while it answered the gateway's
// server/discover probe.
func (u *Upstream) StderrLine(outcome int, probe bool) {
	if u == nil || outcome < 0 || outcome >= numStderrOutcomes {
		return
	}
	u.stderr[outcome].Inc()
	if probe {
		u.stderrProbe.Inc()
	}
}

// SetState makes state (one of States) the current one.
func (u *Upstream) SetState(state string) {
	if u == nil {
		return
	}
	for i, s := range States {
		if s == state {
			u.states[i].Set(1)
		} else {
			u.states[i].Set(0)
		}
	}
	if state == "ready" {
		u.up.Set(1)
	} else {
		u.up.Set(0)
	}
}

// Restart counts a reconnection attempt.
func (u *Upstream) Restart() {
	if u != nil {
		u.restarts.Inc()
	}
}

// HandshakeFailed counts a failed connection attempt.
func (u *Upstream) HandshakeFailed() {
	if u != nil {
		u.handshakeFailures.Inc()
	}
}

// Breaker records the crash-loop breaker opening (true) or closing.
func (u *Upstream) Breaker(open bool) {
	if u == nil {
		return
	}
	if open {
		u.breakerOpens.Inc()
		u.breakerOpen.Set(1)
	} else {
		u.breakerOpen.Set(0)
	}
}

// Unavailable counts a call refused because the upstream is not connected.
func (u *Upstream) Unavailable() {
	if u == nil {
		return
	}
	u.errors[ReasonUnavailable].get(func() prometheus.Counter {
		return u.m.callErrors.WithLabelValues(u.name, reasonNames[ReasonUnavailable])
	}).Inc()
}

// Unattributed counts a server→client request refused because several
// calls were in flight on its connection.
func (u *Upstream) Unattributed(method string) {
	if u != nil {
		u.m.unattributed.WithLabelValues(u.name, method).Inc()
	}
}

// InteractiveConns sets the interactive pool's busy and idle connections.
func (u *Upstream) InteractiveConns(busy, idle int) {
	if u != nil {
		u.m.interactiveConns.WithLabelValues(u.name, "busy").Set(float64(busy))
		u.m.interactiveConns.WithLabelValues(u.name, "idle").Set(float64(idle))
	}
}

// CallStarted records a call going out; the returned time is for CallDone.
func (u *Upstream) CallStarted() time.Time {
	if u == nil {
		return time.Time{}
	}
	u.inflight.Inc()
	return time.Now()
}

// CallDone records a call's end: its duration since start, and reason (one
// of the Reason constants) or -1 when it returned a result.
func (u *Upstream) CallDone(method string, start time.Time, reason int) {
	if u == nil {
		return
	}
	u.inflight.Dec()
	mi := methodIdx(method)
	u.durations[mi].get(func() prometheus.Observer {
		return u.m.callDuration.WithLabelValues(u.name, Methods[mi])
	}).Observe(time.Since(start).Seconds())
	if reason >= 0 && reason < numReasons {
		u.errors[reason].get(func() prometheus.Counter {
			return u.m.callErrors.WithLabelValues(u.name, reasonNames[reason])
		}).Inc()
	}
}

// sourceCollector exports what is counted at scrape time: sessions and
// streams (from the router) and call streams (counted here).
type sourceCollector struct {
	m        *Metrics
	sessions *prometheus.Desc
	streams  *prometheus.Desc

	connsOpened, connsIdle *prometheus.Desc

	mu     sync.Mutex
	routes func() []RouteStats
	conns  func() (opened, idle int64)
}

func newSourceCollector(m *Metrics) *sourceCollector {
	return &sourceCollector{
		m: m,
		sessions: prometheus.NewDesc(Namespace+"_sessions_active",
			"Live downstream sessions (Streamable HTTP and legacy HTTP+SSE), by route.", []string{"route"}, nil),
		streams: prometheus.NewDesc(Namespace+"_streams_open",
			"Open downstream SSE streams, by route and kind (call: a response stream; standalone: a session's GET or legacy SSE stream; listen: subscriptions/listen).",
			[]string{"route", "kind"}, nil),
		connsOpened: prometheus.NewDesc(Namespace+"_upstream_http_connections_opened_total",
			"Connections opened to plain-http upstreams (kept ones are reused: a rate that follows the call rate is churn).", nil, nil),
		connsIdle: prometheus.NewDesc(Namespace+"_upstream_http_connections_idle",
			"Connections to plain-http upstreams kept idle for the next request (bounded per upstream address and in all; one past the bound is closed).", nil, nil),
	}
}

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.streams
	ch <- c.connsOpened
	ch <- c.connsIdle
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f, conns := c.routes, c.conns
	c.mu.Unlock()
	if conns != nil {
		opened, idle := conns()
		ch <- prometheus.MustNewConstMetric(c.connsOpened, prometheus.CounterValue, float64(opened))
		ch <- prometheus.MustNewConstMetric(c.connsIdle, prometheus.GaugeValue, float64(idle))
	}
	calls := map[string]int64{}
	c.m.routes.Range(func(k, v any) bool {
		calls[k.(string)] = v.(*routeSeries).callStreams.Load()
		return true
	})
	if f != nil {
		for _, rs := range f() {
			ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(rs.Sessions), rs.Route)
			ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(rs.Standalone), rs.Route, StreamStandalone)
			ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(rs.Listen), rs.Route, StreamListen)
			ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(calls[rs.Route]), rs.Route, StreamCall)
			delete(calls, rs.Route)
		}
	}
	for route, n := range calls { // routes only the call counter knows
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(n), route, StreamCall)
	}
}
