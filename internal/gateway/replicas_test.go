package gateway_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// TestSessionServedByAnotherReplica: with a shared sessions.key_file, a
// legacy session created on one replica is served by another (the id is an
// AEAD token carrying what the session needs), still bound to its
// principal; a tampered id, another route or another principal is 404.
func TestSessionServedByAnotherReplica(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
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
	_, replicaA := gatewaytest.StartGateway(t, cfg)
	_, replicaB := gatewaytest.StartGateway(t, cfg)

	alice := http.Header{"X-Api-Key": {"key-a-0123456789abcdef"}}
	onA := &gatewaytest.RawClient{T: t, URL: replicaA + "/mcp", Header: alice}
	onA.Initialize("2025-11-25")
	if !strings.HasPrefix(onA.Session, "s1.") {
		t.Fatalf("session id %q is not a sealed token", onA.Session)
	}

	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"from B"}}}`
	onB := &gatewaytest.RawClient{T: t, URL: replicaB + "/mcp", Header: alice, Session: onA.Session}
	if m := onB.Post(call).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "alpha:from B") {
		t.Fatalf("replica B serving A's session: %s %v", m.Result, m.Error)
	}

	for name, c := range map[string]*gatewaytest.RawClient{
		"another principal": {T: t, URL: replicaB + "/mcp", Header: http.Header{"X-Api-Key": {"key-b-0123456789abcdef"}}, Session: onA.Session},
		"another route":     {T: t, URL: replicaB + "/other", Header: alice, Session: onA.Session},
		"tampered id":       {T: t, URL: replicaB + "/mcp", Header: alice, Session: onA.Session[:len(onA.Session)-3] + "AAA"},
	} {
		if r := c.Post(call); r.Status != http.StatusNotFound {
			t.Errorf("%s: HTTP %d %s", name, r.Status, r.Body)
		}
	}

	// Ended on B, it stays ended on B.
	if r := onB.Do(http.MethodDelete, "", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE on B: HTTP %d", r.Status)
	}
	if r := onB.Post(call); r.Status != http.StatusNotFound {
		t.Errorf("after DELETE on B: HTTP %d", r.Status)
	}
}

// TestBridgedRetryForwardedToItsReplica: a 2026-07-28 client's retry of a
// bridged call may reach another replica than the one holding the parked
// upstream call. With the shared key and advertise_url, that replica
// forwards it once to the holder, and the call completes; the retry stays
// bound to its principal, and a request already forwarded is not passed on.
func TestBridgedRetryForwardedToItsReplica(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.MatrixServer(false) // legacy: sampling bridged to input_required
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	keys := filepath.Join(t.TempDir(), "session-keys")
	if err := os.WriteFile(keys, []byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		cfg, err := config.Parse("replica.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  up: {url: %s}
auth:
  api_keys:
    - {name: a, key: key-a-0123456789abcdef, principal: alice}
    - {name: b, key: key-b-0123456789abcdef, principal: bob}
policy: {default: allow}
sessions: {key_file: %q, advertise_url: %q}
`, ts.URL, keys, base)), nil)
		if err != nil {
			t.Fatal(err)
		}
		gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
		return base
	}
	a, b := replica(), replica()

	post := func(base, key, extra string, more http.Header) *gatewaytest.RawResponse {
		h := http.Header{"X-Api-Key": {key}, "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__ask"}}
		for k, v := range more {
			h[k] = v
		}
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: h}
		return c.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__ask","arguments":{"kind":"sampling"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}` + extra + `}}`)
	}
	const alice, bob = "key-a-0123456789abcdef", "key-b-0123456789abcdef"
	first := post(a, alice, "", nil).Last(t)
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round on A: %s %v", first.Result, first.Error)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	retry := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}},"requestState":"` + ir.RequestState + `"`

	// Refused without forwarding: another principal, or a request that
	// says it was forwarded already.
	if r := post(b, bob, retry, nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "another principal") {
		t.Errorf("bob's retry of alice's call on B: HTTP %d %s", r.Status, r.Body)
	}
	if r := post(b, alice, retry, http.Header{"Mcp-Gateway-Forwarded": {"1"}}); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "already forwarded") {
		t.Errorf("a retry marked forwarded on B: HTTP %d %s", r.Status, r.Body)
	}

	// The genuine retry on B completes the call parked on A.
	if m := post(b, alice, retry, nil).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "sampled four") || string(m.ID) != "9" {
		t.Fatalf("alice's retry on B: %s %v", m.Result, m.Error)
	}
	// Once: the call has ended on A, which says so through B.
	if r := post(b, alice, retry, nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "ended") {
		t.Errorf("a replayed retry on B: HTTP %d %s", r.Status, r.Body)
	}
}

// TestKeyRotationReachesRequestStates: a reload that rotates the session
// key ring rekeys everything sealed with it, not only session ids. A
// replica started after the old key was dropped (ring: the new key only)
// must accept a requestState that a replica which rotated by reload mints,
// and forward the retry to it.
func TestKeyRotationReachesRequestStates(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.MatrixServer(false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	const oldKey, newKey = "q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	dir := t.TempDir()
	replica := func(keys string) (string, func() *config.Config, *gateway.Gateway) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		load := func() *config.Config {
			cfg, err := config.Parse("replica.yaml", []byte(fmt.Sprintf(`
listen: %s
upstreams:
  up: {url: %s}
auth:
  api_keys:
    - {name: a, key: key-a-0123456789abcdef, principal: alice}
policy: {default: allow}
sessions: {key_file: %q, advertise_url: %q}
`, ln.Addr(), ts.URL, keys, base)), nil)
			if err != nil {
				t.Fatal(err)
			}
			return cfg
		}
		return base, load, gatewaytest.RunGateway(t, load(), gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	}
	write := func(path string, keys ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	aKeys, bKeys := filepath.Join(dir, "a-keys"), filepath.Join(dir, "b-keys")
	write(aKeys, oldKey)
	write(bKeys, newKey)
	a, loadA, gwA := replica(aKeys)
	b, _, _ := replica(bKeys)
	write(aKeys, newKey, oldKey) // the rotation: new key first
	if err := gwA.Reload(loadA()); err != nil {
		t.Fatal(err)
	}

	post := func(base, extra string) *gatewaytest.RawResponse {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {"key-a-0123456789abcdef"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__ask"}}}
		return c.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up__ask","arguments":{"kind":"sampling"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}` + extra + `}}`)
	}
	first := post(a, "").Last(t)
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round on A: %s %v", first.Result, first.Error)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	retry := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}},"requestState":"` + ir.RequestState + `"`
	if m := post(b, retry).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "sampled four") {
		t.Fatalf("the retry on B (new key only) of a call A parked after rotating: %s %v", m.Result, m.Error)
	}
}
