package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const explainConfig = `
upstreams:
  github: {url: "https://api.example.com/mcp"}
  fs: {command: [fs-server]}
routes:
  - path: /mcp
  - {path: /mcp/fs, upstreams: [fs], prefix: false}
auth:
  api_keys:
    - {name: ci, key: secret, principal: ci-bot, groups: [automation]}
policy:
  default: deny
  tool_scopes:
    "github__create_*": [repo:write]
  rules:
    - match: {groups: [eng]}
      allow: ["github__*", "fs__read_*", "prompt:*"]
      deny: ["github__delete_*"]
    - match: {groups: [automation]}
      allow: ["fs__*", "resource:fs+file:///pub/*"]
    - match: {routes: [/mcp/fs]}
      allow: ["read_file"]
`

// A recorded catalog: a JSON-RPC response to tools/list plus, in another
// file, an object with prompts and resources.
const toolsCatalog = `{"jsonrpc":"2.0","id":1,"result":{"tools":[
 {"name":"github__create_issue","inputSchema":{"type":"object"}},
 {"name":"github__delete_repo","inputSchema":{"type":"object"}},
 {"name":"fs__read_file","inputSchema":{"type":"object"}},
 {"name":"fs__write_file","inputSchema":{"type":"object"}}],"nextCursor":"c1"}}`

const mixedCatalog = `{"prompts":[{"name":"github__summarize"}],
"resources":[{"uri":"fs+file:///pub/a.md"},{"uri":"fs+file:///etc/passwd"}],
"resourceTemplates":[{"uriTemplate":"fs+file:///pub/{p}"}]}`

func writeFiles(t *testing.T) (cfg, tools, mixed string) {
	t.Helper()
	dir := t.TempDir()
	cfg, tools, mixed = filepath.Join(dir, "c.yaml"), filepath.Join(dir, "tools.json"), filepath.Join(dir, "mixed.json")
	for path, data := range map[string]string{cfg: explainConfig, tools: toolsCatalog, mixed: mixedCatalog} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, tools, mixed
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPolicyExplain(t *testing.T) {
	cfg, _, _ := writeFiles(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string
	}{
		{"allowed", []string{"--subject", "alice", "--groups", "eng", "--tool", "github__get_issue"}, 0,
			[]string{"ALLOW tool github__get_issue", "principal: subject alice groups eng", "route:     /mcp", "rule:      policy.rules[0], pattern github__*", "allowed by rule 0 (match groups [eng]): allow github__*"}},
		{"deny wins", []string{"--subject", "alice", "--groups", "eng,ops", "--tool", "github__delete_repo"}, 3,
			[]string{"DENY tool github__delete_repo", "denied by rule 0 (match groups [eng]): deny github__delete_*"}},
		{"default", []string{"--subject", "bob", "--tool", "github__get_issue"}, 3,
			[]string{"DENY tool github__get_issue", "rule:      none (policy.default: deny)", "denied by default"}},
		{"missing scope", []string{"--groups", "eng", "--scopes", "repo:read", "--tool", "github__create_issue"}, 3,
			[]string{"DENY tool github__create_issue", "scopes:    requires repo:write", "missing:   repo:write (the caller gets an insufficient_scope challenge"}},
		{"scope held", []string{"--groups", "eng", "--scopes", "repo:read,repo:write", "--tool", "github__create_issue"}, 0,
			[]string{"ALLOW tool github__create_issue"}},
		{"api key fills groups", []string{"--api-key", "ci", "--resource", "fs+file:///pub/x"}, 0,
			[]string{"ALLOW resource fs+file:///pub/x", "principal: subject ci-bot api key ci groups automation", "rule 1"}},
		{"route", []string{"--route", "/mcp/fs", "--tool", "read_file"}, 0,
			[]string{"route:     /mcp/fs", "rule 2 (match routes [/mcp/fs])"}},
		{"prompt", []string{"--groups", "eng", "--prompt", "anything"}, 0, []string{"ALLOW prompt anything"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(append([]string{"policy", "explain", "--config", cfg}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestPolicyExplainErrors(t *testing.T) {
	cfg, _, _ := writeFiles(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("upstreams: {fs: {command: [x]}}\npolicy: {default: alow}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"policy"}, 2, "Usage"},
		{[]string{"policy", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{[]string{"policy", "explain", "--tool", "x"}, 2, "--config FILE is required"},
		{[]string{"policy", "explain", "--config", cfg}, 2, "exactly one of --tool, --prompt or --resource"},
		{[]string{"policy", "explain", "--config", cfg, "--tool", "a", "--prompt", "b"}, 2, "exactly one"},
		{[]string{"policy", "explain", "--config", cfg, "--tool", "a", "--route", "/nope"}, 2, `no route "/nope"`},
		{[]string{"policy", "explain", "--config", cfg, "--tool", "a", "--api-key", "nope"}, 2, `no API key named "nope"`},
		{[]string{"policy", "explain", "--config", bad, "--tool", "a"}, 1, `did you mean "allow"`},
		{[]string{"policy", "explain", "--config", cfg, "--tool", "a", "extra"}, 2, "unexpected argument"},
	} {
		code, _, errs := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.err)
		}
	}
	if code, out, _ := runCLI("policy", "help"); code != 0 || !strings.Contains(out, "3 denied") {
		t.Errorf("policy help: %d %s", code, out)
	}
}

func TestCatalog(t *testing.T) {
	cfg, tools, mixed := writeFiles(t)
	code, out, errs := runCLI("catalog", "--config", cfg, "--catalog", tools, "--as-subject", "alice", "--as-groups", "eng")
	// create_issue needs repo:write, which alice lacks: listed anyway so
	// her client can step up.
	want := "tool     github__create_issue\ntool     fs__read_file\n"
	if code != 0 || out != want {
		t.Errorf("exit %d\n%s\nwant\n%s\nstderr %s", code, out, want, errs)
	}

	code, out, _ = runCLI("catalog", "--config", cfg, "--catalog", tools, "--as-api-key", "ci", "--json")
	wantJSON := `{"tools":[{"name":"fs__read_file","inputSchema":{"type":"object"}},{"name":"fs__write_file","inputSchema":{"type":"object"}}],"nextCursor":"c1"}` + "\n"
	if code != 0 || out != wantJSON {
		t.Errorf("--json: exit %d\n%s\nwant\n%s", code, out, wantJSON)
	}

	code, out, _ = runCLI("catalog", "--config", cfg, "--catalog", tools, "--as-groups", "eng", "--all")
	for _, w := range []string{
		"scope tool     github__create_issue\tneeds scope repo:write",
		"deny  tool     github__delete_repo\tdenied by rule 0 (match groups [eng]): deny github__delete_*",
		"allow tool     fs__read_file\tallowed by rule 0",
		"deny  tool     fs__write_file\tdenied by default",
	} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("--all lacks %q:\n%s", w, out)
		}
	}

	code, out, _ = runCLI("catalog", "--config", cfg, "--catalog", mixed, "--as-api-key", "ci")
	want = "resource fs+file:///pub/a.md\nresource fs+file:///pub/{p}\n"
	if code != 0 || out != want {
		t.Errorf("mixed: exit %d\n%s\nwant\n%s", code, out, want)
	}

	// A bare array of prompts.
	arr := filepath.Join(t.TempDir(), "prompts.json")
	os.WriteFile(arr, []byte(`[{"name":"a"},{"name":"b"}]`), 0o644)
	code, out, _ = runCLI("catalog", "--config", cfg, "--catalog", arr, "--kind", "prompt", "--as-groups", "eng")
	if code != 0 || out != "prompt   a\nprompt   b\n" {
		t.Errorf("bare array: %d %q", code, out)
	}
	// The same array as tools: nothing is allowed to anonymous callers.
	code, out, _ = runCLI("catalog", "--config", cfg, "--catalog", arr)
	if code != 0 || out != "" {
		t.Errorf("anonymous: %d %q", code, out)
	}
}

func TestCatalogErrors(t *testing.T) {
	cfg, tools, _ := writeFiles(t)
	dir := t.TempDir()
	notJSON, noLists := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	os.WriteFile(notJSON, []byte(`{"tools":[`), 0o644)
	os.WriteFile(noLists, []byte(`{"things":[]}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"catalog", "--config", cfg}, 2, "--catalog FILE.json or --live URL is required"},
		{[]string{"catalog", "--catalog", tools}, 2, "--config FILE is required"},
		{[]string{"catalog", "--config", cfg, "--catalog", tools, "--kind", "tools"}, 2, `--kind "tools"`},
		{[]string{"catalog", "--config", cfg, "--catalog", tools, "--all", "--json"}, 2, "do not go together"},
		{[]string{"catalog", "--config", cfg, "--catalog", filepath.Join(dir, "missing.json")}, 1, "no such file"},
		{[]string{"catalog", "--config", cfg, "--catalog", notJSON}, 1, "not valid JSON"},
		{[]string{"catalog", "--config", cfg, "--catalog", noLists}, 1, "holds none of"},
	} {
		code, _, errs := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.err)
		}
	}
}
