package policy

import (
	"fmt"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy/policytest"
	"github.com/mcpgw/mcpgw/internal/principal"
)

// largePolicy is a policy of n rules the way a large deployment writes
// them (policytest.Large); with when, every rule carries a CEL condition.
func largePolicy(tb testing.TB, n int, when bool) *Policy {
	tb.Helper()
	return compileLarge(tb, n, when, false)
}

// compileLarge is largePolicy; with distinct, no two rules share the text
// of their condition, so none is compiled once for several rules.
func compileLarge(tb testing.TB, n int, when, distinct bool) *Policy {
	tb.Helper()
	y := policytest.Large{Rules: n, When: when, Distinct: distinct}.YAML()
	cfg, err := config.Parse("bench.yaml", []byte("upstreams: {up: {url: 'https://up.example.com'}}\nauth: {api_keys: [{name: k, key: s}]}\n"+y), nil)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := Compile(cfg.Policy)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkDecide1000 is one call's decision under 1,000 rules (issue 18:
// at most 2 µs without conditions, 10 µs with), for a principal of two
// teams calling a tool of one of them. Its claims are prepared once, as
// the auth layer does per token.
func BenchmarkDecide1000(b *testing.B) {
	claims := map[string]any{"tenant": "acme"}
	p := Principal{Subject: "alice", Groups: []string{"team500", "team7"}, Scopes: []string{"read"}, Claims: claims, PreparedClaims: principal.NewClaims(claims)}
	args := []byte(`{"limit":10,"q":"x"}`)
	for _, tc := range []struct {
		name string
		when bool
	}{{"plain", false}, {"cel", true}} {
		pol := largePolicy(b, 1000, tc.when)
		b.Run(tc.name, func(b *testing.B) {
			if d := pol.DecideCall(p, "/mcp", KindTool, "up500__search", args); !d.Allowed || d.Rule != 500 {
				b.Fatalf("decision %+v, want allowed by rule 500", d)
			}
			b.ReportAllocs()
			for b.Loop() {
				pol.DecideCall(p, "/mcp", KindTool, "up500__search", args)
			}
		})
		b.Run(tc.name+"/list", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pol.Decide(p, "/mcp", KindTool, "up500__search")
			}
		})
	}
}

// BenchmarkCompile1000 is parsing, validating and compiling a 1,000-rule
// policy (config load or reload): without conditions, with the three
// conditions largePolicy repeats over its rules, and with 1,000 distinct
// ones.
func BenchmarkCompile1000(b *testing.B) {
	for _, tc := range []struct {
		name           string
		when, distinct bool
	}{{"cel=false", false, false}, {"cel=true", true, false}, {"cel=distinct", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				compileLarge(b, 1000, tc.when, tc.distinct)
			}
		})
	}
}

// BenchmarkListPage1000 is deciding a page of 100 listed tool names under
// 1,000 rules: each name on its own (Decide) and by one Lister, as
// FilterList does.
func BenchmarkListPage1000(b *testing.B) {
	claims := map[string]any{"tenant": "acme"}
	p := Principal{Subject: "alice", Groups: []string{"team500", "team7"}, Claims: claims, PreparedClaims: principal.NewClaims(claims)}
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("up%d__tool%d", 500+i%3, i)
	}
	for _, when := range []bool{false, true} {
		pol := largePolicy(b, 1000, when)
		b.Run(fmt.Sprintf("cel=%v/decide", when), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, n := range names {
					pol.Decide(p, "/mcp", KindTool, n)
				}
			}
		})
		b.Run(fmt.Sprintf("cel=%v/lister", when), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l := pol.Lister(p, "/mcp")
				for _, n := range names {
					l.Decide(KindTool, n)
				}
			}
		})
	}
}
