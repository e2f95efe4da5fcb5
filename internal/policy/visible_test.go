package policy

import (
	"testing"
)

// MaySeeUnder is false only where nothing under the namespace can be
// listed for the principal (issue 37 item 4: an upstream denied whole must
// not show through initialize), and never false where Decide lists a name.
func TestMaySeeUnder(t *testing.T) {
	pol := compileYAML(t, testPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}}
	ci := Principal{Subject: "ci-bot", APIKey: "ci", Groups: []string{"automation"}}
	bob := Principal{Subject: "bob"}
	anon := Principal{}
	for _, tc := range []struct {
		name        string
		p           Principal
		route, kind string
		prefix      string
		want        bool
	}{
		{"group allows the namespace", eng, "/mcp", KindTool, "github__", true},
		{"an allow inside the namespace", eng, "/mcp", KindTool, "fs__", true},
		{"kind-restricted allow, other kind", eng, "/mcp", KindResource, "github+", false},
		{"api key allows only fs", ci, "/mcp", KindTool, "github__", false},
		{"api key: prompts of github", ci, "/mcp", KindPrompt, "github__", false},
		{"api key: resources of github", ci, "/mcp", KindResource, "github+", false},
		{"api key: its fs tools", ci, "/mcp", KindTool, "fs__", true},
		{"everyone's rule: fs resources", anon, "/mcp", KindResource, "fs+", true},
		{"anonymous: nothing of github", anon, "/mcp", KindTool, "github__", false},
		{"unprefixed route: the whole route", bob, "/mcp/fs", KindTool, "", true},
		{"route match elsewhere", bob, "/mcp", KindTool, "github__", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pol.MaySeeUnder(tc.p, tc.route, tc.kind, tc.prefix); got != tc.want {
				t.Errorf("MaySeeUnder(%v, %s, %s, %q) = %v, want %v", tc.p, tc.route, tc.kind, tc.prefix, got, tc.want)
			}
		})
	}

	// Soundness: a name Decide lists is under a namespace MaySeeUnder shows.
	principals := []Principal{eng, ci, bob, anon, {Subject: "alice", Groups: []string{"eng"}}, {Subject: "root", ClientID: "console", Scopes: []string{"admin"}}}
	names := map[string][]string{
		KindTool:     {"github__x", "github__delete_repo", "fs__read_file", "fs__write_file", "fs__list"},
		KindPrompt:   {"github__summarize", "fs__p"},
		KindResource: {"fs+file:///pub/a", "fs+file:///public/b", "github+gh://x"},
	}
	for _, p := range principals {
		for kind, ns := range names {
			for _, n := range ns {
				prefix := n[:len(n)-len(n[indexSep(n):])]
				if pol.Decide(p, "/mcp", kind, n).Listed() && !pol.MaySeeUnder(p, "/mcp", kind, prefix) {
					t.Errorf("%v: %s %s is listed, but MaySeeUnder(%q) is false", p, kind, n, prefix)
				}
			}
		}
	}
}

// indexSep is where the upstream's namespace ends in a canonical name.
func indexSep(n string) int {
	for i := 0; i < len(n); i++ {
		if n[i] == '+' {
			return i + 1
		}
		if i+1 < len(n) && n[i] == '_' && n[i+1] == '_' {
			return i + 2
		}
	}
	return 0
}

// Deny wins: a deny covering the namespace hides it even under a default
// allow; a condition decides when it does not read the name, and a deny
// whose condition reads the name cannot be counted on.
func TestMaySeeUnderDenyAndConditions(t *testing.T) {
	pol := compileYAML(t, `
policy:
  default: allow
  rules:
    - match: {groups: [contractors]}
      deny: ["github__*", "resource:github+*"]
    - when: 'principal.subject == "mallory"'
      deny: ["*"]
    - when: 'name.startsWith("github__x")'
      deny: ["*"]
    - match: {subjects: [dave]}
      deny: ["git*"]
`)
	for _, tc := range []struct {
		name   string
		p      Principal
		kind   string
		prefix string
		want   bool
	}{
		{"default allow", Principal{Subject: "erin"}, KindTool, "github__", true},
		{"group deny covers the tools", Principal{Groups: []string{"contractors"}}, KindTool, "github__", false},
		{"group deny covers the prompts", Principal{Groups: []string{"contractors"}}, KindPrompt, "github__", false},
		{"group deny covers the resources", Principal{Groups: []string{"contractors"}}, KindResource, "github+", false},
		{"group deny leaves fs", Principal{Groups: []string{"contractors"}}, KindTool, "fs__", true},
		{"a condition on the principal holds", Principal{Subject: "mallory"}, KindTool, "fs__", false},
		{"a shorter deny covers the namespace", Principal{Subject: "dave"}, KindTool, "github__", false},
		{"a shorter deny, another namespace", Principal{Subject: "dave"}, KindTool, "fs__", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pol.MaySeeUnder(tc.p, "/mcp", tc.kind, tc.prefix); got != tc.want {
				t.Errorf("MaySeeUnder(%v, %s, %q) = %v, want %v", tc.p, tc.kind, tc.prefix, got, tc.want)
			}
		})
	}
}
