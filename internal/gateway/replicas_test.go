package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionServedByAnotherReplica: with a shared sessions.key_file, a
// legacy session created on one replica is served by another (the id is an
// AEAD token carrying what the session needs), still bound to its
// principal; a tampered id, another route or another principal is 404.
func TestSessionServedByAnotherReplica(t *testing.T) {
	alpha := httpUpstream(t, "alpha", 0)
	keys := filepath.Join(t.TempDir(), "session-keys")
	// Two keys: the first seals, either opens (rotation).
	if err := os.WriteFile(keys, []byte("# newest first\nq5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
routes:
  - path: /mcp
  - path: /other
auth:
  api_keys:
    - {name: a, key: key-a-0123456789abcdef, principal: alice}
    - {name: b, key: key-b-0123456789abcdef, principal: bob}
policy: {default: allow}
sessions: {key_file: %q}
`, alpha, keys)
	_, replicaA := startGateway(t, cfg)
	_, replicaB := startGateway(t, cfg)

	alice := http.Header{"X-Api-Key": {"key-a-0123456789abcdef"}}
	onA := &rawClient{t: t, url: replicaA + "/mcp", header: alice}
	onA.initialize("2025-11-25")
	if !strings.HasPrefix(onA.session, "s1.") {
		t.Fatalf("session id %q is not a sealed token", onA.session)
	}

	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"from B"}}}`
	onB := &rawClient{t: t, url: replicaB + "/mcp", header: alice, session: onA.session}
	if m := onB.post(call).last(t); m.Error != nil || !strings.Contains(string(m.Result), "alpha:from B") {
		t.Fatalf("replica B serving A's session: %s %v", m.Result, m.Error)
	}

	for name, c := range map[string]*rawClient{
		"another principal": {t: t, url: replicaB + "/mcp", header: http.Header{"X-Api-Key": {"key-b-0123456789abcdef"}}, session: onA.session},
		"another route":     {t: t, url: replicaB + "/other", header: alice, session: onA.session},
		"tampered id":       {t: t, url: replicaB + "/mcp", header: alice, session: onA.session[:len(onA.session)-3] + "AAA"},
	} {
		if r := c.post(call); r.status != http.StatusNotFound {
			t.Errorf("%s: HTTP %d %s", name, r.status, r.body)
		}
	}

	// Ended on B, it stays ended on B.
	if r := onB.do(http.MethodDelete, "", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE on B: HTTP %d", r.status)
	}
	if r := onB.post(call); r.status != http.StatusNotFound {
		t.Errorf("after DELETE on B: HTTP %d", r.status)
	}
}
