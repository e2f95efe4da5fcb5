package config

import (
	"fmt"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Bounds on what clients can make the gateway hold (DESIGN.md invariant 7).
// Each default is far above what a normal deployment uses, so that only a
// runaway or hostile client meets it; docs/configuration.md says why each
// is what it is.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadBodyTimeout: a request body of max_body_bytes (4 MiB)
	// takes well under a second on any real link.
	DefaultReadBodyTimeout = 30 * time.Second

	DefaultMaxSessions             = 10000 // ~5 KB each when idle: ~50 MB
	DefaultMaxSessionsPerPrincipal = 1000
	// DefaultInteractivePool: children a stdio upstream
	// may add for overlapping calls that may be asked (each a process);
	// MaxInteractivePool keeps a config from asking for hundreds.
	DefaultInteractivePool       = 4
	MaxInteractivePool           = 64
	DefaultMaxRequestsPerSession = 128
	DefaultMaxReplayStreams      = 16
	DefaultSSEQueue              = 256 // messages
	DefaultSSEWriteTimeout       = 30 * time.Second
	// DefaultPrimingHold: longer than a small call takes even on a busy
	// replica (p99 25 ms at 32 calls at once on 2 cores), far shorter
	// than a call worth resuming.
	DefaultPrimingHold           = 50 * time.Millisecond
	MaxPrimingHold               = time.Second
	DefaultMaxParkedCalls        = 256
	DefaultMaxParkedPerPrincipal = 32

	// What waits for a client to read it, in bytes (a legacy HTTP+SSE or
	// stdio queue, a call's event queue): 16 MiB holds a few big answers
	// per session; the process-wide bound keeps a crowd of clients that
	// never read to 256 MiB.
	DefaultQueueBytes      int64 = 16 << 20
	DefaultQueueTotalBytes int64 = 256 << 20

	// Resource subscriptions: far more than a client watches, far fewer
	// than fill memory (each holds its URI, up to 8 KiB by default).
	DefaultMaxSubscriptionsPerSession   = 1000
	DefaultMaxSubscriptionsPerPrincipal = 10000
	DefaultMaxListenStreamsPerPrincipal = 100
	DefaultMaxSubscriptionURIBytes      = 8192

	// Requests an upstream sends the gateway, answered at once: on one
	// connection, and during one call.
	DefaultMaxServerRequests        = 64
	DefaultMaxServerRequestsPerCall = 16

	// Stateful upstreams: each session connection may be a child process.
	DefaultMaxStatefulSessions             = 64
	DefaultMaxStatefulSessionsPerPrincipal = 16
)

// limitsDefaults fills in the bounds the file leaves out.
func limitsDefaults(c *Config, d *strictyaml.Decoder) {
	if !d.Set("read_header_timeout") {
		c.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
	}
	if !d.Set("read_body_timeout") {
		c.ReadBodyTimeout = Duration(DefaultReadBodyTimeout)
	}
	if c.Sessions == nil {
		c.Sessions = &Sessions{}
	}
	s := c.Sessions
	for _, b := range []struct {
		key string
		v   *int
		def int
	}{
		{"max_sessions", &s.MaxSessions, DefaultMaxSessions},
		{"max_sessions_per_principal", &s.MaxSessionsPerPrincipal, DefaultMaxSessionsPerPrincipal},
		{"max_requests_per_session", &s.MaxRequestsPerSession, DefaultMaxRequestsPerSession},
		{"max_replay_streams", &s.MaxReplayStreams, DefaultMaxReplayStreams},
		{"sse_queue", &s.SSEQueue, DefaultSSEQueue},
		{"max_parked_calls", &s.MaxParkedCalls, DefaultMaxParkedCalls},
		{"max_parked_calls_per_principal", &s.MaxParkedCallsPerPrincipal, DefaultMaxParkedPerPrincipal},
		{"max_subscriptions_per_session", &s.MaxSubscriptionsPerSession, DefaultMaxSubscriptionsPerSession},
		{"max_subscriptions_per_principal", &s.MaxSubscriptionsPerPrincipal, DefaultMaxSubscriptionsPerPrincipal},
		{"max_listen_streams_per_principal", &s.MaxListenStreamsPerPrincipal, DefaultMaxListenStreamsPerPrincipal},
		{"max_subscription_uri_bytes", &s.MaxSubscriptionURIBytes, DefaultMaxSubscriptionURIBytes},
	} {
		if !d.Set("sessions." + b.key) {
			*b.v = b.def
		}
	}
	// A share the operator did not write follows a total they lowered
	// below its default, rather than refuse the config for a key it never
	// named.
	clampShare(d, "sessions.max_sessions_per_principal", &s.MaxSessionsPerPrincipal, s.MaxSessions)
	clampShare(d, "sessions.max_parked_calls_per_principal", &s.MaxParkedCallsPerPrincipal, s.MaxParkedCalls)
	if !d.Set("sessions.queue_bytes") {
		s.QueueBytes = DefaultQueueBytes
	}
	if !d.Set("sessions.queue_total_bytes") {
		s.QueueTotalBytes = DefaultQueueTotalBytes
	}
	if !d.Set("sessions.sse_write_timeout") {
		s.SSEWriteTimeout = Duration(DefaultSSEWriteTimeout)
	}
	if !d.Set("sessions.priming_hold") {
		s.PrimingHold = Duration(DefaultPrimingHold)
	}
	for name, u := range c.Upstreams {
		if u == nil {
			continue
		}
		p := strictyaml.JoinPath("upstreams", name)
		if !d.Set(strictyaml.JoinPath(p, "max_sessions")) {
			u.MaxSessions = DefaultMaxStatefulSessions
		}
		if !d.Set(strictyaml.JoinPath(p, "max_sessions_per_principal")) {
			u.MaxSessionsPerPrincipal = DefaultMaxStatefulSessionsPerPrincipal
		}
		if !d.Set(strictyaml.JoinPath(p, "max_server_requests")) {
			u.MaxServerRequests = DefaultMaxServerRequests
		}
		if !d.Set(strictyaml.JoinPath(p, "max_server_requests_per_call")) {
			u.MaxServerRequestsPerCall = DefaultMaxServerRequestsPerCall
		}
		if !d.Set(strictyaml.JoinPath(p, "interactive_pool")) {
			u.InteractivePool = DefaultInteractivePool
		}
		clampShare(d, strictyaml.JoinPath(p, "max_sessions_per_principal"), &u.MaxSessionsPerPrincipal, u.MaxSessions)
	}
}

// clampShare lowers a defaulted per-principal share (at path p) to the
// total it is a share of, when the total is below it.
func clampShare(d *strictyaml.Decoder, p string, share *int, total int) {
	if !d.Set(p) && total >= 1 && *share > total {
		*share = total
	}
}

// limits validates the bounds.
func (v *validator) limits() {
	c := v.cfg
	v.positiveDuration("read_header_timeout", c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	v.positiveDuration("read_body_timeout", c.ReadBodyTimeout, DefaultReadBodyTimeout)
	s := c.Sessions
	if s == nil {
		return
	}
	v.atLeastOne("sessions.max_sessions", s.MaxSessions, DefaultMaxSessions)
	v.atLeastOne("sessions.max_sessions_per_principal", s.MaxSessionsPerPrincipal, DefaultMaxSessionsPerPrincipal)
	v.share("sessions.max_sessions_per_principal", s.MaxSessionsPerPrincipal, "sessions.max_sessions", s.MaxSessions)
	v.atLeastOne("sessions.max_requests_per_session", s.MaxRequestsPerSession, DefaultMaxRequestsPerSession)
	v.atLeastOne("sessions.max_replay_streams", s.MaxReplayStreams, DefaultMaxReplayStreams)
	v.atLeastOne("sessions.sse_queue", s.SSEQueue, DefaultSSEQueue)
	v.positiveDuration("sessions.sse_write_timeout", s.SSEWriteTimeout, DefaultSSEWriteTimeout)
	if s.PrimingHold < 0 || s.PrimingHold.D() > MaxPrimingHold {
		v.add("sessions.priming_hold", fmt.Sprintf("must be from 0s (send the priming event at once) to %s; remove it for the default (%s)", MaxPrimingHold, DefaultPrimingHold))
	}
	v.atLeastOne("sessions.max_parked_calls", s.MaxParkedCalls, DefaultMaxParkedCalls)
	v.atLeastOne("sessions.max_parked_calls_per_principal", s.MaxParkedCallsPerPrincipal, DefaultMaxParkedPerPrincipal)
	v.share("sessions.max_parked_calls_per_principal", s.MaxParkedCallsPerPrincipal, "sessions.max_parked_calls", s.MaxParkedCalls)
	if s.QueueBytes < 1 {
		v.add("sessions.queue_bytes", fmt.Sprintf("must be at least 1; remove it for the default (%d, 16 MiB)", DefaultQueueBytes))
	}
	if s.QueueTotalBytes < 1 {
		v.add("sessions.queue_total_bytes", fmt.Sprintf("must be at least 1; remove it for the default (%d, 256 MiB)", DefaultQueueTotalBytes))
	} else if s.QueueBytes > s.QueueTotalBytes {
		v.add("sessions.queue_bytes", fmt.Sprintf("%d is more than sessions.queue_total_bytes (%d), so it would never apply; lower it, or raise sessions.queue_total_bytes", s.QueueBytes, s.QueueTotalBytes))
	}
	v.atLeastOne("sessions.max_subscriptions_per_session", s.MaxSubscriptionsPerSession, DefaultMaxSubscriptionsPerSession)
	v.atLeastOne("sessions.max_subscriptions_per_principal", s.MaxSubscriptionsPerPrincipal, DefaultMaxSubscriptionsPerPrincipal)
	v.atLeastOne("sessions.max_listen_streams_per_principal", s.MaxListenStreamsPerPrincipal, DefaultMaxListenStreamsPerPrincipal)
	v.atLeastOne("sessions.max_subscription_uri_bytes", s.MaxSubscriptionURIBytes, DefaultMaxSubscriptionURIBytes)
}

// serverRequestLimits validates the bounds on requests upstream p sends.
func (v *validator) serverRequestLimits(p string, u *Upstream) {
	v.atLeastOne(strictyaml.JoinPath(p, "max_server_requests"), u.MaxServerRequests, DefaultMaxServerRequests)
	v.atLeastOne(strictyaml.JoinPath(p, "max_server_requests_per_call"), u.MaxServerRequestsPerCall, DefaultMaxServerRequestsPerCall)
	v.share(strictyaml.JoinPath(p, "max_server_requests_per_call"), u.MaxServerRequestsPerCall, strictyaml.JoinPath(p, "max_server_requests"), u.MaxServerRequests)
}

// statefulLimits validates a stateful upstream's bounds at p; the keys
// mean nothing without stateful: true.
func (v *validator) statefulLimits(p string, u *Upstream) {
	if u.InteractivePool < 0 || u.InteractivePool > MaxInteractivePool {
		v.add(strictyaml.JoinPath(p, "interactive_pool"), fmt.Sprintf("must be from 0 (off: overlapping interactive calls are refused) to %d; remove it for the default (%d)", MaxInteractivePool, DefaultInteractivePool))
	}
	if !u.Stateful {
		for _, k := range []string{"max_sessions", "max_sessions_per_principal"} {
			if v.dec.Set(strictyaml.JoinPath(p, k)) {
				v.add(strictyaml.JoinPath(p, k), "applies only to a stateful upstream (one connection per session); set stateful: true, or remove it")
			}
		}
		return
	}
	v.atLeastOne(strictyaml.JoinPath(p, "max_sessions"), u.MaxSessions, DefaultMaxStatefulSessions)
	v.atLeastOne(strictyaml.JoinPath(p, "max_sessions_per_principal"), u.MaxSessionsPerPrincipal, DefaultMaxStatefulSessionsPerPrincipal)
	v.share(strictyaml.JoinPath(p, "max_sessions_per_principal"), u.MaxSessionsPerPrincipal, strictyaml.JoinPath(p, "max_sessions"), u.MaxSessions)
}

func (v *validator) atLeastOne(p string, n, def int) {
	if n < 1 {
		v.add(p, fmt.Sprintf("must be at least 1; remove it for the default (%d)", def))
	}
}

func (v *validator) positiveDuration(p string, d Duration, def time.Duration) {
	if d <= 0 {
		v.add(p, fmt.Sprintf("must be more than 0; remove it for the default (%s)", def))
	}
}

// share checks that a per-principal share p is no larger than the bound
// it is a share of.
func (v *validator) share(p string, n int, of string, max int) {
	if n > max && max >= 1 {
		v.add(p, fmt.Sprintf("%d is more than %s (%d), so it would never apply; lower it, or raise %s", n, of, max, of))
	}
}
