package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
