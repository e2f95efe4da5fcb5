package metrics

// Sandbox events (mcpgw_upstream_sandbox_events_total's event label).
const (
	SandboxStarted = "started"
	SandboxRefused = "refused"
	// SandboxDeniedReported is a stderr line of a sandboxed child that
	// reports a permission error (EACCES, EPERM): the kernel's refusals
	// are not seen by the gateway, only what the child says of them.
	SandboxDeniedReported = "denied_reported"
)

// SandboxKilled is the event of a child stopped by the named limit.
func SandboxKilled(limit string) string { return "killed_" + limit }

// SandboxEvent counts one event of the upstream's sandboxed children.
func (u *Upstream) SandboxEvent(event string) {
	if u != nil {
		u.m.sandbox.WithLabelValues(u.name, event).Inc()
	}
}

// SandboxEgress counts one egress proxy connection by its result.
func (u *Upstream) SandboxEgress(result string) {
	if u != nil {
		u.m.egressConns.WithLabelValues(u.name, result).Inc()
	}
}

// SandboxEgressBytes counts bytes the egress proxy relayed.
func (u *Upstream) SandboxEgressBytes(sent, received int64) {
	if u == nil {
		return
	}
	if sent > 0 {
		u.m.egressBytes.WithLabelValues(u.name, "sent").Add(float64(sent))
	}
	if received > 0 {
		u.m.egressBytes.WithLabelValues(u.name, "received").Add(float64(received))
	}
}

// SandboxEgressOpen moves the open egress tunnels gauge by delta.
func (u *Upstream) SandboxEgressOpen(delta int) {
	if u != nil {
		u.m.egressTunnels.WithLabelValues(u.name).Add(float64(delta))
	}
}
