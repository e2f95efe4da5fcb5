package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// A hostile stdio child and an HTTP upstream that echoes credentials in its
// 401: what either says reaches no caller's error, neither the one whose
// call crashed the child nor another principal's; each error names the
// upstream and the caller's request id, under which the log has the detail
// (config secrets redacted). The child sees none of the gateway's
// environment beyond the minimal set and its own env:.
func TestHostileUpstreamTextStaysInLog(t *testing.T) {
	// The gateway's own environment: a credential meant for others.
	const gatewayOnly = "gw-only-secret-3b8e0d"
	t.Setenv("MCPGW_TEST_GATEWAY_SECRET", gatewayOnly)
	secrets := map[string]string{"ENV_TOKEN": "env-secret-9c2a7f", "HEADER_KEY": "hdr-key-secret-1d6b4e"}
	marker := t.TempDir() + "/crashed"
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  hostile:
    command: [%q]
    protocol: legacy
    env: {MCPGW_TEST_HOSTILE_STDIO: %q, SECRET_FOR_CHILD: "${ENV_TOKEN}"}
  rejecting:
    url: %s/mcp
    headers: {X-Api-Key: "${HEADER_KEY}"}
    startup_timeout: 2s
auth:
  api_keys:
    - {name: alice, key: alice-key-0123456789, principal: alice}
    - {name: bob, key: bob-key-0123456789, principal: bob}
policy:
  default: allow
`, gatewaytest.StdioUpstream(t), marker, gatewaytest.EchoHeaders(t))
	cfg, err := config.Parse("hostile.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := secrets[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var logs gatewaytest.SyncBuffer // auth_test.go
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: log, Listener: ln})
	base := "http://" + ln.Addr().String() + "/mcp"

	post := func(key, sid, reqID, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Request-Id", reqID)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	session := func(key string) string {
		resp, _ := post(key, "", "init-"+key, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
		}
		post(key, sid, "initd-"+key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return sid
	}
	alice, bob := session("alice-key-0123456789"), session("bob-key-0123456789")

	// What no caller may see: the child's and the HTTP upstream's words.
	leaked := []string{secrets["ENV_TOKEN"], secrets["HEADER_KEY"], gatewayOnly, "alice-private", "ENV ", "token is", "stderr", "rejected: headers", "401"}
	check := func(who, reqID, body string) {
		t.Helper()
		for _, s := range leaked {
			if strings.Contains(body, s) {
				t.Errorf("%s's error quotes %q: %s", who, s, body)
			}
		}
		if !strings.Contains(body, "request id "+reqID) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s's answer is not an error naming request id %s: %s", who, reqID, body)
		}
	}
	_, body := post("alice-key-0123456789", alice, "alice-crash", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hostile__leak","arguments":{}}}`)
	check("alice", "alice-crash", body)
	if !strings.Contains(body, `upstream \"hostile\"`) {
		t.Errorf("alice's error does not name the upstream: %s", body)
	}
	// The upstream is down now, its children dying with those last words.
	_, body = post("bob-key-0123456789", bob, "bob-after", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hostile__leak","arguments":{}}}`)
	check("bob", "bob-after", body)
	_, body = post("bob-key-0123456789", bob, "bob-http", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rejecting__echo","arguments":{}}}`)
	check("bob", "bob-http", body)

	// The log has each failure under its request id, with the detail.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := logs.String()
		if strings.Contains(out, `"request_id":"alice-crash"`) && strings.Contains(out, `"request_id":"bob-after"`) && strings.Contains(out, `"request_id":"bob-http"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failures were not logged with their request ids:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
	out := logs.String()
	logged := func(reqID string, want ...string) {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, `"request_id":"`+reqID+`"`) && !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(l, w) }) {
				return
			}
		}
		t.Errorf("no log line for %s with %q:\n%s", reqID, want, out)
	}
	logged("alice-crash", "last stderr", "alice-private-7f3e9c", "token is "+config.Redacted)
	logged("bob-after", "last stderr", "alice-private-7f3e9c")
	logged("bob-http", "rejected: headers", config.Redacted)
	for name, v := range secrets {
		if strings.Contains(out, v) {
			t.Errorf("secret %s appears in the log", name)
		}
	}
	// The child's environment, as it printed it: minimal, plus its env:.
	if !strings.Contains(out, "ENV PATH=") || !strings.Contains(out, "ENV MCPGW_TEST_HOSTILE_STDIO=") {
		t.Errorf("the child's environment was not logged:\n%s", out)
	}
	if strings.Contains(out, gatewayOnly) || strings.Contains(out, "MCPGW_TEST_GATEWAY_SECRET") {
		t.Errorf("the child got the gateway's MCPGW_TEST_GATEWAY_SECRET")
	}
}
