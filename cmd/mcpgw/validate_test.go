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
