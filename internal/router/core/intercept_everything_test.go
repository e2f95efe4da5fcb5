package core_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Through the real npm server-everything: its echo result carrying a
// secret reaches the client with the secret replaced and every other
// byte as the same call answers on a route without the interceptor
// (golden); a deny_match argument is refused; a list interceptor hides a
// definition and a call of it is refused as of a name not listed.
func TestInterceptorsServerEverything(t *testing.T) {
	cmd := gatewaytest.ServerEverything(t)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  ev:
    command: [%q, %q, %q]
routes:
  - path: /mcp
    upstreams: [ev]
  - path: /raw
    upstreams: [ev]
interceptors:
  - name: secrets
    type: redact
    phase: result
    match: {routes: [/mcp]}
    detectors: [aws_access_key, email]
  - name: no-drop
    type: deny_match
    phase: request
    match: {routes: [/mcp]}
    patterns: ["DROP TABLE"]
    case_insensitive: true
  - name: hide-sum
    type: deny_match
    phase: list
    match: {routes: [/mcp]}
    patterns: ["(?i)sum"]
`, cmd[0], cmd[1], cmd[2]))
	guarded := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	guarded.Initialize("2025-11-25")
	raw := &gatewaytest.RawClient{T: t, URL: base + "/raw"}
	raw.Initialize("2025-11-25")
	echo := func(c *gatewaytest.RawClient, msg string) *jsonrpc.Message {
		return c.Post(gatewaytest.MustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call",
			"params": map[string]any{"name": "ev__echo", "arguments": map[string]string{"message": msg}}})).Last(t)
	}
	const msg = "key AKIAABCDEFGHIJKLMNOP owner alice@example.com"
	plain := echo(raw, msg)
	if plain.Error != nil || !bytes.Contains(plain.Result, []byte("AKIAABCDEFGHIJKLMNOP")) {
		t.Fatalf("raw route: %s %v", plain.Result, plain.Error)
	}
	want := bytes.ReplaceAll(bytes.ReplaceAll(plain.Result, []byte("AKIAABCDEFGHIJKLMNOP"), []byte("[redacted]")), []byte("alice@example.com"), []byte("[redacted]"))
	if got := echo(guarded, msg); got.Error != nil || !bytes.Equal(got.Result, want) {
		t.Fatalf("redacted result\n got %s %v\nwant %s", got.Result, got.Error, want)
	}
	if got := echo(guarded, "'; drop table users; --"); got.Error == nil || !strings.Contains(got.Error.Message, "no-drop") {
		t.Fatalf("deny_match: %s %v", got.Result, got.Error)
	}
	list := guarded.Post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`).Last(t)
	if list.Error != nil || strings.Contains(string(list.Result), "ev__get-sum") || !strings.Contains(string(list.Result), "ev__echo") {
		t.Fatalf("list: %v %.300s", list.Error, list.Result)
	}
	sum := guarded.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ev__get-sum","arguments":{"a":1,"b":2}}}`).Last(t)
	if sum.Error == nil {
		t.Fatalf("the hidden tool was called: %s", sum.Result)
	}
	if ok := raw.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ev__get-sum","arguments":{"a":1,"b":2}}}`).Last(t); ok.Error != nil {
		t.Fatalf("the raw route refused get-sum: %v", ok.Error)
	}
}
