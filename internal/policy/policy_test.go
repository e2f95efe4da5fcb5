package policy

import (
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// compileYAML parses a config (with a fixed upstream and auth) and compiles
// its policy.
func compileYAML(t testing.TB, policyYAML string) *Policy {
	t.Helper()
	cfg := parseConfig(t, policyYAML)
	p, err := Compile(cfg.Policy)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func parseConfig(t testing.TB, policyYAML string) *config.Config {
	t.Helper()
	src := `
upstreams:
  github: {url: "https://gh.example.com/mcp"}
  fs: {command: [fs-server]}
routes:
  - path: /mcp
  - path: /mcp/fs
    upstreams: [fs]
    prefix: false
auth:
  # api keys only: the test depends on as little of auth: as it can
  api_keys:
    - {name: ci, key: secret, principal: ci-bot, groups: [automation]}
` + policyYAML
	cfg, err := config.Parse("policy.yaml", []byte(src), nil)
	if err != nil {
		t.Fatalf("config.Parse:\n%v", err)
	}
	return cfg
}

const testPolicy = `
policy:
  default: deny
  tool_scopes:
    "github__*": [repo:read]
    "github__create_*": [repo:write]
  rules:
    - match: {groups: [eng]}
      allow: ["github__*", "fs__read_*", "prompt:*"]
      deny: ["github__delete_*"]
    - match: {subjects: [alice]}
      allow: ["github__delete_branch"]
    - match: {subjects: [bob], routes: [/mcp/fs]}
      allow: ["*"]
    - match: {api_keys: [ci]}
      allow: ["tool:fs__*", "resource:fs+file:///pub/*"]
      deny: ["fs__write_*"]
    - match: {scopes: [admin], client_ids: [console]}
      allow: ["*"]
    - allow: ["resource:fs+file:///public/*"]
`

func TestDecide(t *testing.T) {
	pol := compileYAML(t, testPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}, Scopes: []string{"repo:read", "repo:write"}}
	alice := Principal{Subject: "alice", Groups: []string{"eng"}, Scopes: []string{"repo:read"}}
	bob := Principal{Subject: "bob"}
	ci := Principal{Subject: "ci-bot", APIKey: "ci", Groups: []string{"automation"}}
	admin := Principal{Subject: "root", ClientID: "console", Scopes: []string{"admin", "repo:read", "repo:write"}}
	adminOtherClient := Principal{Subject: "root", ClientID: "cli", Scopes: []string{"admin"}}
	anon := Principal{}

	for _, tc := range []struct {
		name       string
		p          Principal
		route      string
		kind, item string
		allowed    bool
		rule       int
		reason     string
		missing    string
	}{
		{"group allow", eng, "/mcp", KindTool, "github__create_issue", true, 0, "allowed by rule 0 (match groups [eng]): allow github__*", ""},
		{"deny wins in the same rule", eng, "/mcp", KindTool, "github__delete_repo", false, 0, "denied by rule 0 (match groups [eng]): deny github__delete_*", ""},
		{"deny wins over a later allow", alice, "/mcp", KindTool, "github__delete_branch", false, 0, "deny github__delete_*", ""},
		{"glob with underscore prefix", eng, "/mcp", KindTool, "fs__read_file", true, 0, "allow fs__read_*", ""},
		{"glob does not match", eng, "/mcp", KindTool, "fs__write_file", false, -1, "denied by default: no rule allows tool fs__write_file", ""},
		{"kind prefix: prompt", eng, "/mcp", KindPrompt, "anything", true, 0, "allow prompt:*", ""},
		{"unprefixed applies to prompts", eng, "/mcp", KindPrompt, "github__summarize", true, 0, "allow github__*", ""},
		{"kind prefix excludes resources", eng, "/mcp", KindResource, "anything", false, -1, "default: deny", ""},
		{"route match", bob, "/mcp/fs", KindTool, "write_file", true, 2, "match subjects [bob] routes [/mcp/fs]", ""},
		{"route mismatch", bob, "/mcp", KindTool, "fs__write_file", false, -1, "default", ""},
		{"api key", ci, "/mcp", KindTool, "fs__list", true, 3, "match api_keys [ci]", ""},
		{"api key deny", ci, "/mcp", KindTool, "fs__write_x", false, 3, "deny fs__write_*", ""},
		{"tool: prefix not for resources", ci, "/mcp", KindResource, "fs__list", false, -1, "default", ""},
		{"resource glob crosses /", ci, "/mcp", KindResource, "fs+file:///pub/a/b.md", true, 3, "resource:fs+file:///pub/*", ""},
		{"scopes and client id both needed", admin, "/mcp", KindTool, "github__x", true, 4, "match scopes [admin] client_ids [console]", ""},
		{"client id mismatch", adminOtherClient, "/mcp", KindTool, "github__x", false, -1, "default", ""},
		{"rule for everyone", anon, "/mcp", KindResource, "fs+file:///public/x", true, 5, "matches everyone", ""},
		{"anonymous default", anon, "/mcp", KindTool, "github__x", false, -1, "default: deny", ""},
		{"missing scope", alice, "/mcp", KindTool, "github__create_issue", false, 0, "needs scope repo:write (tool_scopes github__create_*)", "repo:write"},
		{"missing two scopes", Principal{Groups: []string{"eng"}}, "/mcp", KindTool, "github__create_issue", false, 0, "needs scope repo:read repo:write", "repo:read repo:write"},
		{"scopes only for tools", Principal{Groups: []string{"eng"}}, "/mcp", KindPrompt, "github__create_issue", true, 0, "allow github__*", ""},
		{"unknown kind", eng, "/mcp", "tools", "github__x", false, -1, "not a kind", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pol.Decide(tc.p, tc.route, tc.kind, tc.item)
			if d.Allowed != tc.allowed || d.Rule != tc.rule || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("Decide(%v, %s, %s %s) = %+v\nwant allowed %v rule %d reason containing %q", tc.p, tc.route, tc.kind, tc.item, d, tc.allowed, tc.rule, tc.reason)
			}
			if got := strings.Join(d.MissingScopes, " "); got != tc.missing {
				t.Errorf("MissingScopes = %q, want %q", got, tc.missing)
			}
			if d.Listed() != (tc.allowed || tc.missing != "") {
				t.Errorf("Listed() = %v", d.Listed())
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		noAuth     bool
		allowed    bool
		allowsAll  bool // AllowsAll: lists need no filtering
	}{
		{"explicit allow", "policy: {default: allow}", false, true, true},
		{"explicit deny", "policy: {default: deny}", false, false, false},
		{"auth configured, default unset", "policy: {rules: [{match: {groups: [x]}, allow: [y]}]}", false, false, false},
		{"auth configured, no policy section", "", false, false, false},
		{"no auth, no policy section", "", true, true, true},
		{"allow with a rule", "policy: {default: allow, rules: [{deny: [y]}]}", false, true, false},
		{"allow with tool scopes", "policy: {default: allow, tool_scopes: {'github__*': [repo]}}", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "upstreams: {github: {url: 'https://x.example.com'}}\n"
			if !tc.noAuth {
				src += "auth: {api_keys: [{name: k, key: s}]}\n"
			}
			cfg, err := config.Parse("t.yaml", []byte(src+tc.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			pol, err := Compile(cfg.Policy)
			if err != nil {
				t.Fatal(err)
			}
			d := pol.Decide(Principal{}, "/mcp", KindTool, "github__x")
			if d.Allowed != tc.allowed || d.Rule != -1 {
				t.Errorf("Decide = %+v, want allowed %v by default", d, tc.allowed)
			}
			if got := pol.AllowsAll(); got != tc.allowsAll {
				t.Errorf("AllowsAll = %v, want %v", got, tc.allowsAll)
			}
		})
	}
}

func TestRequiredScopes(t *testing.T) {
	pol := compileYAML(t, testPolicy)
	for name, want := range map[string]string{
		"github__create_issue": "repo:read repo:write",
		"github__get":          "repo:read",
		"fs__read_file":        "",
	} {
		if got := strings.Join(pol.RequiredScopes(name), " "); got != want {
			t.Errorf("RequiredScopes(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	if _, err := Compile(nil); err == nil {
		t.Error("Compile(nil) succeeded")
	}
	if _, err := Compile(&config.Policy{Default: "maybe"}); err == nil {
		t.Error("bad default accepted")
	}
	_, err := Compile(&config.Policy{Default: "deny", Rules: []*config.PolicyRule{nil, {Allow: []string{""}}}, ToolScopes: map[string][]string{`x\`: {"s"}}})
	if err == nil || !strings.Contains(err.Error(), "rules[0]") || !strings.Contains(err.Error(), "rules[1].allow[0]") || !strings.Contains(err.Error(), "tool_scopes") {
		t.Errorf("Compile of unvalidated rules: %v", err)
	}
}

// TestSubjectsNameTheirSource: "apikey:<principal>" matches only an API
// key's principal and "<issuer>#<sub>" only a token of that issuer, so an
// OIDC user whose sub is ci-bot is not the ci-bot API key; a bare subject
// still matches any source (validation refuses it where several could
// issue it).
func TestSubjectsNameTheirSource(t *testing.T) {
	cfg, err := config.Parse("p.yaml", []byte(`
public_url: https://mcp.example.com
upstreams:
  github: {url: "https://gh.example.com/mcp"}
  fs: {command: [fs-server]}
auth:
  issuers:
    - {issuer: https://idp.example.com, audience: https://mcp.example.com/mcp}
    - {issuer: https://other.example.com, audience: https://mcp.example.com/mcp}
  api_keys:
    - {name: ci, key: secret, principal: ci-bot}
policy:
  default: deny
  rules:
    - match: {subjects: ["apikey:ci-bot"]}
      allow: ["github__*"]
    - match: {subjects: ["https://idp.example.com#alice"]}
      allow: ["fs__*"]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := Compile(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p     Principal
		tool  string
		allow bool
	}{
		{Principal{Subject: "ci-bot", APIKey: "ci"}, "github__x", true},
		{Principal{Subject: "ci-bot", Issuer: "https://idp.example.com"}, "github__x", false},
		{Principal{Subject: "ci-bot", Issuer: "https://other.example.com"}, "github__x", false},
		{Principal{Subject: "alice", Issuer: "https://idp.example.com"}, "fs__x", true},
		{Principal{Subject: "alice", Issuer: "https://other.example.com"}, "fs__x", false},
		{Principal{Subject: "alice", APIKey: "ci"}, "fs__x", false},
	} {
		if d := pol.DecideCall(tc.p, "/mcp", KindTool, tc.tool, nil); d.Allowed != tc.allow {
			t.Errorf("%v %s: %+v, want allowed %v", tc.p, tc.tool, d, tc.allow)
		}
		if d := pol.Decide(tc.p, "/mcp", KindTool, tc.tool); d.Allowed != tc.allow {
			t.Errorf("Decide %v %s: %+v, want allowed %v", tc.p, tc.tool, d, tc.allow)
		}
	}
}
