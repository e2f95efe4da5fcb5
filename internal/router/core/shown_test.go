package core

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// Issue 37 item 4: a caller denied all of an upstream learns nothing of
// it from initialize or server/discover (its instructions, its share of
// the capability union), nor its name from an unknown-name error; and
// server/discover is not cacheScope public where lists depend on who asks.
func TestHandshakeShowsOnlyVisibleUpstreams(t *testing.T) {
	c, routes := capabilityFixture(t)
	rte := routes["/both"]
	cfg, err := config.Parse("shown.yaml", []byte(`
upstreams:
  plain: {url: http://plain.test/mcp}
  rich: {url: http://rich.test/mcp}
policy:
  default: deny
  rules:
    - match: {subjects: [alice]}
      allow: ["plain__*", "resource:plain+*"]
    - match: {subjects: [bob]}
      allow: ["*"]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if rte.Gen.Policy, err = policy.Compile(cfg.Policy); err != nil {
		t.Fatal(err)
	}
	rte.Gen.PrivateLists = true
	alice := auth.WithPrincipal(context.Background(), &auth.Principal{Subject: "alice", Issuer: "https://idp"})
	bob := auth.WithPrincipal(context.Background(), &auth.Principal{Subject: "bob", Issuer: "https://idp"})
	lists := map[string]any{"listChanged": true}

	plainOnly := map[string]any{"tools": lists, "prompts": lists, "resources": lists}
	for what, res := range map[string]json.RawMessage{
		"initialize":      c.InitializeResult(alice, rte, mcp.Version20251125),
		"server/discover": c.Discover(alice, rte),
	} {
		if got := capabilitiesOf(t, res); !reflect.DeepEqual(got, plainOnly) {
			t.Errorf("alice's %s capabilities = %v, want plain's alone %v", what, got, plainOnly)
		}
		if strings.Contains(string(res), "vault") || strings.Contains(string(res), "rich") {
			t.Errorf("alice's %s shows rich, which she may see nothing of: %s", what, res)
		}
	}
	// Bob may see both: the union and rich's instructions.
	all := map[string]any{"tools": lists, "prompts": lists, "resources": map[string]any{"subscribe": true, "listChanged": true}, "completions": map[string]any{}, "logging": map[string]any{}}
	res := c.InitializeResult(bob, rte, mcp.Version20251125)
	if got := capabilitiesOf(t, res); !reflect.DeepEqual(got, all) {
		t.Errorf("bob's initialize capabilities = %v, want %v", got, all)
	}
	if !strings.Contains(string(res), "vault") {
		t.Errorf("bob's initialize lacks rich's instructions: %s", res)
	}

	var d struct {
		CacheScope string `json:"cacheScope"`
	}
	if err := json.Unmarshal(c.Discover(bob, rte), &d); err != nil || d.CacheScope != "private" {
		t.Errorf("server/discover cacheScope = %q (%v), want private where lists depend on who asks", d.CacheScope, err)
	}

	// An unknown name's answer names no upstream of the route.
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, &auth.Principal{Subject: "alice", Issuer: "https://idp"})
	for _, name := range []string{"nosuch__x", "rich__nope", "nope"} {
		msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"`+name+`","arguments":{}}`))
		resp := c.Handle(alice, sess, msg, nil, nil)
		if resp.Error == nil {
			t.Fatalf("tools/call %s answered %s", name, resp.Result)
		}
		if strings.Contains(resp.Error.Message, `rich"`) || strings.Contains(resp.Error.Message, "rich]") || strings.Contains(resp.Error.Message, " rich ") {
			t.Errorf("tools/call %s: error names rich: %s", name, resp.Error.Message)
		}
	}
}

// A name the policy refuses is refused as unknown before the route looks
// it up: a lookup whose listing fails would answer "upstream X could not
// list", naming an upstream the caller may see nothing of and telling a
// hidden name from an unknown one.
func TestDeniedNameIsNotLookedUp(t *testing.T) {
	c, rte := listlessCore(t, `allow: ["other__*"]`)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	ctx := auth.WithPrincipal(context.Background(), p)
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, p)
	var msgs []string
	for _, name := range []string{"up__echo", "nosuch__echo"} {
		msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"`+name+`","arguments":{}}`))
		resp := c.Handle(ctx, sess, msg, nil, nil)
		if resp.Error == nil {
			t.Fatalf("tools/call %s answered %s", name, resp.Result)
		}
		msgs = append(msgs, strings.Replace(resp.Error.Message, name, "NAME", 1))
		if strings.Contains(resp.Error.Message, `upstream "up"`) {
			t.Errorf("tools/call %s: the refusal names the upstream: %s", name, resp.Error.Message)
		}
	}
	if msgs[0] != msgs[1] {
		t.Errorf("a denied name and an unknown one answer differently:\n%s\n%s", msgs[0], msgs[1])
	}
}

// listlessCore is a core over the canned upstream "up" whose tools/list
// fails with an HTTP 502 carrying upstream text, under a policy whose one
// rule, for alice, is rule.
func listlessCore(t *testing.T, rule string) (*Core, *Route) {
	t.Helper()
	canned := cannedUpstream()
	c, rte, _ := cannedCore(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			http.Error(w, "listing is down: secret-detail", http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		canned.ServeHTTP(w, r)
	}))
	cfg, err := config.Parse("listless.yaml", []byte(`
upstreams:
  up: {url: http://up.test/mcp}
policy:
  default: deny
  rules:
    - match: {subjects: [alice]}
      `+rule+`
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if rte.Gen.Policy, err = policy.Compile(cfg.Policy); err != nil {
		t.Fatal(err)
	}
	return c, rte
}

// A caller who may call the upstream, when its list cannot be had to
// check the call against, is told which upstream and the request id; the
// upstream's own text (here an HTTP body) stays in the log (issue 37
// item 3's class, on the listing path).
func TestListFailureTextStaysInLog(t *testing.T) {
	c, rte := listlessCore(t, `allow: ["up__*"]`)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	ctx := auth.WithPrincipal(context.Background(), p)
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, p)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{}}`))
	resp := c.Handle(ctx, sess, msg, nil, nil)
	if resp.Error == nil {
		t.Fatalf("tools/call answered %s with the upstream's list down", resp.Result)
	}
	if strings.Contains(resp.Error.Message, "secret-detail") || !strings.Contains(resp.Error.Message, "request id") {
		t.Errorf("the refusal should name the request id and not the upstream's text: %s", resp.Error.Message)
	}
}
