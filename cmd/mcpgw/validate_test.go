package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// mcpgw validate reports what the config package finds, one problem per
// line, and exits 1; a good config prints its summary and exits 0.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, route string
		code        int
		want        string
	}{
		{"plain", "/mcp/team-a", 0, "1 route"},
		{"pattern", "/mcp/{team}", 1, `routes[0].path: "/mcp/{team}" contains "{", which the HTTP router would read as a pattern`},
		{"wildcard", "/mcp/*", 1, `contains "*"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "mcpgw.yaml")
			cfg := "upstreams:\n  fs: {command: [fs-server]}\nroutes:\n  - path: " + tc.route + "\n"
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", "--config", path}, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
				t.Errorf("exit %d, output %q %q; want exit %d with %q", code, stdout.String(), stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// validate warns about stdio children that look as if they relied on the
// gateway's environment, which they no longer inherit: a shell variable in
// the argv, a variable named after the upstream. It still exits 0.
func TestValidateWarnsAboutInheritedEnv(t *testing.T) {
	t.Setenv("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp-x")
	path := filepath.Join(t.TempDir(), "mcpgw.yaml")
	cfg := `upstreams:
  github: {command: [npx, -y, server-github]}
  wrapped: {command: [sh, -c, 'exec server --token "$$API_TOKEN" --home "$$HOME" --x "$${OTHER}"']}
  passed: {command: [sh, -c, 'exec server --token $$API_TOKEN $$NPM_CONFIG_CACHE'], env: {API_TOKEN: t}, inherit_env: [NPM_CONFIG_*]}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := stderr.String()
	for _, want := range []string{
		"warning: upstreams.github: the gateway's environment has GITHUB_PERSONAL_ACCESS_TOKEN, which the child no longer gets",
		"upstreams.github.inherit_env: [GITHUB_PERSONAL_ACCESS_TOKEN]",
		"warning: upstreams.wrapped.command refers to $API_TOKEN, which the child does not get",
		"warning: upstreams.wrapped.command refers to $OTHER,",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"$HOME", "upstreams.passed"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("validate warns about %s:\n%s", unwanted, got)
		}
	}
}

// Issue 27.8c: with auth on and several principals, a stdio upstream
// without stateful: true is one child shared by all of them; validate says
// so on stderr and still exits 0 (a warning, not a problem).
func TestValidateWarnsSharedStdio(t *testing.T) {
	const base = "upstreams:\n  browser: {command: [npx, playwright-mcp]%s}\nauth:\n  api_keys:\n    - {name: a, key: key-a-0123456789}\n    - {name: b, key: key-b-0123456789}\n"
	for _, tc := range []struct {
		name, extra string
		warn        bool
	}{
		{"shared", "", true},
		{"stateful", ", stateful: true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcpgw.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(base, "%s", tc.extra, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", "--config", path}, &stdout, &stderr)
			warned := strings.Contains(stderr.String(), "warning: upstreams.browser: one stdio child serves every client and every principal") &&
				strings.Contains(stderr.String(), "stateful: true")
			if code != 0 || !strings.Contains(stdout.String(), "config ok") || warned != tc.warn {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 0, the summary, and a shared-child warning: %v", code, stdout.String(), stderr.String(), tc.warn)
			}
		})
	}
}

// --admin-listen changes the admin address only: the file's token and
// allowed hosts stay in force (they were dropped with the whole section).
func TestAdminListenFlagKeepsAdminSettings(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("upstreams: {fs: {command: [x]}}\nadmin: {listen: 127.0.0.1:9091, token_file: /run/secrets/admin, allowed_hosts: [mcpgw-admin], pprof: true}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	overrideAdminListen(cfg, "0.0.0.0:9999")
	if a := cfg.Admin; a.Listen != "0.0.0.0:9999" || a.TokenFile != "/run/secrets/admin" || len(a.AllowedHosts) != 1 || !a.Pprof {
		t.Errorf("admin after --admin-listen: %+v", *a)
	}
	cfg, _ = config.Parse("c.yaml", []byte("upstreams: {fs: {command: [x]}}\n"), nil)
	if overrideAdminListen(cfg, "127.0.0.1:9091"); cfg.Admin == nil || cfg.Admin.Listen != "127.0.0.1:9091" {
		t.Errorf("admin after --admin-listen without admin: %+v", cfg.Admin)
	}
}

// validate refuses what run refuses at start, for the files a config
// names, and reports them all at once: a missing pinning lock in enforce
// mode, a missing session key file, an audit log in a missing directory,
// an empty admin token file.
func TestValidateChecksFilesAsRunDoes(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcpgw.yaml")
	cfg := `upstreams:
  fs: {command: [fs-server]}
sessions:
  key_file: ` + filepath.Join(dir, "no-keys") + `
admin:
  listen: 127.0.0.1:9091
  token_file: ` + empty + `
policy:
  default: allow
  pinning: {mode: enforce, lock_file: ` + filepath.Join(dir, "no.lock.json") + `}
audit:
  output: ` + filepath.Join(dir, "no-dir", "audit.log") + `
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path, nil); err != nil {
		t.Fatalf("the config itself is valid: %v", err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"validate", "--config", path}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d; want 1", code)
	}
	for _, want := range []string{"sessions.key_file:", "admin.token_file:", "policy.pinning.lock_file:", "audit.output:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no problem about %s in:\n%s", want, stderr.String())
		}
	}
}
