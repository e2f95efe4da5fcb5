package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
)

// mcpgw catalog --live asks a running gateway's /status/catalog for the
// route's catalog and filters it with the policy of --config, as it does a
// recorded file.
func TestCatalogLive(t *testing.T) {
	exe := pinEnv(t)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  demo: {command: [%q, demo-server]}
auth:
  api_keys: [{name: ci, key: ci-key-0123456789, principal: ci-bot, groups: [automation]}]
policy:
  default: deny
  rules:
    - match: {groups: [automation]}
      allow: ["demo__echo", "prompt:demo__*"]
`, exe)
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("c.yaml", []byte(yaml), nil)
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	admin := "http://" + adminLn.Addr().String()

	code, out, errs := runCLI("catalog", "--config", cfgPath, "--live", admin, "--as-api-key", "ci")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"tool     demo__echo", "prompt   demo__greet"}
	if len(lines) != len(want) || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("--live as ci: got\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
	code, out, _ = runCLI("catalog", "--config", cfgPath, "--live", admin, "--as-api-key", "ci", "--all")
	if code != 0 || !strings.Contains(out, "deny  tool     demo__add") || !strings.Contains(out, "allow tool     demo__echo") {
		t.Errorf("--all: %d\n%s", code, out)
	}

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--live", admin, "--catalog", "x.json"}, 2, "do not go together"},
		{[]string{"--live", "127.0.0.1:9"}, 1, "give the admin listener's URL"},
		{[]string{"--live", "http://127.0.0.1:1"}, 1, "is the gateway running with admin.listen"},
	} {
		code, _, errs := runCLI(append([]string{"catalog", "--config", cfgPath}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.err)
		}
	}
}
