package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/router"
)

// auditUpstream is an upstream with a tool for each outcome the audit log
// tells apart, and a prompt.
func auditUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "audited", Version: "1"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	for _, name := range []string{"login", "secret", "limited"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, ok)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it broke"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(5 * time.Second): // the behaviour under test: a tool slower than the call's timeout
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi " + req.Params.Arguments["who"]}}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// TestAuditLog: every tool call, prompt get and refusal leaves one record
// on the audit sink, asserted field by field: allowed, denied by policy,
// tool error, rate limited, timed out, and arguments hashed and redacted.
func TestAuditLog(t *testing.T) {
	// Not parallel: a 500 ms upstream timeout is part of what it checks, even on a loaded machine.
	up := auditUpstream(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	gw, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  au: {url: %s, timeout: 500ms}
auth:
  api_keys:
    - {name: eng-key, key: eng-secret-0123456789, principal: alice, groups: [eng, ops]}
policy:
  default: deny
  rules:
    - match: {groups: [eng]}
      allow: ["au__*", "prompt:au__*"]
      deny: ["au__secret"]
  rate_limits:
    tools:
      - {tool: "au__limited", rate: 1/h, burst: 1}
audit:
  output: %s
  include_arguments: true
  redact_fields: [password, token]
`, up, path))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {"eng-secret-0123456789"}}}
	c.Initialize("2025-11-25")
	if got := gatewaytest.AuditRecords(t, path); len(got) != 0 {
		t.Fatalf("records before any call: %v", got) // initialize and lists are not audited
	}

	loginArgs := `{"user": "alice", "password": "hunter2", "nested": [{"Token": "t0k"}], "n": 1.50}`
	call := func(id int, tool, args string) {
		c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)).Last(t)
	}
	call(1, "au__login", loginArgs)
	if e := gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"au__secret","arguments":{}}}`)); e.Code != -32602 {
		t.Errorf("denied call: %+v", e)
	}
	call(3, "au__fail", `{}`)
	call(4, "au__limited", `{}`)
	if e := gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"au__limited","arguments":{}}}`)); e.Code != router.CodeRateLimited {
		t.Errorf("rate-limited call: %+v", e)
	}
	call(6, "au__slow", `{}`)
	if m := c.Post(`{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"au__greet","arguments":{"who":"bob"}}}`).Last(t); m.Error != nil {
		t.Errorf("prompts/get: %v", m.Error)
	}
	c.Post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`).Last(t)

	// Shutdown closes the audit file; every record is in it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	recs := gatewaytest.AuditRecords(t, path)
	if len(recs) != 7 {
		for _, r := range recs {
			t.Logf("record: %v", r)
		}
		t.Fatalf("got %d records, want 7 (one per call, none for initialize or tools/list)", len(recs))
	}
	principal := map[string]any{"subject": "alice", "api_key": "eng-key", "groups": []any{"eng", "ops"}}
	emptyHash := audit.Hash([]byte(`{}`))
	want := []map[string]any{
		{"method": "tools/call", "name": "au__login", "decision": "allow", "rule": "policy.rules[0]", "pattern": "au__*", "outcome": "ok",
			"arguments_hash": audit.Hash([]byte(loginArgs)),
			"arguments":      map[string]any{"user": "alice", "password": "[redacted]", "nested": []any{map[string]any{"Token": "[redacted]"}}, "n": 1.5}},
		{"method": "tools/call", "name": "au__secret", "decision": "deny", "rule": "policy.rules[0]", "pattern": "au__secret", "outcome": "denied",
			"reason": "denied by rule 0 (match groups [eng]): deny au__secret", "arguments_hash": emptyHash, "arguments": map[string]any{}},
		{"method": "tools/call", "name": "au__fail", "decision": "allow", "rule": "policy.rules[0]", "outcome": "tool_error", "arguments_hash": emptyHash},
		{"method": "tools/call", "name": "au__limited", "decision": "allow", "outcome": "ok"},
		{"method": "tools/call", "name": "au__limited", "decision": "deny", "rule": audit.RuleRateLimits, "outcome": "rate_limited"},
		{"method": "tools/call", "name": "au__slow", "decision": "allow", "outcome": "timeout", "error_code": float64(-32001)},
		{"method": "prompts/get", "name": "au__greet", "kind": "prompt", "decision": "allow", "outcome": "ok",
			"arguments_hash": audit.Hash([]byte(`{"who":"bob"}`)), "arguments": map[string]any{"who": "bob"}},
	}
	for i, w := range want {
		r := recs[i]
		w["route"], w["upstream"], w["principal"], w["msg"] = "/mcp", "au", principal, "audit"
		if w["kind"] == nil {
			w["kind"] = "tool"
		}
		for k, v := range w {
			if g, wv := asJSON(r[k]), asJSON(v); g != wv {
				t.Errorf("record %d (%s) %s = %s, want %s", i, w["name"], k, g, wv)
			}
		}
		if ts, _ := r["time"].(string); ts == "" {
			t.Errorf("record %d has no time", i)
		} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("record %d time %q: %v", i, ts, err)
		}
		if d, ok := r["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("record %d duration_ms = %v", i, r["duration_ms"])
		}
	}
	if reason, _ := recs[4]["reason"].(string); !strings.Contains(reason, "rate limited by tool") {
		t.Errorf("rate-limited reason %q", reason)
	}
	if d := recs[5]["duration_ms"].(float64); d < 400 {
		t.Errorf("timed-out call took %vms, want about the 500ms upstream timeout", d)
	}
	if data, _ := os.ReadFile(path); bytes.Contains(data, []byte("hunter2")) || bytes.Contains(data, []byte("t0k")) {
		t.Errorf("a redacted value reached the audit log:\n%s", data)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestAuditStdioRefusesStdout: in stdio mode stdout carries the MCP
// messages, so an audit log there is refused before anything starts.
func TestAuditStdioRefusesStdout(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("test.yaml", []byte("upstreams: {au: {url: http://127.0.0.1:1/mcp}}\naudit: {output: stdout}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = gateway.ServeStdio(context.Background(), cfg, gateway.Options{}, "", strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "audit.output: stdout carries the MCP messages") {
		t.Errorf("ServeStdio with audit on stdout: %v", err)
	}
}
