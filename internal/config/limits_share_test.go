package config_test

import "testing"

// A per-principal share the operator never wrote follows a total they
// lowered below the share's default: `max_sessions: 3` alone is a valid
// config, not a refusal naming a key it does not contain. A share they
// did write is still checked against the total (bounds.bad.yaml).
func TestDefaultedShareFollowsItsTotal(t *testing.T) {
	c := mustParse(t, `
upstreams:
  fs: {command: [x], stateful: true, max_sessions: 3}
sessions: {max_sessions: 2, max_parked_calls: 1}
`, nil)
	if got := c.Upstreams["fs"].MaxSessionsPerPrincipal; got != 3 {
		t.Errorf("upstreams.fs.max_sessions_per_principal = %d, want 3 (its max_sessions)", got)
	}
	if got := c.Sessions.MaxSessionsPerPrincipal; got != 2 {
		t.Errorf("sessions.max_sessions_per_principal = %d, want 2", got)
	}
	if got := c.Sessions.MaxParkedCallsPerPrincipal; got != 1 {
		t.Errorf("sessions.max_parked_calls_per_principal = %d, want 1", got)
	}
}
