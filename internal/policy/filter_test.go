package policy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestFilterListGolden(t *testing.T) {
	pol := compileYAML(t, testPolicy)
	eng := Principal{Subject: "carol", Groups: []string{"eng"}, Scopes: []string{"repo:read"}}
	ci := Principal{Subject: "ci-bot", APIKey: "ci"}
	for _, tc := range []struct {
		in, out string
		p       Principal
		kind    string
	}{
		// create_issue stays listed though repo:write is missing (step-up);
		// delete_repo and write_file are denied; items without a name go.
		{"tools.in.json", "tools.eng.json", eng, KindTool},
		{"tools.in.json", "tools.ci.json", ci, KindTool},
		{"resources.in.json", "resources.ci.json", ci, KindResource},
		// Everything allowed: the very same bytes come back.
		{"prompts.in.json", "prompts.eng.json", eng, KindPrompt},
	} {
		t.Run(tc.out, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata/filter", tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := pol.FilterList(tc.p, "/mcp", tc.kind, in)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			golden := filepath.Join("testdata/filter", tc.out)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			assertKeptBytes(t, in, got)
		})
	}
}

// assertKeptBytes checks that every member and every kept item of out is
// byte-for-byte what in had.
func assertKeptBytes(t *testing.T, in, out []byte) {
	t.Helper()
	inFields, _ := rawjson.Fields(in)
	outFields, err := rawjson.Fields(out)
	if err != nil || len(inFields) != len(outFields) {
		t.Fatalf("members changed: %v", err)
	}
	for i, f := range inFields {
		g := outFields[i]
		if g.Key != f.Key {
			t.Fatalf("member %d: %q became %q", i, f.Key, g.Key)
		}
		items, err := rawjson.Elements(f.Value)
		if err != nil {
			if !bytes.Equal(f.Value, g.Value) {
				t.Errorf("member %q changed: %s -> %s", f.Key, f.Value, g.Value)
			}
			continue
		}
		kept, _ := rawjson.Elements(g.Value)
		j := 0
		for _, it := range items {
			if j < len(kept) && bytes.Equal(kept[j], it) {
				j++
			}
		}
		if j != len(kept) {
			t.Errorf("member %q: kept items are not a byte-identical subsequence", f.Key)
		}
	}
}

func TestFilterListUnchangedIsSameSlice(t *testing.T) {
	pol := compileYAML(t, "policy: {default: allow}")
	in := []byte(`{"tools":[ {"name":"a"} ,{"name":"b"}],"nextCursor":"x"}`)
	out, err := pol.FilterList(Principal{}, "/mcp", KindTool, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Errorf("FilterList = %s, %v; want the input bytes", out, err)
	}
}

func TestFilterListBareArray(t *testing.T) {
	pol := compileYAML(t, testPolicy)
	ci := Principal{Subject: "ci-bot", APIKey: "ci"}
	out, err := pol.FilterList(ci, "/mcp", KindTool, []byte(`[{"name":"fs__a"}, {"name":"github__b"}, {"name":"fs__write_c"}]`))
	if err != nil || string(out) != `[{"name":"fs__a"}]` {
		t.Errorf("got %s, %v", out, err)
	}
	out, err = pol.FilterList(ci, "/mcp", KindResource, []byte(`[{"uri":"fs+file:///pub/x"},{"uriTemplate":"fs+file:///pub/{p}"},{"uri":"other"}]`))
	if err != nil || string(out) != `[{"uri":"fs+file:///pub/x"},{"uriTemplate":"fs+file:///pub/{p}"}]` {
		t.Errorf("got %s, %v", out, err)
	}
}

func TestFilterListErrors(t *testing.T) {
	pol := compileYAML(t, "policy: {default: allow}")
	for _, in := range []string{`{"tools":{}}`, `{"tools":[}`, `"x"`, `{"tools":[{"name":"x"}]`, ``} {
		if out, err := pol.FilterList(Principal{}, "/mcp", KindTool, []byte(in)); err == nil {
			t.Errorf("FilterList(%q) = %s, want an error", in, out)
		}
	}
	if _, err := pol.FilterList(Principal{}, "/mcp", "tools", []byte(`{}`)); err == nil {
		t.Error("unknown kind accepted")
	}
}

// fuzzPolicy is testPolicy with conditions on principals, claims, names
// and arguments, on allow and on deny rules.
const fuzzPolicy = testPolicy + `
    - match: {groups: [eng]}
      when: '!arguments.repo.startsWith("acme/")'
      deny: ["github__*"]
    - when: 'principal.claims.dept == "research" || arguments.force == true'
      allow: ["fs__*"]
      deny: ["fs__drop_*"]
    - when: '"admin" in principal.groups && arguments.?dry_run.orValue(false) == true'
      allow: ["*"]
    - when: 'name.size() < 12 && has(arguments.x) && arguments.x > 3.5'
      allow: ["prompt:*", "resource:*"]
    - when: 'principal.subject.startsWith(arguments.?prefix.orValue("zz")) && kind != "prompt"'
      deny: ["*__x*"]
    - when: 'route == "/mcp/fs" && principal.subject == "" && principal.client_id == "console"'
      deny: ["tool:*"]
    - when: 'principal.claims.dept.startsWith("r")'
      deny: ["prompt:r*"]
`

// FuzzListCallAgree checks that a filtered tools/list (prompts, resources)
// and per-call decisions never disagree:
//
//   - an item is listed exactly when Decide says Listed;
//   - whenever DecideCall allows a call (or allows it but for missing
//     scopes), the name is listed: a hidden name is never callable;
//   - when Decide's answer did not rest on a condition over the arguments
//     (Conditional is false), DecideCall gives the same answer for any
//     arguments. Only a condition on the arguments lets a listed name's
//     call be denied.
func FuzzListCallAgree(f *testing.F) {
	pol := compileYAML(f, fuzzPolicy)
	f.Add("carol", "eng", "repo:read", "", "/mcp", "github__create_issue", "fs__write_x", "fs+file:///pub/a", `{"repo":"acme/x"}`, "")
	f.Add("alice", "", "", "ci", "/mcp/fs", "github__delete_branch", "read_file", "x", `{"repo":"evil/x"}`, "research")
	f.Add("bob", "eng", "admin", "", "/mcp/fs", `we"ird\name`, "", "prompt:x", `{"dry_run":true}`, "")
	f.Add("", "admin", "", "", "/mcp/fs", "fs__drop_all", "fs__read", "rx", `{"force":true,"dry_run":true,"x":4}`, "r&d")
	f.Add("zed", "eng", "", "", "/mcp", "a__xb", "github__x", "p", `{"prefix":"z","x":1}`, "")
	f.Add("carol", "eng", "", "", "/mcp", "github__get", "fs__a", "b", `{"repo":"acme/a","repo":"evil/b"}`, "")
	f.Add("carol", "eng", "", "", "/mcp", "github__get", "fs__a", "b", `[1]`, "x")
	f.Fuzz(func(t *testing.T, subject, group, scope, apiKey, route, n1, n2, n3, args, dept string) {
		for _, n := range []string{n1, n2, n3} {
			if !utf8.ValidString(n) {
				return // JSON cannot carry it; decoders see U+FFFD instead
			}
		}
		p := Principal{Subject: subject, Groups: []string{group}, Scopes: []string{scope}, APIKey: apiKey, ClientID: "console"}
		if dept != "" {
			p.Claims = map[string]any{"dept": dept}
		}
		var rawArgs json.RawMessage
		if args != "" {
			rawArgs = json.RawMessage(args)
		}
		for _, kind := range []string{KindTool, KindPrompt, KindResource} {
			names := []string{n1, n2, n3}
			var items []string
			for _, n := range names {
				b, _ := json.Marshal(n)
				key := "name"
				if kind == KindResource {
					key = "uri"
				}
				items = append(items, fmt.Sprintf(`{%q:%s}`, key, b))
			}
			arr := map[string]string{KindTool: "tools", KindPrompt: "prompts", KindResource: "resources"}[kind]
			result := []byte(fmt.Sprintf(`{"%s":[%s]}`, arr, strings.Join(items, ",")))
			out, err := pol.FilterList(p, route, kind, result)
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]bool{}
			raw, _ := rawjson.Get(out, arr)
			els, _ := rawjson.Elements(raw)
			key := "name"
			if kind == KindResource {
				key = "uri"
			}
			for _, el := range els {
				n, _ := rawjson.GetString(el, key)
				listed[n] = true
			}
			for _, n := range names {
				d := pol.Decide(p, route, kind, n)
				if listed[n] != d.Listed() {
					t.Fatalf("%s %q: listed %v, but Decide says %+v", kind, n, listed[n], d)
				}
				for _, a := range []json.RawMessage{rawArgs, nil} {
					c := pol.DecideCall(p, route, kind, n, a)
					if c.Conditional {
						t.Fatalf("DecideCall set Conditional: %+v", c)
					}
					if (c.Allowed || c.Listed()) && !listed[n] {
						t.Fatalf("%s %q with arguments %s: callable (%+v) but hidden (%+v)", kind, n, a, c, d)
					}
					if !d.Conditional && (c.Allowed != d.Allowed || !slices.Equal(c.MissingScopes, d.MissingScopes)) {
						t.Fatalf("%s %q with arguments %s: no condition on the arguments, yet DecideCall %+v differs from Decide %+v", kind, n, a, c, d)
					}
				}
			}
		}
	})
}
