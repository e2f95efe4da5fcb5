package core_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// With debug logging, secrets from upstream headers, stdio env, upstream
// OAuth client secrets and API keys never reach the log, even when a child
// prints its token on stderr or an upstream echoes credentials back.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"HEADER_TOKEN":  "hdr-secret-4f9a2c7e1b",
		"HEADER_KEY":    "hdr-key-secret-7a1c3e5b",
		"ENV_TOKEN":     "env-secret-8d3b6a1f0c",
		"CLIENT_SECRET": "oauth-secret-2e7c9b4d5a",
		"API_KEY":       "api-key-secret-6c1e8f3a9b",
	}
	echo := gatewaytest.EchoHeaders(t)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
    headers: {Authorization: "Bearer ${HEADER_TOKEN}"}
  rejecting:
    url: %s/mcp
    headers: {X-Api-Key: "${HEADER_KEY}"}
    startup_timeout: 2s
  viaoauth:
    url: %s/mcp
    startup_timeout: 2s
    oauth:
      token_url: %s/token
      client_id: mcpgw
      client_secret: ${CLIENT_SECRET}
  beta:
    command: [sh, -c, 'echo "starting with token $$SECRET_FOR_CHILD" >&2; echo "SECRET_FOR_CHILD=$$SECRET_FOR_CHILD" >&2; exec "$$0"', %q]
    env: {MCPGW_TEST_STDIO_SERVER: beta, SECRET_FOR_CHILD: "${ENV_TOKEN}"}
auth:
  api_keys:
    - {name: ci, key: "${API_KEY}"}
policy:
  default: allow
`, gatewaytest.HTTPUpstream(t, "alpha", 10), echo, echo, echo, gatewaytest.StdioUpstream(t))
	cfg, err := config.Parse("redaction.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := secrets[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}

	var logs gatewaytest.SyncBuffer // auth_test.go
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&logs), zapcore.DebugLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: log, Listener: ln})

	base := "http://" + ln.Addr().String() + "/mcp"
	post := func(sid, body string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+secrets["API_KEY"])
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	for i, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"beta__echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rejecting__echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"logging/setLevel","params":{"level":"debug"}}`,
	} {
		resp := post(sid, body, map[string]string{"X-Request-Id": fmt.Sprintf("redaction-%d", i)})
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Refused requests: a wrong API key, and a bad Origin (logged with the
	// request id).
	resp = post(sid, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, map[string]string{"Authorization": "Bearer wrong-" + secrets["API_KEY"]})
	resp.Body.Close()
	resp = post(sid, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, map[string]string{"Origin": "https://evil.example", "X-Request-Id": "redaction-origin"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Request-Id") != "redaction-origin" {
		t.Errorf("bad Origin: %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}

	// Wait for the lines that would carry secrets if redaction failed: the
	// child's stderr and the rejected connection attempts.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := logs.String()
		if strings.Contains(out, "starting with token") && strings.Contains(out, "SECRET_FOR_CHILD=") &&
			strings.Contains(out, `"upstream":"rejecting"`) && strings.Contains(out, `"upstream":"viaoauth"`) &&
			strings.Contains(out, "rejected: headers") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected log lines did not appear:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}

	out := logs.String()
	for name, v := range secrets {
		if strings.Contains(out, v) {
			t.Errorf("secret %s appears in the log", name)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", out)
	}
	for _, want := range []string{config.Redacted, `"request_id":"redaction-origin"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}
