// Package config owns mcpgw's YAML configuration: its shape, strict loading
// (unknown keys are errors with line numbers), ${ENV} expansion, defaults and
// validation that reports every problem at once.
package config

import "time"

// DefaultSeparator joins an upstream name and a tool/prompt name on prefixed routes.
const DefaultSeparator = "__"

// Config is the whole gateway configuration. Field tags are the YAML keys;
// docs/configuration.md documents each one.
type Config struct {
	// Listen is the MCP listener address. Loopback by default.
	Listen string `yaml:"listen"`
	// PublicURL is the canonical resource URI of the gateway (token audience).
	PublicURL string `yaml:"public_url"`
	// AllowedOrigins lists the browser Origins accepted on the MCP listener.
	// A request without Origin is allowed; one with an unlisted Origin gets 403.
	// Each is scheme://host[:port] with no path ("*" is refused); Parse
	// lower-cases them, as browsers send them.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Separator joins "<upstream><separator><name>" on prefixed routes.
	Separator string `yaml:"separator"`
	// MaxBodyBytes caps a downstream request body (413 beyond).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadHeaderTimeout bounds reading a downstream request's headers, and
	// ReadBodyTimeout reading its body (limits.go): a client that sends
	// slowly holds a connection no longer than this.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	ReadBodyTimeout   Duration `yaml:"read_body_timeout"`
	// PageSize is how many items a merged list page holds at most, for
	// routes that set none.
	PageSize int `yaml:"page_size"`
	// Upstreams are the MCP servers the gateway is a client of, by name.
	Upstreams map[string]*Upstream `yaml:"upstreams"`
	// Routes are the downstream endpoints ("virtual servers").
	Routes []*Route `yaml:"routes"`
	// Auth configures downstream authentication.
	Auth *Auth `yaml:"auth"`
	// Admin configures the admin listener (/metrics, /healthz, /readyz).
	Admin *Admin `yaml:"admin"`
	// Sessions configures downstream session handling.
	Sessions *Sessions `yaml:"sessions"`
	// Policy configures per-tool access decisions.
	Policy *Policy `yaml:"policy"`
	// Audit configures the audit log (audit.go).
	Audit *Audit `yaml:"audit"`
	// Tracing configures OpenTelemetry tracing (tracing.go; off when absent
	// unless the OTEL_* environment turns it on).
	Tracing *Tracing `yaml:"tracing"`
	// TLS serves the MCP listener over TLS (tls.go; plain HTTP when absent).
	TLS *ListenerTLS `yaml:"tls"`
	// Interceptors inspect, redact, refuse or rewrite what passes the
	// request path (interceptors.go), in order.
	Interceptors []*Interceptor `yaml:"interceptors"`
	// Login makes the gateway the authorization server its clients see,
	// delegating sign-in to an OpenID provider (login.go).
	Login *Login `yaml:"login"`
}

// Upstream is one MCP server. Exactly one of URL or Command is set.
type Upstream struct {
	// URL of a Streamable HTTP or legacy HTTP+SSE server.
	URL string `yaml:"url"`
	// Transport forces the HTTP flavour: "streamable" (default for url) or "sse"
	// (legacy 2024-11-05 HTTP+SSE). For command upstreams it is "stdio".
	Transport string `yaml:"transport"`
	// Headers are sent on every HTTP request to the upstream (credentials from env).
	Headers map[string]string `yaml:"headers"`
	// OAuth obtains the gateway's own access token for this HTTP upstream
	// (client-credentials grant, upstream_oauth.go).
	OAuth *UpstreamOAuth `yaml:"oauth"`
	// Auth authorizes the upstream's requests for the calling principal
	// (upstream_auth.go): token_exchange, a token exchanged for the
	// caller's (RFC 8693); per_user, each caller's own OAuth token.
	Auth *UpstreamAuth `yaml:"auth"`
	// Command is the argv of a stdio child; no shell is involved.
	Command []string `yaml:"command,omitempty"`
	// Env is added to the child's environment.
	Env map[string]string `yaml:"env"`
	// InheritEnv names the gateway's variables the child gets besides the
	// minimal set (PATH, HOME, locale, ...): names, or prefixes ending in *.
	InheritEnv []string `yaml:"inherit_env"`
	// Dir is the child's working directory.
	Dir string `yaml:"dir"`
	// Timeout bounds each request to the upstream.
	Timeout Duration `yaml:"timeout"`
	// StartupTimeout bounds the handshake.
	StartupTimeout Duration `yaml:"startup_timeout"`
	// StartupListWait bounds how long a list waits for this upstream while
	// it makes its first connection (from when that began); past it, lists
	// are answered without it, and list_changed tells clients when it
	// arrives. 0 never waits.
	StartupListWait Duration `yaml:"startup_list_wait"`
	// Stateful gives each downstream session its own upstream connection
	// (its own child process, for stdio), made on the session's first request
	// and closed when it ends; at most MaxSessions per upstream, and
	// MaxSessionsPerPrincipal of them for one principal (limits.go).
	Stateful                bool `yaml:"stateful"`
	MaxSessions             int  `yaml:"max_sessions,omitempty"`
	MaxSessionsPerPrincipal int  `yaml:"max_sessions_per_principal,omitempty"`
	// MaxServerRequests bounds the requests this upstream sends the
	// gateway (sampling, elicitation, roots) that are answered at once, on
	// each connection, and MaxServerRequestsPerCall those of one call
	// (limits.go); ping is answered inline and not counted.
	MaxServerRequests        int `yaml:"max_server_requests"`
	MaxServerRequestsPerCall int `yaml:"max_server_requests_per_call"`
	// InteractivePool bounds the extra connections (children, for stdio)
	// of a stdio or legacy SSE upstream on which calls of callers that
	// declared sampling or elicitation run when the shared one is busy:
	// with one such call in flight per connection, each server→client
	// request has exactly one caller (limits.go). 0 turns the pool off.
	InteractivePool int `yaml:"interactive_pool"`
	// ExactCapabilities makes the upstream see each caller's own client
	// capabilities (sampling, elicitation): calls from callers that declare
	// less than the gateway go over a connection declaring exactly theirs.
	// Only for connections that initialize; 2026-07-28 needs none.
	ExactCapabilities bool `yaml:"exact_capabilities"`
	// Protocol chooses the revisions spoken to this upstream: "auto" (the
	// default) uses 2026-07-28 when the upstream offers it and, for callers of
	// older revisions, a second connection that initializes, so each caller
	// is served as if it talked to the upstream directly; "2026" uses only
	// 2026-07-28 (older callers are bridged); "legacy" only initializes.
	Protocol string `yaml:"protocol"`
	// MaxLineBytes caps one stdout line of a stdio child.
	MaxLineBytes int `yaml:"max_line_bytes"`
	// Stderr configures how a stdio child's stderr is logged (stderr.go).
	Stderr *Stderr `yaml:"stderr"`
	// Sandbox confines a stdio child (sandbox.go).
	Sandbox *Sandbox `yaml:"sandbox"`
	// Roots answer the upstream's roots/list: on a shared gateway the
	// client's filesystem means nothing to the gateway's host, so roots come
	// from config unless ForwardRoots relays the question to the client.
	Roots []Root `yaml:"roots"`
	// ForwardRoots relays roots/list during a call to the calling client.
	ForwardRoots bool `yaml:"forward_roots"`
	// Required makes the gateway's readiness (/readyz on the admin listener)
	// depend on this upstream being connected.
	Required bool `yaml:"required"`
	// TLS configures how the gateway verifies this https upstream and the
	// client certificate it presents (tls.go).
	TLS *UpstreamTLS `yaml:"tls"`
	// Proxy is an http:// proxy for this upstream's requests (CONNECT for
	// https), instead of HTTPS_PROXY/HTTP_PROXY/NO_PROXY (tls.go).
	Proxy string `yaml:"proxy"`
	// ForwardHeaders are caller request headers this upstream gets, by
	// explicit opt-in; it is then per caller (forward_headers.go).
	ForwardHeaders []ForwardHeader `yaml:"forward_headers"`
	// Curate is this upstream's tool curation on every route, by its own
	// tool names; a route's tools.curate takes precedence (curate.go).
	Curate []*ToolCuration `yaml:"curate"`
}

// Root is one filesystem root offered to an upstream.
type Root struct {
	URI  string `yaml:"uri"`
	Name string `yaml:"name"`
}

// Route is one downstream endpoint.
type Route struct {
	// Path is the HTTP path, e.g. /mcp.
	Path string `yaml:"path"`
	// RequireDPoP refuses tokens on this route that are not DPoP-bound
	// and presented with a proof (RFC 9449): bearer tokens and API keys.
	RequireDPoP bool `yaml:"require_dpop"`
	// Upstreams lists the upstreams exposed; empty means all.
	Upstreams []string `yaml:"upstreams"`
	// Prefix namespaces names as "<upstream><separator><name>". Defaults to
	// true; false is allowed only for a route with exactly one upstream.
	Prefix *bool `yaml:"prefix"`
	// Scopes are OAuth scopes every caller of this route needs (on top of
	// auth.required_scopes); a token without them gets 403
	// insufficient_scope. Needs auth.
	Scopes []string `yaml:"scopes"`
	// PageSize is how many items a merged list page holds at most (whole
	// upstream pages; the top-level page_size when unset).
	PageSize int `yaml:"page_size"`
	// BareNames lets a prefixed route resolve a tool or prompt by its
	// upstream's own name while exactly one upstream has it. Default true.
	BareNames *bool `yaml:"bare_names"`
	// Tools is how the route's tools are discovered: listed whole, or
	// behind the gateway's search_tools and call_tool (docs/protocol.md,
	// "Tool search").
	Tools *RouteTools `yaml:"tools"`
}

// Discovery modes of a route's tools (routes[].tools.mode).
const (
	ToolsAll    = "all"    // tools/list shows every tool (the default)
	ToolsSearch = "search" // tools/list shows the meta-tools and the always tools
	ToolsAuto   = "auto"   // search above threshold visible tools, else all
)

// DefaultToolsThreshold is the auto mode's threshold when none is set.
const DefaultToolsThreshold = 50

// MetaUpstream is the upstream name the gateway's own tools are named
// under on a search route (mcpgw__search_tools): no upstream on such a
// route may be called this.
const MetaUpstream = "mcpgw"

// RouteTools configures how a route's tools are discovered.
type RouteTools struct {
	// Mode is all, search or auto.
	Mode string `yaml:"mode"`
	// Threshold: in auto mode, more visible tools than this switch the
	// route's tools/list to search.
	Threshold int `yaml:"threshold"`
	// Always are tools (as the route names them) listed in search mode
	// too, next to the meta-tools.
	Always []string `yaml:"always"`
	// Curate renames and re-describes tools and fixes, defaults or hides
	// their parameters on this route (curate.go); it takes precedence over
	// the upstreams' own curate rules.
	Curate []*ToolCuration `yaml:"curate"`
	// Expose, when set, lists only the tools (as the route names them;
	// globs allowed) it matches: a curated catalog without policy rules.
	Expose []string `yaml:"expose"`
}

// ToolsMode returns the route's discovery mode (all when unset).
func (r *Route) ToolsMode() string {
	if r.Tools == nil || r.Tools.Mode == "" {
		return ToolsAll
	}
	return r.Tools.Mode
}

// ToolsThreshold returns the auto mode's threshold.
func (r *Route) ToolsThreshold() int {
	if r.Tools == nil || r.Tools.Threshold <= 0 {
		return DefaultToolsThreshold
	}
	return r.Tools.Threshold
}

// Prefixed reports whether names on this route carry the upstream prefix.
func (r *Route) Prefixed() bool { return r.Prefix == nil || *r.Prefix }

// BareNamesEnabled reports whether bare names resolve on this route.
func (r *Route) BareNamesEnabled() bool { return r.BareNames == nil || *r.BareNames }

// Auth configures downstream authentication (see internal/auth). With no
// issuer and no API key, requests are unauthenticated, which validation
// allows only on a loopback listener unless InsecureNoAuth is set.
type Auth struct {
	// OIDC is one token issuer (the common case); Issuers lists more. Both
	// may be used; together they are AllIssuers.
	OIDC    *OIDC   `yaml:"oidc"`
	Issuers []*OIDC `yaml:"issuers"`
	// APIKeys are static keys for machines, sent as "Authorization: Bearer
	// KEY" (or X-API-Key).
	APIKeys []APIKey `yaml:"api_keys"`
	// RequiredScopes are scopes every request on every route needs.
	RequiredScopes []string `yaml:"required_scopes"`
	// InsecureNoAuth allows a non-loopback listener without authentication.
	InsecureNoAuth bool `yaml:"insecure_no_auth"`
	// Introspection checks opaque tokens (those that are not JWTs of a
	// configured issuer) at an RFC 7662 endpoint (introspection.go).
	Introspection *Introspection `yaml:"introspection"`
	// ClientCertificates makes a client certificate verified by the
	// listener's tls.client_ca_file a credential (tls.go).
	ClientCertificates *ClientCertificates `yaml:"client_certificates"`
	// DPoP tunes the checking of DPoP-bound tokens (dpop.go).
	DPoP *DPoP `yaml:"dpop"`

	// login is set when login: is configured: the gateway's own tokens
	// are a credential (login.go).
	login bool
}

// AllIssuers returns auth.oidc followed by auth.issuers.
func (a *Auth) AllIssuers() []*OIDC {
	if a == nil {
		return nil
	}
	var out []*OIDC
	if a.OIDC != nil {
		out = append(out, a.OIDC)
	}
	for _, o := range a.Issuers {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// Enabled reports whether any credential is configured, so that requests
// must authenticate.
func (a *Auth) Enabled() bool {
	return a != nil && (len(a.AllIssuers()) > 0 || len(a.APIKeys) > 0 || a.Introspection != nil || a.ClientCertificates != nil || a.login)
}

// OIDC is one token issuer: an OpenID Provider / OAuth authorization server
// whose JWT access tokens the gateway accepts.
type OIDC struct {
	// Issuer is the issuer URL; its discovery document is
	// <issuer>/.well-known/openid-configuration and tokens must carry it
	// as iss.
	Issuer string `yaml:"issuer"`
	// Audience the tokens must carry in aud. Empty means the gateway's
	// canonical resource URI: public_url, or public_url + the route path.
	Audience string `yaml:"audience"`
	// JWKSURL skips discovery and reads the keys from this URL.
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms is the signature algorithm allowlist (default: RS256,
	// RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA).
	Algorithms []string `yaml:"algorithms"`
	// Leeway tolerates clock skew on exp, nbf and iat (default 30s).
	Leeway Duration `yaml:"leeway"`
	// GroupsClaim is the claim holding the caller's groups: a top-level
	// name ("groups", "https://example.com/groups") or a dotted path
	// ("realm_access.roles"). Default groups.
	GroupsClaim string `yaml:"groups_claim"`
}

// APIKey maps a secret key to a principal.
type APIKey struct {
	Name string `yaml:"name"`
	// Key is the secret (use ${ENV_VAR}); KeyFile a file holding it.
	Key     string `yaml:"key"`
	KeyFile string `yaml:"key_file"`
	// Principal is the subject the key acts as (default: the name).
	Principal string   `yaml:"principal"`
	Groups    []string `yaml:"groups"`
	// Scopes the key grants, for routes that require scopes.
	Scopes []string `yaml:"scopes"`
}

// Admin is the admin listener: /metrics, /healthz and /readyz, never served
// on the MCP listener. It is off unless configured (or enabled with
// mcpgw run --admin-listen), so that a busy port never stops the default
// config from starting.
type Admin struct {
	// Listen is the admin listener's address, e.g. 127.0.0.1:9091.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiles at /debug/pprof/ (off by default: a
	// profile shows the process's internals to whoever reaches the port).
	Pprof bool `yaml:"pprof"`
	// MaxMetricNames bounds the tool, prompt and resource names given their
	// own series in the per-name metrics (tracing.go).
	MaxMetricNames int `yaml:"max_metric_names"`
	// AllowedHosts are the DNS names, besides IP addresses and loopback
	// names, that requests may give in Host (DNS-rebinding protection),
	// e.g. a Kubernetes Service name.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TokenFile holds a bearer token that the status page, /status/* and
	// /debug/* require (Authorization: Bearer, or as the Basic password).
	TokenFile string `yaml:"token_file"`
	// ProtectMetrics makes /metrics require the token too (scrapers then
	// need it); /healthz and /readyz stay open for probes.
	ProtectMetrics bool `yaml:"protect_metrics"`
	// TLS serves the admin listener over TLS (tls.go).
	TLS *ListenerTLS `yaml:"tls"`
}

// Sessions configures downstream sessions.
type Sessions struct {
	KeyFile string `yaml:"key_file"`
	// AdvertiseURL is the base URL the other replicas reach this one's MCP
	// listener at: a bridged call's retry that reaches another replica is
	// forwarded here. Needs KeyFile (the replicas' shared key).
	AdvertiseURL string `yaml:"advertise_url"`
	// IdleTimeout ends a downstream session nobody used for this long.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// DetachedTimeout ends sooner a session of a route with a stateful
	// upstream once its client is gone: no request in flight and no open
	// stream for this long (0: the default, 2m). Such a session holds an
	// upstream session (a child, for stdio) that clients which never send
	// DELETE would otherwise hold for idle_timeout.
	DetachedTimeout Duration `yaml:"detached_timeout"`
	// Replay bounds the logs sessions' streams are replayed from
	// (Last-Event-ID).
	Replay *Replay `yaml:"replay"`
	// MaxTasks bounds the 2025-11-25 tasks a replica remembers for
	// tasks/list and status notifications (0: the default, 10000).
	MaxTasks int    `yaml:"max_tasks"`
	Redis    *Redis `yaml:"redis"`

	// Bounds (limits.go): how many sessions the gateway keeps, in all and
	// for one principal; per session, how many requests run at once and
	// how many Last-Event-ID replay streams are open; a legacy HTTP+SSE
	// client's queue and how long one write to it may take; and how many
	// bridged calls wait for their client's input, in all and for one
	// principal.
	MaxSessions             int      `yaml:"max_sessions"`
	MaxSessionsPerPrincipal int      `yaml:"max_sessions_per_principal"`
	MaxRequestsPerSession   int      `yaml:"max_requests_per_session"`
	MaxReplayStreams        int      `yaml:"max_replay_streams"`
	SSEQueue                int      `yaml:"sse_queue"`
	SSEWriteTimeout         Duration `yaml:"sse_write_timeout"`
	// PrimingHold is how long a POST stream's priming event (2025-11-25)
	// waits to go out with the call's first event, in one write.
	PrimingHold                Duration `yaml:"priming_hold"`
	MaxParkedCalls             int      `yaml:"max_parked_calls"`
	MaxParkedCallsPerPrincipal int      `yaml:"max_parked_calls_per_principal"`
	// QueueBytes and QueueTotalBytes bound, in bytes, what waits for a
	// client to read it (a legacy HTTP+SSE or stdio session's queue, a
	// call's event queue): per session and for the whole process.
	QueueBytes      int64 `yaml:"queue_bytes"`
	QueueTotalBytes int64 `yaml:"queue_total_bytes"`
	// Resource subscriptions (resources/subscribe and subscriptions/listen):
	// how many one session and one principal hold, how many listen streams
	// one principal keeps open, and how long a subscribed URI may be.
	MaxSubscriptionsPerSession   int `yaml:"max_subscriptions_per_session"`
	MaxSubscriptionsPerPrincipal int `yaml:"max_subscriptions_per_principal"`
	MaxListenStreamsPerPrincipal int `yaml:"max_listen_streams_per_principal"`
	MaxSubscriptionURIBytes      int `yaml:"max_subscription_uri_bytes"`
}

// Replay bounds what is kept for resuming session streams: per session
// and for the whole process. Trimming drops the oldest events first, and
// under the process-wide bound the oldest sessions' first; a client that
// asks for trimmed events is told they are gone.
type Replay struct {
	SessionEvents int   `yaml:"session_events"`
	SessionBytes  int64 `yaml:"session_bytes"`
	TotalBytes    int64 `yaml:"total_bytes"`
}

// ReplayLimits returns the replay bounds in force: sessions.replay with
// the defaults for what it leaves out.
func (c *Config) ReplayLimits() Replay {
	r := Replay{SessionEvents: DefaultReplaySessionEvents, SessionBytes: DefaultReplaySessionBytes, TotalBytes: DefaultReplayTotalBytes}
	if c.Sessions != nil && c.Sessions.Replay != nil {
		r = *c.Sessions.Replay
	}
	return r
}

// Redis is the shared state of a fleet of replicas (sessions.redis): the
// replay logs other replicas resume from and the ids of DELETEd sessions.
// Exactly one of Addr, URL and Addrs says where it is; with Addrs,
// MasterName means Sentinel and otherwise the addresses are Cluster seeds
// (go-redis' universal client decides the same way).
type Redis struct {
	// Addr is one Redis at host:port.
	Addr string `yaml:"addr"`
	// URL is redis://[user[:password]@]host:port[/db], or rediss:// for TLS.
	URL string `yaml:"url"`
	// Addrs are Sentinel addresses (with MasterName) or Cluster seeds.
	Addrs []string `yaml:"addrs"`
	// MasterName is the Sentinel master set's name.
	MasterName string `yaml:"master_name"`
	// Cluster makes a single Addr a Cluster seed (e.g. a configuration
	// endpoint).
	Cluster bool `yaml:"cluster"`
	// TLS, when present, dials Redis over TLS.
	TLS *RedisTLS `yaml:"tls"`
	// Username and PasswordFile authenticate (ACL or requirepass).
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	// KeyPrefix starts every key mcpgw writes (default "mcpgw:"), so
	// several fleets can share one Redis.
	KeyPrefix string `yaml:"key_prefix"`
	// DialTimeout and ReadTimeout bound each connect and each command
	// (defaults 2s and 500ms; writes use ReadTimeout too).
	DialTimeout Duration `yaml:"dial_timeout"`
	ReadTimeout Duration `yaml:"read_timeout"`
	// Queue bounds the events waiting to be copied to Redis (default
	// 10000); past it an event is not copied and its stream cannot be
	// resumed on another replica.
	Queue int `yaml:"queue"`
}

// RedisTLS configures TLS to Redis: the system roots unless CAFile.
type RedisTLS struct {
	CAFile     string `yaml:"ca_file"`
	ServerName string `yaml:"server_name"`
}

// Defaults of sessions.redis.
const (
	DefaultRedisKeyPrefix   = "mcpgw:"
	DefaultRedisDialTimeout = 2 * time.Second
	DefaultRedisReadTimeout = 500 * time.Millisecond
	DefaultRedisQueue       = 10000
)

// Policy, PolicyRule, PolicyMatch and the rest of the policy: section are
// in policy.go.

// Duration is a time.Duration written as "30s", "1m30s" in YAML (see
// UnmarshalYAML in decode.go).
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
