package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// A YAML syntax error names the line at fault, not the line where the
// enclosing construct began (yaml.v3's own report, often 0-based).
func TestSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		line int
	}{
		{"unclosed flow sequence", "listen: 127.0.0.1:8080\nupstreams:\n  a:\n    command: [node, x.js\n    env: {}\n", 4},
		{"mis-indented key", "listen: 127.0.0.1:8080\nupstreams:\n  a:\n    command: [node]\n   env: {}\n", 5},
		{"tab indentation", "listen: 127.0.0.1:8080\nupstreams:\n\ta:\n", 3},
		{"unclosed quote", "listen: 127.0.0.1:8080\nupstreams:\n  a:\n    command: [\"node]\n", 4},
		{"two colons", "listen: 127.0.0.1:8080\nupstreams: a: b\n", 2},
		{"after a multi-line flow list", "listen: 127.0.0.1:8080\nupstreams:\n  a:\n    command: [node,\n      x.js]\n    env: {A: 1\n    dir: /tmp\n", 6},
		{"unterminated last line", "upstreams:\n  a:\n    command: [node", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAll("c.yaml", []byte(tc.yaml), nil)
			var ps config.Problems
			if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].Msg, "YAML syntax error") {
				t.Fatalf("Parse: %v; want one YAML syntax error", err)
			}
			if ps[0].Line != tc.line {
				t.Errorf("line %d, want %d: %v", ps[0].Line, tc.line, ps[0])
			}
		})
	}
}
