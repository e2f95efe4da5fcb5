package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
)

// configs/examples/curation.yaml does what its header says, with the real
// demo server as a child: "say" is listed and answers, demo__echo is
// unknown, demo__add {a: 5} answers 15 and a call sending b is refused;
// mcpgw catalog --live shows the curated names; a pinning lock of the
// upstream's own definitions approves the curated tools.
func TestCurationExample(t *testing.T) {
	exe := pinEnv(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "examples", "curation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		switch k {
		case "MCPGW_LISTEN":
			return "127.0.0.1:0", true
		case "MCPGW_EXECUTABLE":
			return exe, true
		}
		return "", false
	}
	// Pinning judges the upstream's own definitions: a lock of the demo
	// server's tools, as mcpgw pin writes it, approves the curated ones.
	lock := filepath.Join(t.TempDir(), "tools.lock.json")
	if code, out, errs := runCLI("pin", "--out", lock); code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errs)
	}
	data = append(data, "policy:\n  default: allow\n  pinning: {mode: enforce, lock_file: "+strconv.Quote(lock)+"}\n"...)
	cfg, err := config.Parse("curation.yaml", data, env)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	adminLn, _ := net.Listen("tcp", "127.0.0.1:0")
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, AdminListener: adminLn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "say" && tool.Description != "Repeat the given text." {
			t.Errorf("say: description %q", tool.Description)
		}
	}
	if got := strings.Join(names, ","); got != "demo__add,say,demo__sleep" {
		t.Errorf("tools = %s", got)
	}
	text := func(r *sdk.CallToolResult) string {
		if r == nil || len(r.Content) == 0 {
			return ""
		}
		tc, _ := r.Content[0].(*sdk.TextContent)
		if tc == nil {
			return ""
		}
		return tc.Text
	}
	if r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "say", Arguments: map[string]any{"text": "hello"}}); err != nil || !strings.Contains(text(r), "hello") {
		t.Errorf("say: %v %q", err, text(r))
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hello"}}); err == nil {
		t.Error("demo__echo answered under its old name")
	}
	if r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "demo__add", Arguments: map[string]any{"a": 5}}); err != nil || !strings.Contains(text(r), "15") {
		t.Errorf("demo__add {a:5}: %v %q", err, text(r))
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "demo__add", Arguments: map[string]any{"a": 5, "b": 1}}); err == nil || !strings.Contains(err.Error(), "fixed") {
		t.Errorf("demo__add with b: %v, want refused", err)
	}
	t.Setenv("MCPGW_LISTEN", "127.0.0.1:0")
	code, out, errs := runCLI("catalog", "--config", filepath.Join("..", "..", "configs", "examples", "curation.yaml"), "--live", "http://"+adminLn.Addr().String())
	if code != 0 || !strings.Contains(out, "tool     say\n") || strings.Contains(out, "demo__echo") {
		t.Errorf("catalog --live: exit %d, want the curated names\n%s%s", code, out, errs)
	}
}

// policy explain takes a curated name and judges the upstream's, showing
// both.
func TestPolicyExplainCuratedName(t *testing.T) {
	pinEnv(t)
	t.Setenv("MCPGW_LISTEN", "127.0.0.1:0")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	yaml := `upstreams:
  demo: {command: [node, x.js]}
policy:
  default: allow
  rules:
    - deny: [demo__echo]
routes:
  - path: /mcp
    tools:
      curate:
        - {tool: demo__echo, rename: say}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("policy", "explain", "--config", cfg, "--tool", "say")
	if code != 3 || !strings.Contains(out, "DENY tool demo__echo") || !strings.Contains(out, "curated:   say is the route's name for demo__echo") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}
