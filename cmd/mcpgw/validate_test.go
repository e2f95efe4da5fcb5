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
