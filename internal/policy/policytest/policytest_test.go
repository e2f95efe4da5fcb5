package policytest_test

import (
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/policy/policytest"
)

// Every variant is a valid policy of the size asked, and the granted rule
// grants its prefix to its team and nothing else does.
func TestLarge(t *testing.T) {
	for _, l := range []policytest.Large{
		{Rules: 1000},
		{Rules: 1000, When: true},
		{Rules: 1000, When: true, Distinct: true},
		{Rules: 1000, When: true, Grant: 500, GrantPrefix: "st__"},
	} {
		y := l.YAML()
		if got := strings.Count(y, "\n    - {"); got != l.Rules {
			t.Fatalf("%+v: %d rules, want %d", l, got, l.Rules)
		}
		if got := strings.Count(y, "when: "); (got == l.Rules) != l.When || (got == 0) == l.When {
			t.Errorf("%+v: %d conditions", l, got)
		}
		cfg, err := config.Parse("large.yaml", []byte("upstreams: {st: {url: 'https://up.example.com'}}\nauth: {api_keys: [{name: k, key: s}]}\n"+y), nil)
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		pol, err := policy.Compile(cfg.Policy)
		if err != nil {
			t.Fatalf("%+v: %v", l, err)
		}
		team500 := policy.Principal{Subject: "alice", Groups: []string{"team500"}, Claims: map[string]any{"tenant": "acme"}}
		team7 := policy.Principal{Subject: "bob", Groups: []string{"team7"}, Claims: map[string]any{"tenant": "acme"}}
		granted := pol.DecideCall(team500, "/mcp", policy.KindTool, "st__echo", []byte(`{}`)).Allowed
		if granted != (l.GrantPrefix == "st__") {
			t.Errorf("%+v: team500 calling st__echo allowed=%v", l, granted)
		}
		if pol.DecideCall(team7, "/mcp", policy.KindTool, "st__echo", []byte(`{}`)).Allowed {
			t.Errorf("%+v: team7 may call st__echo", l)
		}
		if !pol.DecideCall(team7, "/mcp", policy.KindTool, "up7__search", []byte(`{}`)).Allowed {
			t.Errorf("%+v: team7 may not call its own up7__search", l)
		}
	}
}
