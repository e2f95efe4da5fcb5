package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
)

func TestRedact(t *testing.T) {
	fields := map[string]bool{"password": true, "token": true}
	for _, tc := range []struct{ in, want string }{
		{`{"user":"a","password":"p"}`, `{"user":"a","password":"[redacted]"}`},
		{`{"Password": {"nested": [1,2]}, "n": 1.50}`, `{"Password":"[redacted]","n":1.50}`},
		{`[{"a":{"TOKEN":null,"b":[{"token":"x"}]}}]`, `[{"a":{"TOKEN":"[redacted]","b":[{"token":"[redacted]"}]}}]`},
		{`{"z":"<&>","a":true,"m":false}`, `{"z":"<&>","a":true,"m":false}`},
		{`"password"`, `"password"`},
		{`{}`, `{}`},
	} {
		got, err := audit.Redact([]byte(tc.in), fields)
		if err != nil || string(got) != tc.want {
			t.Errorf("Redact(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{"a":`, `{"a":1}{}`, strings.Repeat("[", 300) + strings.Repeat("]", 300)} {
		if got, err := audit.Redact([]byte(bad), fields); err == nil {
			t.Errorf("Redact(%.20s) = %s, want an error", bad, got)
		}
	}
}

func TestSetResponse(t *testing.T) {
	for _, tc := range []struct {
		resp      string
		cancelled bool
		want      audit.Outcome
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, false, audit.OK},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`, false, audit.ToolError},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}`, false, audit.OK},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`, false, audit.InputRequired},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, false, audit.ProtocolError},
		{fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":"late"}}`, mcp.CodeRequestTimeout), false, audit.Timeout},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"gone"}}`, true, audit.Cancelled},
	} {
		var m jsonrpc.Message
		if err := json.Unmarshal([]byte(tc.resp), &m); err != nil {
			t.Fatal(err)
		}
		var r audit.Record
		r.SetResponse(&m, tc.cancelled)
		if r.Outcome != tc.want {
			t.Errorf("%s: outcome %s, want %s", tc.resp, r.Outcome, tc.want)
		}
		if m.Error != nil && (r.ErrorCode != m.Error.Code || r.Error != m.Error.Message) {
			t.Errorf("%s: error %d %q", tc.resp, r.ErrorCode, r.Error)
		}
	}
}

func TestLog(t *testing.T) {
	var buf bytes.Buffer
	zl := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(audit.EncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel))
	args := json.RawMessage(`{"q": "x", "password": "hunter2"}`)
	rec := &audit.Record{
		Time:      time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Principal: policy.Principal{Subject: "alice", Issuer: "https://idp", APIKey: "", Groups: []string{"eng", "ops"}},
		Route:     "/mcp", Upstream: "gh", Method: "tools/call", Kind: "tool", Name: "gh__search",
		Decision: audit.Allow, Rule: "policy.rules[1]", Pattern: "gh__*", Reason: "allowed by rule 1",
		Duration: 1500 * time.Microsecond, Outcome: audit.OK, Arguments: args,
		RequestID: "req-7", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
	for _, include := range []bool{false, true} {
		buf.Reset()
		audit.New(zl, audit.Options{IncludeArguments: include, RedactFields: []string{"PASSWORD"}}).Log(rec)
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", buf.Bytes(), err)
		}
		want := map[string]any{
			"time": "2026-01-02T03:04:05.000000006Z", "msg": "audit", "method": "tools/call", "route": "/mcp",
			"request_id": "req-7", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
			"upstream": "gh", "kind": "tool", "name": "gh__search",
			"principal": map[string]any{"subject": "alice", "issuer": "https://idp", "groups": []any{"eng", "ops"}},
			"decision":  "allow", "rule": "policy.rules[1]", "pattern": "gh__*", "reason": "allowed by rule 1",
			"duration_ms": 1.5, "outcome": "ok", "arguments_hash": audit.Hash(args),
		}
		if include {
			want["arguments"] = map[string]any{"q": "x", "password": "[redacted]"}
		}
		if g, w := mustJSON(got), mustJSON(want); g != w {
			t.Errorf("include_arguments %v:\n got %s\nwant %s", include, g, w)
		}
		if strings.Contains(buf.String(), "hunter2") {
			t.Errorf("the secret reached the log: %s", buf.Bytes())
		}
	}
	if !strings.HasPrefix(audit.Hash(args), "sha256:") || len(audit.Hash(args)) != 7+64 {
		t.Errorf("hash %s", audit.Hash(args))
	}

	// Unparseable arguments are hashed, never written.
	buf.Reset()
	audit.New(zl, audit.Options{IncludeArguments: true}).Log(&audit.Record{Method: "tools/call", Arguments: json.RawMessage(`{"password":"hunter2"`)})
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), `"arguments_error":"not recorded: `) {
		t.Errorf("unparseable arguments: %s", buf.Bytes())
	}

	var nilLogger *audit.Logger
	nilLogger.Log(rec) // does nothing
	if err := nilLogger.Close(); err != nil {
		t.Error(err)
	}
}

func TestOpenFile(t *testing.T) {
	if l, err := audit.Open(nil); l != nil || err != nil {
		t.Fatalf("Open(nil) = %v, %v", l, err)
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte("earlier\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := audit.Open(&config.Audit{Output: path})
	if err != nil {
		t.Fatal(err)
	}
	l.Log(&audit.Record{Method: "resources/read", Outcome: audit.OK})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "earlier" || !strings.Contains(lines[1], `"method":"resources/read"`) || !strings.Contains(lines[1], `"principal":{"anonymous":true}`) {
		t.Errorf("file holds %q", data)
	}
	if _, err := audit.Open(&config.Audit{Output: filepath.Join(t.TempDir(), "no", "such", "dir", "a.log")}); err == nil || !strings.Contains(err.Error(), "audit.output") {
		t.Errorf("unwritable path: %v", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
