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

// With admin.token_file the gateway requires the token for /status/*;
// mcpgw catalog --live sends the token of its --config's admin.token_file.
func TestCatalogLiveAdminToken(t *testing.T) {
	exe := pinEnv(t)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokFile, []byte("catalog-live-admin-token-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  demo: {command: [%q, demo-server]}\n", exe)
	withToken := base + "admin: {listen: 127.0.0.1:0, token_file: " + tokFile + "}\n"
	cfgPath, plainPath := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(cfgPath, []byte(withToken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plainPath, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("c.yaml", []byte(withToken), nil)
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
	if code, out, errs := runCLI("catalog", "--config", cfgPath, "--live", admin); code != 0 || !strings.Contains(out, "demo__echo") {
		t.Errorf("with admin.token_file: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs := runCLI("catalog", "--config", plainPath, "--live", admin); code != 1 || !strings.Contains(errs, "HTTP 401") || !strings.Contains(errs, "admin.token_file") {
		t.Errorf("without the token: exit %d, stderr %q; want 1 with HTTP 401 naming admin.token_file", code, errs)
	}
}
