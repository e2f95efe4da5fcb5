package core

import (
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
)

// Limits are the bounds of one config generation on what downstream
// clients can make the gateway hold (config sessions: and the read
// timeouts; DESIGN.md invariant 7). Each refuses with a limits.Refusal
// that names its key, and is counted in mcpgw_limit_refusals_total.
type Limits struct {
	MaxSessions             int // sessions.max_sessions
	MaxSessionsPerPrincipal int // sessions.max_sessions_per_principal
	MaxRequestsPerSession   int // sessions.max_requests_per_session (serial transports)
	MaxReplayStreams        int // sessions.max_replay_streams
	SSEQueue                int // sessions.sse_queue
	SSEWriteTimeout         time.Duration
	PrimingHold             time.Duration // sessions.priming_hold (0: no hold)
	MaxParked               int           // sessions.max_parked_calls
	MaxParkedPerPrincipal   int           // sessions.max_parked_calls_per_principal
	ReadBodyTimeout         time.Duration

	QueueBytes      int64 // sessions.queue_bytes (queuebytes.go)
	QueueTotalBytes int64 // sessions.queue_total_bytes

	MaxSubscriptionsPerSession   int // sessions.max_subscriptions_per_session
	MaxSubscriptionsPerPrincipal int // sessions.max_subscriptions_per_principal
	MaxListenStreamsPerPrincipal int // sessions.max_listen_streams_per_principal
	MaxSubscriptionURIBytes      int // sessions.max_subscription_uri_bytes
}

// LimitsOf reads the bounds of cfg; a bound cfg leaves at zero (a config
// not made by config.Parse, in tests) gets its default.
func LimitsOf(cfg *config.Config) Limits {
	s := config.Sessions{PrimingHold: config.Duration(config.DefaultPrimingHold)}
	if cfg.Sessions != nil {
		s = *cfg.Sessions // made by config.Parse: an unset hold has its default, a 0 is meant
	}
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	ord := func(v config.Duration, def time.Duration) time.Duration {
		if v > 0 {
			return v.D()
		}
		return def
	}
	or64 := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return Limits{
		MaxSessions:             or(s.MaxSessions, config.DefaultMaxSessions),
		MaxSessionsPerPrincipal: or(s.MaxSessionsPerPrincipal, config.DefaultMaxSessionsPerPrincipal),
		MaxRequestsPerSession:   or(s.MaxRequestsPerSession, config.DefaultMaxRequestsPerSession),
		MaxReplayStreams:        or(s.MaxReplayStreams, config.DefaultMaxReplayStreams),
		SSEQueue:                or(s.SSEQueue, config.DefaultSSEQueue),
		SSEWriteTimeout:         ord(s.SSEWriteTimeout, config.DefaultSSEWriteTimeout),
		PrimingHold:             s.PrimingHold.D(),
		MaxParked:               or(s.MaxParkedCalls, config.DefaultMaxParkedCalls),
		MaxParkedPerPrincipal:   or(s.MaxParkedCallsPerPrincipal, config.DefaultMaxParkedPerPrincipal),
		ReadBodyTimeout:         ord(cfg.ReadBodyTimeout, config.DefaultReadBodyTimeout),
		QueueBytes:              or64(s.QueueBytes, config.DefaultQueueBytes),
		QueueTotalBytes:         or64(s.QueueTotalBytes, config.DefaultQueueTotalBytes),

		MaxSubscriptionsPerSession:   or(s.MaxSubscriptionsPerSession, config.DefaultMaxSubscriptionsPerSession),
		MaxSubscriptionsPerPrincipal: or(s.MaxSubscriptionsPerPrincipal, config.DefaultMaxSubscriptionsPerPrincipal),
		MaxListenStreamsPerPrincipal: or(s.MaxListenStreamsPerPrincipal, config.DefaultMaxListenStreamsPerPrincipal),
		MaxSubscriptionURIBytes:      or(s.MaxSubscriptionURIBytes, config.DefaultMaxSubscriptionURIBytes),
	}
}
