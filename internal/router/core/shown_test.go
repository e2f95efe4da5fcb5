package core

import (
	"context"
	"encoding/json"
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
