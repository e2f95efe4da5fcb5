package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Defaults applied by Parse to keys that are absent (or empty: "key:").
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultMaxBodyBytes   = 4 << 20 // 4 MiB
	DefaultTimeout        = 60 * time.Second
	DefaultStartupTimeout = 30 * time.Second
	// DefaultStartupListWait is short: a client's first tools/list should
	// not wait for a hung upstream, only for one a moment from ready.
	DefaultStartupListWait = 2 * time.Second
	DefaultMaxLineBytes    = 8 << 20 // 8 MiB
	DefaultRoutePath       = "/mcp"
	DefaultPolicy          = PolicyAllow
	DefaultLeeway          = 30 * time.Second
	DefaultGroupsClaim     = "groups"
	// DefaultPageSize lets a catalog of several thousand tools fit one
	// list page, so that a client that lists once sees all of it.
	DefaultPageSize = 10000
	// MaxPageSize bounds page_size: one page is built in memory.
	MaxPageSize = 100000

	// Replay logs of session streams (sessions.replay).
	DefaultReplaySessionEvents       = 512
	DefaultReplaySessionBytes  int64 = 4 << 20   // 4 MiB
	DefaultReplayTotalBytes    int64 = 256 << 20 // 256 MiB
)

// DefaultAlgorithms is the token signature allowlist when an issuer lists
// none: every asymmetric JWS algorithm. Symmetric (HS*) algorithms and
// "none" are never accepted: the gateway holds no shared secret with an
// issuer, and an HS256 token "signed" with a public key is a classic forgery.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Policy modes for Policy.Default.
const (
	PolicyAllow = "allow"
	PolicyDeny  = "deny"
)

// Transports for Upstream.Transport.
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
	TransportStdio      = "stdio"
)

// applyDefaults fills in what the file leaves out. A key the file sets, even
// to zero or "", is left for validation to judge: an explicit "timeout: 0s"
// is a mistake to report, not a request for the default.
func issuerDefaults(p string, o *OIDC, d *strictyaml.Decoder) {
	if o == nil {
		return
	}
	if !d.Set(p + ".leeway") {
		o.Leeway = Duration(DefaultLeeway)
	}
	if !d.Set(p + ".groups_claim") {
		o.GroupsClaim = DefaultGroupsClaim
	}
	if !d.Set(p + ".algorithms") {
		o.Algorithms = slices.Clone(DefaultAlgorithms)
	}
}

func applyDefaults(c *Config, d *strictyaml.Decoder) {
	if !d.Set("listen") {
		c.Listen = DefaultListen
	}
	if !d.Set("separator") {
		c.Separator = DefaultSeparator
	}
	if !d.Set("max_body_bytes") {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if !d.Set("page_size") {
		c.PageSize = DefaultPageSize
	}
	for name, u := range c.Upstreams {
		if u == nil {
			continue
		}
		p := strictyaml.JoinPath("upstreams", name)
		if !d.Set(strictyaml.JoinPath(p, "timeout")) {
			u.Timeout = Duration(DefaultTimeout)
		}
		if !d.Set(strictyaml.JoinPath(p, "startup_timeout")) {
			u.StartupTimeout = Duration(DefaultStartupTimeout)
		}
		if !d.Set(strictyaml.JoinPath(p, "max_line_bytes")) {
			u.MaxLineBytes = DefaultMaxLineBytes
		}
		if !d.Set(strictyaml.JoinPath(p, "startup_list_wait")) {
			w := DefaultStartupListWait
			if st := u.StartupTimeout.D(); st > 0 && st < w {
				w = st // never longer than the attempt it waits for
			}
			u.StartupListWait = Duration(w)
		}
		stderrDefaults(p, u, d)        // stderr.go
		sandboxDefaults(p, u, d)       // sandbox.go
		upstreamOAuthDefaults(p, u, d) // upstream_oauth.go
		tokenExchangeDefaults(p, u, d) // upstream_exchange.go
		perUserDefaults(p, c, u, d)    // upstream_peruser.go
		if !d.Set(strictyaml.JoinPath(p, "transport")) {
			// Only when the kind is unambiguous; validation reports the rest.
			hasURL, hasCmd := u.kind(p, d)
			switch {
			case hasURL && !hasCmd:
				u.Transport = TransportStreamable
			case hasCmd && !hasURL:
				u.Transport = TransportStdio
			}
		}
	}
	if len(c.Routes) == 0 {
		// One endpoint serving every upstream, names prefixed.
		c.Routes = []*Route{{Path: DefaultRoutePath}}
	}
	limitsDefaults(c, d) // limits.go
	if c.Sessions != nil && c.Sessions.Replay != nil {
		r := c.Sessions.Replay
		if !d.Set("sessions.replay.session_events") {
			r.SessionEvents = DefaultReplaySessionEvents
		}
		if !d.Set("sessions.replay.session_bytes") {
			r.SessionBytes = DefaultReplaySessionBytes
		}
		if !d.Set("sessions.replay.total_bytes") {
			r.TotalBytes = DefaultReplayTotalBytes
		}
	}
	for i, r := range c.Routes {
		if r != nil && !d.Set(fmt.Sprintf("routes[%d].page_size", i)) {
			r.PageSize = c.PageSize
		}
	}
	loginDefaults(c, d)         // login.go: before anything asking whether auth is on
	policyDefaults(c, d)        // policy.go
	auditDefaults(c, d)         // audit.go
	tracingDefaults(c, d)       // tracing.go
	introspectionDefaults(c, d) // introspection.go
	dpopDefaults(c, d)          // dpop.go
	interceptorDefaults(c, d)   // interceptors.go
	if c.Auth != nil {
		issuerDefaults("auth.oidc", c.Auth.OIDC, d)
		for i, o := range c.Auth.Issuers {
			issuerDefaults(fmt.Sprintf("auth.issuers[%d]", i), o, d)
		}
	}
}

// kind reports whether the upstream at path p has a url and a command. A key
// that is present counts even if its value was empty or failed to decode, so
// that one mistake is not reported again as "neither url nor command".
func (u *Upstream) kind(p string, d *strictyaml.Decoder) (hasURL, hasCmd bool) {
	return u.URL != "" || d.Set(strictyaml.JoinPath(p, "url")), len(u.Command) > 0 || d.Set(strictyaml.JoinPath(p, "command"))
}
