package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// condPolicy exercises conditions: on principal fields and claims, on
// arguments, on allow and on deny rules, next to plain rules.
const condPolicy = `
policy:
  default: deny
  tool_scopes:
    "github__create_*": [repo:write]
  rules:
    - match: {groups: [eng]}
      allow: ["github__*"]
      deny: ["github__delete_*"]
    # rule 1: eng may only touch acme's repositories
    - match: {groups: [eng]}
      when: '!arguments.repo.startsWith("acme/")'
      deny: ["github__*"]
    # rule 2: admins may delete branches, without arguments in play
    - when: '"admin" in principal.groups'
      allow: ["github__delete_branch"]
    # rule 3: a claim decides
    - when: 'principal.claims.department == "research"'
      allow: ["fs__*"]
      deny: ["fs__write_*"]
    # rule 4: contractors are denied prompts, by subject and route
    - when: 'principal.subject.endsWith("@contractor.example") && route == "/mcp"'
      deny: ["prompt:*"]
    # rule 5: small reads only, for everyone
    - when: 'kind == "tool" && name.startsWith("fs__read") && arguments.limit <= 100'
      allow: ["fs__read_*"]
    # rule 6: anyone may list issues of public repos
    - when: 'has(arguments.repo) && arguments.repo.startsWith("public/")'
      allow: ["github__list_issues"]
    - match: {subjects: [ann]}
      allow: ["prompt:*"]
`

func TestDecideCallConditions(t *testing.T) {
	pol := compileYAML(t, condPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}, Scopes: []string{"repo:write"}}
	admin := Principal{Subject: "root", Groups: []string{"admin"}}
	research := Principal{Subject: "rita", Claims: map[string]any{"department": "research"}}
	sales := Principal{Subject: "sam", Claims: map[string]any{"department": "sales"}}
	contractor := Principal{Subject: "ann@contractor.example"}
	employee := Principal{Subject: "ann"}
	anon := Principal{}

	for _, tc := range []struct {
		name       string
		p          Principal
		route      string
		kind, item string
		args       string
		allowed    bool
		rule       int
		reason     string
	}{
		{"argument condition holds: deny does not apply", eng, "/mcp", KindTool, "github__create_issue", `{"repo":"acme/api"}`, true, 0, "allowed by rule 0"},
		{"argument condition: deny applies", eng, "/mcp", KindTool, "github__create_issue", `{"repo":"evil/api"}`, false, 1, "denied by rule 1 (match groups [eng] when !arguments.repo.startsWith(\"acme/\")): deny github__*"},
		{"missing key fails closed on a deny", eng, "/mcp", KindTool, "github__create_issue", `{"title":"x"}`, false, 1, "the condition failed, so the deny holds: no such key: repo"},
		{"no arguments fail closed on a deny", eng, "/mcp", KindTool, "github__get_me", ``, false, 1, "no such key: repo"},
		{"wrong type fails closed on a deny", eng, "/mcp", KindTool, "github__get_me", `{"repo":42}`, false, 1, "the condition failed"},
		{"duplicate key fails closed", eng, "/mcp", KindTool, "github__get_me", `{"repo":"acme/a","repo":"evil/b"}`, false, 1, "appears twice"},
		{"arguments not an object fail closed", eng, "/mcp", KindTool, "github__get_me", `["acme/a"]`, false, 1, "not a JSON object"},
		{"unconditional deny still wins", eng, "/mcp", KindTool, "github__delete_repo", `{"repo":"acme/a"}`, false, 0, "deny github__delete_*"},
		{"group condition allows", admin, "/mcp", KindTool, "github__delete_branch", `{}`, true, 2, `allowed by rule 2 (matches everyone when "admin" in principal.groups)`},
		{"group condition does not hold", anon, "/mcp", KindTool, "github__delete_branch", `{}`, false, -1, "default: deny"},
		{"claim allows", research, "/mcp", KindTool, "fs__list", ``, true, 3, "allowed by rule 3"},
		{"claim denies too", research, "/mcp", KindTool, "fs__write_x", ``, false, 3, "denied by rule 3"},
		{"claim mismatch", sales, "/mcp", KindTool, "fs__list", ``, false, -1, "default"},
		{"missing claim: allow does not hold", anon, "/mcp", KindTool, "fs__list", ``, false, -1, "rule 3's condition failed: no such key: department"},
		{"missing claim: deny holds", anon, "/mcp", KindTool, "fs__write_x", ``, false, 3, "the condition failed, so the deny holds"},
		{"subject and route condition", contractor, "/mcp", KindPrompt, "summarize", ``, false, 4, "denied by rule 4"},
		{"other route", contractor, "/mcp/fs", KindPrompt, "summarize", ``, false, -1, "default"},
		{"condition false: later allow", employee, "/mcp", KindPrompt, "summarize", ``, true, 7, "allowed by rule 7"},
		{"numeric argument within limit", anon, "/mcp", KindTool, "fs__read_file", `{"limit": 100}`, true, 5, "allowed by rule 5"},
		{"numeric argument over limit", anon, "/mcp", KindTool, "fs__read_file", `{"limit": 100.5}`, false, -1, "default"},
		{"numeric argument missing", anon, "/mcp", KindTool, "fs__read_file", `{}`, false, -1, "no such key: limit"},
		{"has() avoids the error", anon, "/mcp", KindTool, "github__list_issues", `{}`, false, -1, "default: deny)"},
		{"has() and value", anon, "/mcp", KindTool, "github__list_issues", `{"repo":"public/x"}`, true, 6, "allowed by rule 6"},
		{"null arguments are none", anon, "/mcp", KindTool, "github__list_issues", `null`, false, -1, "default"},
		{"scopes still apply after a condition", Principal{Groups: []string{"eng"}}, "/mcp", KindTool, "github__create_issue", `{"repo":"acme/x"}`, false, 0, "needs scope repo:write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args json.RawMessage
			if tc.args != "" {
				args = json.RawMessage(tc.args)
			}
			d := pol.DecideCall(tc.p, tc.route, tc.kind, tc.item, args)
			if d.Allowed != tc.allowed || d.Rule != tc.rule || !strings.Contains(d.Reason, tc.reason) || d.Conditional {
				t.Errorf("DecideCall(%v, %s %s, %s) = %+v\nwant allowed %v rule %d reason containing %q", tc.p, tc.kind, tc.item, tc.args, d, tc.allowed, tc.rule, tc.reason)
			}
			// The invariant: a call allowed means the name is listed.
			if l := pol.Decide(tc.p, tc.route, tc.kind, tc.item); d.Allowed && !l.Listed() {
				t.Errorf("call allowed but Decide hides it: %+v", l)
			}
		})
	}
}

func TestDecideListsConditions(t *testing.T) {
	pol := compileYAML(t, condPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}, Scopes: []string{"repo:write"}}
	for _, tc := range []struct {
		name        string
		p           Principal
		kind, item  string
		listed      bool
		conditional bool
		reason      string
	}{
		// A deny that depends on the arguments does not hide the name.
		{"conditional deny does not hide", eng, KindTool, "github__create_issue", true, true, "a deny with a condition on the arguments may refuse some calls"},
		// An allow that depends on them lists it.
		{"conditional allow lists", Principal{}, KindTool, "fs__read_file", true, true, "allowed by rule 5 (matches everyone when kind == \"tool\" && name.startsWith(\"fs__read\") && arguments.limit <= 100): allow fs__read_*, if the call's arguments meet the condition"},
		// ... unless the part without arguments already fails.
		{"partial evaluation: kind/name decide", Principal{}, KindPrompt, "fs__read_x", false, false, "default"},
		{"unconditional deny hides", eng, KindTool, "github__delete_repo", false, false, "deny github__delete_*"},
		// Conditions without arguments are decided exactly.
		{"group condition", Principal{Groups: []string{"admin"}}, KindTool, "github__delete_branch", true, false, "allowed by rule 2"},
		{"group condition false", Principal{}, KindTool, "github__delete_branch", false, false, "default"},
		{"claim deny hides", Principal{}, KindTool, "fs__write_x", false, false, "denied by rule 3"},
		{"claim deny hides (claim present)", Principal{Claims: map[string]any{"department": "research"}}, KindTool, "fs__write_x", false, false, "denied by rule 3"},
		{"contractor prompt hidden", Principal{Subject: "x@contractor.example"}, KindPrompt, "p", false, false, "denied by rule 4"},
		{"definite allow preferred over a conditional one", Principal{Claims: map[string]any{"department": "research"}}, KindTool, "fs__read_file", true, false, "allowed by rule 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pol.Decide(tc.p, "/mcp", tc.kind, tc.item)
			if d.Listed() != tc.listed || d.Conditional != tc.conditional || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("Decide = %+v\nwant listed %v conditional %v reason containing %q", d, tc.listed, tc.conditional, tc.reason)
			}
		})
	}
}

func TestFilterListConditions(t *testing.T) {
	pol := compileYAML(t, condPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}, Scopes: []string{"repo:write"}}
	out, err := pol.FilterList(eng, "/mcp", KindTool, []byte(`{"tools":[{"name":"github__create_issue"},{"name":"github__delete_repo"},{"name":"fs__read_file"},{"name":"fs__write_x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// create_issue: its deny depends on the arguments; fs__read_file: its
	// allow does; fs__write_x: denied by a condition on a (missing) claim.
	if want := `{"tools":[{"name":"github__create_issue"},{"name":"fs__read_file"}]}`; string(out) != want {
		t.Errorf("got %s\nwant %s", out, want)
	}
}

func TestConditionCompileErrors(t *testing.T) {
	_, err := Compile(&config.Policy{Default: "deny", Rules: []*config.PolicyRule{
		{When: `principal.subject == 1`, Allow: []string{"*"}},
		{When: `name`, Allow: []string{"*"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "policy.rules[0].when: found no matching overload") ||
		!strings.Contains(err.Error(), "policy.rules[1].when: the expression is of type string, not bool") {
		t.Errorf("Compile: %v", err)
	}
}

// TestConditionsCompiledOncePerText checks that rules with the same
// condition share one compiled condition, judged for each rule alike, and
// that a bad one is reported for every rule that has it.
func TestConditionsCompiledOncePerText(t *testing.T) {
	const when = `arguments.?limit.orValue(0) <= 100`
	pol, err := Compile(&config.Policy{Default: "deny", Rules: []*config.PolicyRule{
		{When: when, Match: &config.PolicyMatch{Groups: []string{"a"}}, Allow: []string{"a__*"}},
		{When: when, Match: &config.PolicyMatch{Groups: []string{"b"}}, Allow: []string{"b__*"}},
		{When: `"x" in principal.groups`, Allow: []string{"c__*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if pol.rules[0].when != pol.rules[1].when || pol.rules[0].when == pol.rules[2].when {
		t.Errorf("conditions %p %p %p: want the first two shared", pol.rules[0].when, pol.rules[1].when, pol.rules[2].when)
	}
	for _, tc := range []struct {
		groups []string
		name   string
		args   string
		want   int // deciding rule, -1: denied by default
	}{
		{[]string{"a"}, "a__x", `{"limit":5}`, 0},
		{[]string{"b"}, "b__x", `{"limit":5}`, 1},
		{[]string{"b"}, "b__x", `{"limit":500}`, -1},
		{[]string{"a", "b"}, "a__x", `{"limit":500}`, -1},
	} {
		d := pol.DecideCall(Principal{Groups: tc.groups}, "/mcp", KindTool, tc.name, json.RawMessage(tc.args))
		if d.Rule != tc.want || d.Allowed != (tc.want >= 0) {
			t.Errorf("DecideCall(%v, %s, %s) = %+v, want rule %d", tc.groups, tc.name, tc.args, d, tc.want)
		}
	}
	_, err = Compile(&config.Policy{Default: "deny", Rules: []*config.PolicyRule{
		{When: `name`, Allow: []string{"*"}},
		{When: `name`, Allow: []string{"*"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "policy.rules[0].when: the expression is of type string") ||
		!strings.Contains(err.Error(), "policy.rules[1].when: the expression is of type string") {
		t.Errorf("Compile: %v", err)
	}
}

func TestConditionCostLimitFailsClosed(t *testing.T) {
	// Quadratic work over a large argument: stopped by the cost limit.
	pol := compileYAML(t, `
policy:
  default: deny
  rules:
    - when: 'arguments.items.all(x, arguments.items.all(y, x != y || x == y))'
      allow: ["tool:fs__*"]
    - when: 'arguments.items.exists(x, arguments.items.exists(y, x == "deny" && y == "deny"))'
      deny: ["tool:fs__*"]
    - match: {api_keys: [ci]}
      allow: ["tool:fs__*"]
`)
	items := make([]string, 3000)
	for i := range items {
		items[i] = "x"
	}
	args, _ := json.Marshal(map[string]any{"items": items})
	d := pol.DecideCall(Principal{}, "/mcp", KindTool, "fs__read", args)
	if d.Allowed || d.Rule != 1 || !strings.Contains(d.Reason, "the condition failed, so the deny holds") {
		t.Errorf("DecideCall = %+v, want denied by rule 1 on an evaluation error", d)
	}
	// Small arguments: rule 0 allows, rule 1 does not deny.
	d = pol.DecideCall(Principal{}, "/mcp", KindTool, "fs__read", json.RawMessage(`{"items":["a","b"]}`))
	if !d.Allowed || d.Rule != 0 {
		t.Errorf("DecideCall = %+v, want allowed by rule 0", d)
	}
}

func TestParseArguments(t *testing.T) {
	for in, ok := range map[string]bool{
		``: true, ` null `: true, `{}`: true, `{"a":{"b":[1,2,{"c":null}]}}`: true,
		`[]`: false, `"x"`: false, `{"a":1,"a":2}`: false, `{"a":{"b":1,"b":1}}`: false,
		`{"a":1}x`: false, `{"a":`: false, `{"n":1e999}`: false,
		`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`: false,
		// The nesting bound: maxJSONDepth levels below the object, no more.
		`{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`:     true,
		`{"a":` + strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1) + `}`: false,
		`{"a":"\u00e9","b":[1.5,-2e3,true,false,null]}`:                                           true,
		`{"a\u0062":1,"ab":2}`: false, // the same key, escaped
		`{"a":1,}`:             false,
	} {
		_, err := parseArguments(json.RawMessage(in), nil)
		if (err == nil) != ok {
			t.Errorf("parseArguments(%.40q) error = %v, want ok %v", in, err, ok)
		}
	}
	m, err := parseArguments(json.RawMessage(`{"n":5,"s":"x","l":[true]}`), nil)
	if err != nil || m["n"] != 5.0 || m["s"] != "x" {
		t.Errorf("parseArguments = %v, %v", m, err)
	}
}

// TestParseArgumentMembers: decoding only the members conditions read
// gives those members as parseArguments does, and refuses what it refuses
// but for a value no condition reads.
func TestParseArgumentMembers(t *testing.T) {
	keys := []string{"a", "n", "s", "e", "u", "o"}
	for _, tc := range []struct {
		in         string
		onlyUnread bool // parseArguments refuses it for a member outside keys
	}{
		{``, false}, {` null `, false}, {`{}`, false}, {`[]`, false}, {`"x"`, false},
		{` { "a" : 1 , "b" : 2 } `, false},
		{`{"a":1,"a":2}`, false}, {`{"x":{"b":1,"b":1}}`, false}, {`{"a":1}x`, false}, {`{"a":`, false},
		{`{"n":1e999}`, false}, {`{"zz":1e999}`, true}, {`{"n":-0.5e-3,"s":"plain","e":"\u00e9\n","u":"\ud800"}`, false},
		{`{"a":true,"n":false,"s":null,"o":{"p":[1,"x",{"q":null}]}}`, false},
		{"{\"s\":\"bad \xff utf-8\"}", false},
		{`{"a\u0062":1,"ab":2}`, false},
		{`{"x":` + strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1) + `}`, false},
	} {
		whole, werr := parseArguments(json.RawMessage(tc.in), nil)
		got, err := parseArgumentMembers(json.RawMessage(tc.in), keys, nil)
		if tc.onlyUnread {
			if werr == nil || err != nil {
				t.Errorf("%.40q: parseArguments error %v, parseArgumentMembers error %v; want only the first", tc.in, werr, err)
			}
			continue
		}
		if (err == nil) != (werr == nil) {
			t.Errorf("%.40q: error %v, parseArguments' %v", tc.in, err, werr)
			continue
		}
		want := map[string]any{}
		for k, v := range whole {
			if slices.Contains(keys, k) {
				want[k] = v
			}
		}
		if whole == nil {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.40q: members %#v, want %#v", tc.in, got, want)
		}
	}
}

// TestArgumentsDecodedAsRead: a policy decodes the members of a call's
// arguments its conditions read, or the whole when one reads it whole;
// a value outside them cannot fail a condition, one inside still does.
func TestArgumentsDecodedAsRead(t *testing.T) {
	members := compileYAML(t, `
policy:
  default: deny
  rules:
    - {when: 'arguments.a == 1', allow: ["tool:fs__*"]}
    - {when: 'arguments.?b.orValue(0) == 2', deny: ["tool:fs__*"]}
`)
	if !slices.Equal(members.argKeys, []string{"a", "b"}) || members.argsWhole {
		t.Errorf("keys %q, whole %v", members.argKeys, members.argsWhole)
	}
	whole := compileYAML(t, `
policy:
  default: deny
  rules:
    - {when: 'arguments.a == 1', allow: ["tool:fs__*"]}
    - {when: 'size(arguments) > 3', deny: ["tool:fs__*"]}
`)
	if !whole.argsWhole {
		t.Error("size(arguments): not decoded whole")
	}
	for _, tc := range []struct {
		pol   *Policy
		args  string
		allow bool
	}{
		{members, `{"a":1,"z":1e999}`, true}, // z is read by no condition
		{members, `{"a":1e999}`, false},      // a is: the allow fails, closed
		{members, `{"a":1,"b":2}`, false},
		{members, `{"a":1,"a":1}`, false},
		{whole, `{"a":1,"z":1e999}`, false}, // all of it is read
		{whole, `{"a":1,"x":1,"y":1,"z":1}`, false},
		{whole, `{"a":1,"x":1}`, true},
	} {
		if d := tc.pol.DecideCall(Principal{}, "/mcp", KindTool, "fs__read", json.RawMessage(tc.args)); d.Allowed != tc.allow {
			t.Errorf("DecideCall(%s) = %+v, want allowed %v", tc.args, d, tc.allow)
		}
	}
}

// TestListerAgreesWithDecide: a Lister, which judges a condition that does
// not read the name once per kind, decides every name of a list as Decide
// does, whatever the order, for conditions on the name and off it, that
// hold, fail and fail to evaluate.
func TestListerAgreesWithDecide(t *testing.T) {
	pol := compileYAML(t, condPolicy)
	names := []string{"github__delete_branch", "fs__read_file", "fs__write_x", "github__list_issues", "fs__read", "x", "github__create_issue", "fs__read_file"}
	for _, p := range []Principal{
		{Subject: "eve", Groups: []string{"eng"}},
		{Subject: "root", Groups: []string{"admin"}},
		{Subject: "rita", Claims: map[string]any{"department": "research"}},
		{Subject: "sam", Claims: map[string]any{"department": "sales"}},
		{Subject: "bob@contractor.example", Groups: []string{"eng", "admin"}},
		{Subject: "odd", Claims: map[string]any{"f": func() {}}}, // claims that fail every condition
	} {
		for _, route := range []string{"/mcp", "/mcp/fs"} {
			l := pol.Lister(p, route)
			for _, kind := range []string{KindTool, KindPrompt, KindTool} {
				for _, n := range names {
					if got, want := l.Decide(kind, n), pol.Decide(p, route, kind, n); !reflect.DeepEqual(got, want) {
						t.Errorf("%s on %s, %s %s: Lister %+v, Decide %+v", p.Subject, route, kind, n, got, want)
					}
				}
			}
		}
	}
}

// TestArgumentCaseVariantsRefused: a case variant of an argument member a
// condition selects (at any depth of the selection) is what a tool that
// matches names case-insensitively reads for it; the condition cannot see
// it, so the call is refused rather than judged without it. Members no
// condition reads keep their spelling freely.
func TestArgumentCaseVariantsRefused(t *testing.T) {
	pol := compileYAML(t, `
policy:
  default: allow
  rules:
    - when: 'arguments.?repo.orValue("") == "evil/x"'
      deny: ["gh__*"]
    - when: 'has(arguments.opts) && has(arguments.opts.path) && arguments.opts.path.startsWith("/etc")'
      deny: ["fs__*"]
`)
	for _, tc := range []struct {
		tool, args string
		allow      bool
	}{
		{"gh__push", `{"repo":"acme/x"}`, true},
		{"gh__push", `{"repo":"evil/x"}`, false},
		{"gh__push", `{"Repo":"evil/x"}`, false},
		{"gh__push", `{"repo":"acme/x","REPO":"evil/x"}`, false},
		{"gh__push", `{"rep\u212a":"evil/x"}`, true}, // no fold of "repo"
		{"gh__push", `{"repo":"acme/x","Branch":"main","branch":"dev"}`, true},
		// The set is the policy's: any condition's members are checked.
		{"gh__push", `{"repo":"acme/x","OPTS":{}}`, false},
		{"fs__read", `{"opts":{"path":"/tmp/a"}}`, true},
		{"fs__read", `{"opts":{"Path":"/etc/shadow"}}`, false},
		{"fs__read", `{"Opts":{"path":"/etc/shadow"}}`, false},
		{"fs__read", `{"opts":{"path":"/tmp/a","mode":"r","Mode":"w"}}`, true},
	} {
		d := pol.DecideCall(Principal{Subject: "s"}, "/mcp", KindTool, tc.tool, json.RawMessage(tc.args))
		if d.Allowed != tc.allow {
			t.Errorf("%s %s: %+v, want allowed %v", tc.tool, tc.args, d, tc.allow)
		}
		if !tc.allow && !strings.Contains(tc.args, `"repo":"evil/x"`) && !strings.Contains(d.Reason, "case variant") {
			t.Errorf("%s %s: reason %q does not name the case variant", tc.tool, tc.args, d.Reason)
		}
	}
}
