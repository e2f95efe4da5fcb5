package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// The policy section's globs and conditions are judged here, by the package
// that compiles them, and reported through config's problems at the line
// and path of each value; config alone no longer judges them.
func TestCheckConfigReportsAtPaths(t *testing.T) {
	src := []byte(`
upstreams:
  github: {url: "https://gh.example.com/mcp"}
policy:
  default: deny
  rules:
    - when: 'principal.nope == 1'
      allow: ['tool:x\']
    - when: '"admin" in principal.groups'
      allow: ["tools:github__*"]
  tool_scopes:
    "prompt:x": [repo]
  rate_limits:
    tools:
      - {tool: 'a\', rate: 1/s}
interceptors:
  - {name: r, type: deny_match, phase: request, patterns: [x], match: {tools: ['b\']}}
`)
	cfg, err := config.Parse("p.yaml", src, nil)
	if err != nil {
		t.Fatalf("config alone judges the policy's globs and conditions:\n%v", err)
	}
	_ = cfg
	_, err = config.Parse("p.yaml", src, nil, CheckConfig)
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse with CheckConfig: %v, want problems", err)
	}
	want := map[string]string{
		"policy.rules[0].when":             "is not a valid CEL condition",
		"policy.rules[0].allow[0]":         "write a glob",
		"policy.rules[1].allow[0]":         `did you mean "tool:"`,
		`policy.tool_scopes["prompt:x"]`:   "has a kind prefix",
		"policy.rate_limits.tools[0].tool": "write a glob",
		"interceptors[0].match.tools[0]":   "write a glob",
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Path] = p.Msg
		if p.Line == 0 {
			t.Errorf("%s: no line", p)
		}
	}
	for path, w := range want {
		if !strings.Contains(got[path], w) {
			t.Errorf("%s: got %q, want it to say %q", path, got[path], w)
		}
	}
	if len(ps) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ps), len(want), err)
	}
}
