package metrics

// Sandbox events (mcpgw_upstream_sandbox_events_total's event label).
const (
	SandboxStarted = "started"
	SandboxRefused = "refused"
)

// SandboxKilled is the event of a child stopped by the named limit.
func SandboxKilled(limit string) string { return "killed_" + limit }

// SandboxEvent counts one event of the upstream's sandboxed children.
func (u *Upstream) SandboxEvent(event string) {
	if u != nil {
		u.m.sandbox.WithLabelValues(u.name, event).Inc()
	}
}
