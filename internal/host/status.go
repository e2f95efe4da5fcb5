package host

import "time"

// Status is what the admin status page shows of one upstream.
type Status struct {
	Name     string
	State    State
	Required bool
	// Transport is stdio, streamable or sse.
	Transport string
	// Protocol is the revision the current connection negotiated ("" while
	// not connected).
	Protocol string
	// Restarts counts reconnection attempts since the gateway started.
	Restarts int64
	// RetryAt is the next attempt while the crash-loop breaker is open.
	RetryAt time.Time
	// LastError is why the upstream is not ready (nil when it is).
	LastError error
	// PID is the stdio child's process id while connected.
	PID      int
	InFlight int64
	Stateful bool
	// SessionConnections are a stateful upstream's per-session connections.
	SessionConnections int
	// Sandbox describes the sandbox the last child started in ("" when
	// unconfined); SandboxKills counts children a sandbox limit killed.
	Sandbox      string
	SandboxKills int64
}

// Status reports the upstream's state for operators.
func (u *Upstream) Status() Status {
	u.mu.Lock()
	st := Status{
		Name: u.name, State: u.state, Required: u.cfg.Required, Transport: u.cfg.Transport,
		Restarts: u.restarts.Load(), LastError: u.lastErr, PID: u.pid, InFlight: u.inflight.Load(), Stateful: u.cfg.Stateful,
	}
	if u.client != nil {
		st.Protocol = u.client.ProtocolVersion()
	}
	if u.state == StateBreakerOpen {
		st.RetryAt = u.retryAt
	}
	u.mu.Unlock()
	st.Sandbox, st.SandboxKills = u.sandboxStatus() // sandbox.go
	if st.Stateful {
		st.SessionConnections = u.SessionConnections()
	}
	return st
}
