package policy

import (
	"fmt"
	"testing"
)

// The rule index changes no decision: every decision equals the one made
// by looking at every rule, for principals and names in and out of the
// index's keys (rules filed by subject, group, scope, API key, route, and
// by pattern prefix for rules that apply to everyone).
func TestIndexAgreesWithEveryRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  *Policy
	}{
		{"the test policy", compileYAML(t, testPolicy)},
		{"1,000 rules", largePolicy(t, 1000, false)},
		{"1,000 rules with conditions", largePolicy(t, 1000, true)},
		{"rules for everyone, short and long prefixes", compileYAML(t, `
policy:
  default: deny
  rules:
    - allow: ["up1__*", "tool:abc"]
    - deny: ["up1__x*"]
    - allow: ["?p2__*"]
    - {match: {routes: [/mcp/fs]}, allow: ["*"]}
    - {match: {client_ids: [console]}, deny: ["up2__*"]}
    - {match: {api_keys: [ci], groups: [eng]}, allow: ["up3__*"]}
`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := *tc.pol
			all.index = ruleIndex{}
			for i := range all.rules {
				all.index.always = append(all.index.always, int32(i))
			}
			principals := []Principal{
				{}, {Subject: "alice"}, {Subject: "bob"}, {Subject: "user18"}, {Subject: "user38", Groups: []string{"team7"}},
				{Groups: []string{"eng"}}, {Groups: []string{"team500", "team7"}, Scopes: []string{"read"}, Claims: map[string]any{"tenant": "acme"}},
				{APIKey: "ci", Groups: []string{"eng", "automation"}}, {Scopes: []string{"admin"}, ClientID: "console"},
			}
			names := []string{"github__get_me", "github__delete_branch", "fs__read_a", "fs__write_b", "up1__a", "up1__xy", "ap2__z", "up2__q", "up3__r", "abc", "ab", ""}
			for _, i := range []int{7, 18, 19, 38, 500, 999} {
				names = append(names, fmt.Sprintf("up%d__search", i), fmt.Sprintf("up%d__admin_x", i), fmt.Sprintf("fs+file:///pub%d/a", i))
			}
			for _, p := range principals {
				for _, route := range []string{"/mcp", "/mcp/fs"} {
					for _, kind := range []string{KindTool, KindPrompt, KindResource} {
						for _, name := range names {
							got, want := tc.pol.Decide(p, route, kind, name), all.Decide(p, route, kind, name)
							if fmt.Sprint(got) != fmt.Sprint(want) {
								t.Fatalf("Decide(%v, %s, %s, %q):\n indexed %+v\n     all %+v", p, route, kind, name, got, want)
							}
							args := []byte(`{"limit":500}`)
							got, want = tc.pol.DecideCall(p, route, kind, name, args), all.DecideCall(p, route, kind, name, args)
							if fmt.Sprint(got) != fmt.Sprint(want) {
								t.Fatalf("DecideCall(%v, %s, %s, %q):\n indexed %+v\n     all %+v", p, route, kind, name, got, want)
							}
						}
					}
				}
			}
		})
	}
}
