package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// curationUpstream is a go-sdk server whose add tool records the
// arguments it was called with, raw, and a secret tool policy denies.
// add requires mode, which curation defaults: the route must not list it
// as required.
type curationUpstream struct {
	url string
	mu  sync.Mutex
	got []string
}

func (u *curationUpstream) calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.got)
}

func startCurationUpstream(t *testing.T) *curationUpstream {
	t.Helper()
	u := &curationUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "cu", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the text back.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "add", Description: "Add.", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"mode":{"type":"string"},"debug":{"type":"boolean"}},"required":["a","b","mode"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.got = append(u.got, string(req.Params.Arguments))
			u.mu.Unlock()
			var a struct{ A, B float64 }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(a.A + a.B)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "secret", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "leaked"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

const curationYAML = `
listen: 127.0.0.1:0
upstreams:
  up:
    url: %s
    curate:
      - tool: add
        parameters:
          mode: {default: fast, describe: How to add.}
policy:
  default: allow
  rules:
    - deny: [up__secret]
    - deny: [up__add]   # judged on the arguments that run: b is fixed to 10
      when: '!has(arguments.b) || arguments.b != 10'
audit: {output: %s, include_arguments: true}
routes:
  - path: /mcp
    tools:
      curate:
        - tool: up__echo
          rename: say
          description: {replace: Repeat the given text.}
        - tool: up__add
          parameters:
            b: {fixed: 10}
            debug: {hide: true}
        - tool: up__secret
          rename: gem
`

// Through the gateway over HTTP, a session client and a 2026-07-28
// client both see the curated catalog and call it by its curated names.
func TestCurationEndToEnd(t *testing.T) {
	up := startCurationUpstream(t)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(curationYAML, up.url, auditPath))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lists []string
	for _, version := range []string{"2025-06-18", ""} {
		cs := gatewaytest.Connect(t, base+"/mcp", nil, version)
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if got := strings.Join(names, ","); got != "up__add,say" {
			t.Fatalf("%s: tools = %s, want up__add,say (up__secret denied by policy under its upstream name)", version, got)
		}
		b, _ := json.Marshal(res.Tools)
		lists = append(lists, string(b))
		for _, tool := range res.Tools {
			schema, _ := json.Marshal(tool.InputSchema)
			switch tool.Name {
			case "say":
				if tool.Description != "Repeat the given text." {
					t.Errorf("say description = %q", tool.Description)
				}
			case "up__add":
				want := `{"properties":{"a":{"type":"number"},"mode":{"default":"fast","description":"How to add.","type":"string"}},"required":["a"],"type":"object"}`
				if string(schema) != want {
					t.Errorf("add schema = %s\nwant %s", schema, want)
				}
			}
		}

		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"text": "hi"}})
		if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != "hi" {
			t.Fatalf("%s: say: %v %+v", version, err, r)
		}
		// The old name of a tool the caller sees is refused naming the
		// new one; up__secret (renamed gem) is denied by the policy, so
		// none of its names tells the caller more than its list: each is
		// refused as unknown under the name the caller sent.
		for _, old := range []string{"up__echo", "echo"} {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: old, Arguments: map[string]any{"text": "hi"}})
			if want := fmt.Sprintf(`tool %q is offered on this route as "say"; call it by that name`, old); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: calling %s: %v, want %s", version, old, err, want)
			}
		}
		for _, hidden := range []string{"up__secret", "secret", "gem"} {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: hidden, Arguments: map[string]any{"text": "hi"}})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown tool %q:", hidden)) || strings.Contains(err.Error(), "offered") {
				t.Errorf("%s: calling %s: %v, want unknown tool, naming nothing else", version, hidden, err)
			}
		}
		before := len(up.calls())
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__add", Arguments: map[string]any{"a": 5}})
		if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != "15" {
			t.Fatalf("%s: add {a:5}: %v %+v", version, err, r)
		}
		calls := up.calls()
		if len(calls) != before+1 || calls[before] != `{"a":5,"b":10,"mode":"fast"}` {
			t.Fatalf("%s: upstream got %q, want the fixed b and the default mode", version, calls[before:])
		}
		for _, args := range []map[string]any{{"a": 5, "b": 1}, {"a": 5, "B": 1}, {"a": 5, "debug": true}, {"a": 5, "DEBUG": true}} {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__add", Arguments: args}); err == nil || !strings.Contains(err.Error(), "may not be sent") {
				t.Errorf("%s: add %v: %v, want refused", version, args, err)
			}
		}
		if n := len(up.calls()); n != before+1 {
			t.Errorf("%s: %d refused calls reached the upstream", version, n-before-1)
		}
	}
	// Audit carries both names, and the arguments that ran.
	var said, added bool
	for _, r := range gatewaytest.AuditRecords(t, auditPath) {
		switch {
		case r["name"] == "up__echo" && r["curated_name"] == "say":
			said = true
		case r["name"] == "up__add" && r["outcome"] == "ok":
			args, _ := json.Marshal(r["arguments"])
			added = strings.Contains(string(args), `"b":10`)
		}
	}
	if !said || !added {
		t.Errorf("audit: say with both names %v, add with the fixed b %v", said, added)
	}
	if lists[0] != lists[1] {
		t.Errorf("a session and a 2026-07-28 client see different catalogs:\n%s\n%s", lists[0], lists[1])
	}
}

// A reload that changes only a route's curation tells the route's
// sessions tools/list_changed, and their next list is curated anew.
func TestCurationReloadListChanged(t *testing.T) {
	alphaURL, _ := gatewaytest.SDKUpstream(t, "alpha")
	base := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\nroutes:\n  - path: /mcp\n", alphaURL)
	gw, url, _ := gatewaytest.StartReloadable(t, base)
	changed := make(chan struct{}, 16)
	cs := gatewaytest.Connect(t, url+"/mcp", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}, "2025-06-18")
	if names := gatewaytest.SDKToolNames(t, cs); !slices.Contains(names, "alpha__echo") {
		t.Fatalf("tools before: %v", names)
	}
	gatewaytest.DrainSignals(changed)
	if err := gw.Reload(gatewaytest.ParseConfig(t, base+"    tools: {curate: [{tool: alpha__echo, rename: say}]}\n")); err != nil {
		t.Fatalf("reload: %v", err)
	}
	gatewaytest.WaitSignal(t, changed, "tools/list_changed after a curation change")
	if names := gatewaytest.SDKToolNames(t, cs); !slices.Contains(names, "say") || slices.Contains(names, "alpha__echo") {
		t.Fatalf("tools after: %v", names)
	}
}

// The same with the real npm server-everything: curated names listed and
// callable, the old ones unknown; get-sum's b fixed (absent from the
// schema, applied, refused when sent); every tool the rules do not touch
// identical to the uncurated route's, and the curated ones differing only
// in what the rules change.
func TestCurationServerEverything(t *testing.T) {
	cmd := gatewaytest.ServerEverything(t)
	argv, _ := json.Marshal(cmd)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  ev: {command: %s}
routes:
  - path: /raw
  - path: /mcp
    tools:
      curate:
        - tool: ev__echo
          rename: shout
          description: {replace: Say it back.}
        - tool: ev__get-sum
          annotations: {readOnlyHint: false}
          parameters:
            b: {fixed: 10}
`, argv))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byName := func(cs *mcp.ClientSession) map[string]*mcp.Tool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool
		}
		return out
	}
	raw := byName(gatewaytest.Connect(t, base+"/raw", nil, "2025-06-18"))
	for _, version := range []string{"2025-06-18", ""} {
		cs := gatewaytest.Connect(t, base+"/mcp", nil, version)
		cur := byName(cs)
		if cur["shout"] == nil || cur["ev__echo"] != nil || len(cur) != len(raw) {
			t.Fatalf("%s: curated tools %d, raw %d; shout listed %v", version, len(cur), len(raw), cur["shout"] != nil)
		}
		for name, tool := range raw {
			got := cur[name]
			switch name {
			case "ev__echo":
				got = cur["shout"]
				want := *tool
				want.Name, want.Description = "shout", "Say it back."
				tool = &want
			case "ev__get-sum":
				want := *tool
				ann := *tool.Annotations
				ann.ReadOnlyHint = false
				want.Annotations = &ann
				var schema map[string]any
				b, _ := json.Marshal(tool.InputSchema)
				_ = json.Unmarshal(b, &schema)
				delete(schema["properties"].(map[string]any), "b")
				schema["required"] = slices.DeleteFunc(schema["required"].([]any), func(v any) bool { return v == "b" })
				want.InputSchema = schema
				tool = &want
			}
			a, _ := json.Marshal(tool)
			b, _ := json.Marshal(got)
			if string(a) != string(b) {
				t.Errorf("%s: %s\n got %s\nwant %s", version, name, b, a)
			}
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"message": "hi"}})
		if err != nil || r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "hi") {
			t.Fatalf("%s: shout: %v %+v", version, err, r)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "hi"}}); err == nil {
			t.Errorf("%s: ev__echo answered under its old name", version)
		}
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-sum", Arguments: map[string]any{"a": 5}})
		if err != nil || r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "15") {
			t.Fatalf("%s: get-sum {a:5}: %v %+v", version, err, r)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__get-sum", Arguments: map[string]any{"a": 5, "b": 1}}); err == nil || !strings.Contains(err.Error(), "fixed") {
			t.Errorf("%s: get-sum with b: %v, want refused", version, err)
		}
	}
}

// Issue 34: the per-name metrics carry the route's own name for a tool
// (what policy, pinning and audit name); mcpgw_curated_tool_names maps
// the curated name callers use to it, so both names are in the metrics
// (joined on route and upstream_tool), and a reload that drops the
// rename drops the series.
func TestCuratedNamesInMetrics(t *testing.T) {
	up := startCurationUpstream(t)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	gw, base, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(curationYAML, up.url, auditPath)+"admin: {listen: 127.0.0.1:0}\n", gateway.Options{})
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	mfs, _ := gatewaytest.Scrape(t, admin)
	for _, c := range []struct {
		tool, upstream string
	}{{"say", "up__echo"}, {"gem", "up__secret"}} {
		if v, ok := gatewaytest.Sample(mfs, "mcpgw_curated_tool_names", "route", "/mcp", "tool", c.tool, "upstream_tool", c.upstream); !ok || v != 1 {
			t.Errorf("mcpgw_curated_tool_names{tool=%q, upstream_tool=%q} = %v (present %v), want 1", c.tool, c.upstream, v, ok)
		}
	}
	if v, ok := gatewaytest.Sample(mfs, "mcpgw_tool_calls_total", "route", "/mcp", "tool", "up__echo", "outcome", "ok"); !ok || v != 1 {
		t.Errorf("mcpgw_tool_calls_total{tool=up__echo} (the call to say) = %v (present %v), want 1", v, ok)
	}
	// A reload without the renames leaves no series of them.
	next, err := config.Parse("test.yaml", []byte(fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  up: {url: %s}\naudit: {output: %s, include_arguments: true}\nadmin: {listen: 127.0.0.1:0}\n", up.url, auditPath)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	mfs, _ = gatewaytest.Scrape(t, admin)
	if v, ok := gatewaytest.Sample(mfs, "mcpgw_curated_tool_names", "route", "/mcp", "tool", "say", "upstream_tool", "up__echo"); ok {
		t.Errorf("after a reload without the rename, mcpgw_curated_tool_names{tool=say} = %v is still exported", v)
	}
}

// The refusal of a renamed tool's old name names the new one only when
// the caller's list shows it: not for a tool pinning has not approved
// (sly__secret), nor for one the upstream does not list (sly__ghost) —
// those are answered as a name nothing has, and nothing is forwarded.
func TestCurationOldNameNamesOnlyListedTools(t *testing.T) {
	up := newSlyUpstream(t, false)
	lock, err := policy.BuildLock(map[string]json.RawMessage{"sly": json.RawMessage(`[{"name":"safe","inputSchema":{"type":"object"}}]`)})
	if err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(t.TempDir(), "tools.lock.json")
	if err := os.WriteFile(lockFile, lock.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  sly: {url: %s}
policy:
  default: allow
  pinning: {mode: enforce, lock_file: %q}
routes:
  - path: /mcp
    tools:
      curate:
        - {tool: sly__safe, rename: ok}
        - {tool: sly__secret, rename: hush}
        - {tool: sly__ghost, rename: boo}
`, up.url, lockFile))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	if got := gatewaytest.ToolNames(t, c); !slices.Equal(got, []string{"ok"}) {
		t.Fatalf("listed %v, want only ok (sly__safe, the approved one)", got)
	}
	call := func(name string) *jsonrpc.Error {
		return gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`))
	}
	if e := call("sly__safe"); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, `tool "sly__safe" is offered on this route as "ok"; call it by that name`) {
		t.Errorf("sly__safe: %+v, want it named as ok", e)
	}
	madeUp := call("sly__madeup")
	for _, hidden := range []string{"sly__secret", "sly__ghost", "hush", "boo"} {
		if e := call(hidden); !sameAnswer(madeUp, "sly__madeup", e, hidden) {
			t.Errorf("%s: %+v; want the made-up name's answer %+v", hidden, e, madeUp)
		}
	}
	if ran := up.sawRun(); len(ran) != 0 {
		t.Errorf("the upstream ran %v; no refused call may reach it", ran)
	}
}
