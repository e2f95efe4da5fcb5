package core

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
)

// capabilityUpstreams are two SDK servers that offer different things:
// "plain" a tool, a prompt and a resource, and nothing else (no
// subscriptions, no completions, no logging); "rich" a prompt with
// completions, a subscribable resource and logging.
func capabilityUpstreams() map[string]*sdk.Server {
	plain := sdk.NewServer(&sdk.Implementation{Name: "plain", Version: "1"}, &sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{}})
	sdk.AddTool(plain, &sdk.Tool{Name: "echo"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "plain"}}}, nil, nil
	})
	plain.AddPrompt(&sdk.Prompt{Name: "hello", Arguments: []*sdk.PromptArgument{{Name: "who"}}}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{}, nil
	})
	plain.AddResource(&sdk.Resource{URI: "file:///plain.txt", Name: "plain"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "plain"}}}, nil
	})
	rich := sdk.NewServer(&sdk.Implementation{Name: "rich", Version: "1"}, &sdk.ServerOptions{
		Instructions:       "rich: ask about the vault",
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "ld"}}}, nil
		},
	})
	rich.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who"}}}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{}, nil
	})
	rich.AddResource(&sdk.Resource{URI: "mem://rich", Name: "rich"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "rich"}}}, nil
	})
	return map[string]*sdk.Server{"plain": plain, "rich": rich}
}

// capabilityFixture is a core over plain and rich, with a route per
// upstream set: /plain, /rich and /both (prefixed).
func capabilityFixture(t *testing.T) (*Core, map[string]*Route) {
	t.Helper()
	cfg, err := config.Parse("caps_test.yaml", []byte("upstreams:\n  plain: {url: http://plain.test/mcp, timeout: 10s}\n  rich: {url: http://rich.test/mcp, timeout: 10s}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	servers := capabilityUpstreams()
	byHost := http.NewServeMux()
	for name, s := range servers {
		byHost.Handle(name+".test/", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	}
	h := host.New(cfg, host.Options{Logger: zaptest.NewLogger(t).Named("host"), HTTPClient: memhttp.Client(byHost)})
	h.Start()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	gen := &Generation{ByPath: map[string]*Route{}, MaxBody: 1 << 20}
	for path, v := range map[string]*catalog.View{
		"/plain": catalog.NewView(h, []string{"plain"}, false),
		"/rich":  catalog.NewView(h, []string{"rich"}, false),
		"/both":  catalog.NewView(h, nil, true),
	} {
		r := &Route{Path: path, View: v, Gen: gen}
		gen.Routes, gen.ByPath[path] = append(gen.Routes, r), r
	}
	c := New(h, Options{Logger: zaptest.NewLogger(t), Current: func() *Generation { return gen }, Sessions: noStored{}})
	t.Cleanup(func() { c.Close(func() {}) })
	return c, gen.ByPath
}

// capabilitiesOf decodes the capabilities member of an initialize or
// server/discover result.
func capabilitiesOf(t *testing.T, result json.RawMessage) map[string]any {
	t.Helper()
	var r struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("result %s: %v", result, err)
	}
	return r.Capabilities
}

// A route advertises the union of what its upstreams offer, in initialize
// and server/discover alike: no subscriptions, completions or logging
// where no upstream has them.
func TestRouteCapabilitiesAreTheUpstreamsUnion(t *testing.T) {
	c, routes := capabilityFixture(t)
	lists := map[string]any{"listChanged": true}
	for _, tc := range []struct {
		route string
		want  map[string]any
	}{
		{"/plain", map[string]any{"tools": lists, "prompts": lists, "resources": lists}},
		{"/rich", map[string]any{"prompts": lists, "resources": map[string]any{"subscribe": true, "listChanged": true}, "completions": map[string]any{}, "logging": map[string]any{}}},
		{"/both", map[string]any{"tools": lists, "prompts": lists, "resources": map[string]any{"subscribe": true, "listChanged": true}, "completions": map[string]any{}, "logging": map[string]any{}}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			rte := routes[tc.route]
			if got := capabilitiesOf(t, c.InitializeResult(context.Background(), rte, mcp.Version20251125)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("initialize capabilities = %v, want %v", got, tc.want)
			}
			if got := capabilitiesOf(t, c.Discover(context.Background(), rte)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("server/discover capabilities = %v, want %v", got, tc.want)
			}
			// A 2024-11-05 client is offered only what its revision
			// defines: completions came with 2025-03-26.
			old := capabilitiesOf(t, c.InitializeResult(context.Background(), rte, mcp.Version20241105))
			if _, ok := old["completions"]; ok {
				t.Errorf("a 2024-11-05 initialize offers completions: %v", old)
			}
			if len(old) != len(tc.want)-btoi(tc.want["completions"] != nil) {
				t.Errorf("2024-11-05 capabilities = %v, want %v less completions", old, tc.want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A request that needs a capability its upstream lacks is refused at the
// gateway, naming the upstream and the capability; the same request to an
// upstream that has it goes through.
func TestCapabilityGapNamesTheUpstream(t *testing.T) {
	c, routes := capabilityFixture(t)
	for _, tc := range []struct {
		name, method, params string
		upstream, capability string // "": the request succeeds
		message              string
	}{
		{"subscribe without resources.subscribe", mcp.MethodResourcesSubscribe, `{"uri":"file:///plain.txt"}`,
			"plain", "resources.subscribe", `upstream "plain" does not support resource subscriptions (its capabilities have no resources.subscribe)`},
		{"subscribe with it", mcp.MethodResourcesSubscribe, `{"uri":"mem://rich"}`, "", "", ""},
		{"complete without completions", mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"plain__hello"},"argument":{"name":"who","value":"wor"}}`,
			"plain", "completions", `upstream "plain" does not support completions (its capabilities have no completions)`},
		{"complete with it", mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"rich__greet"},"argument":{"name":"who","value":"wor"}}`, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := NewSession("s-"+strings.ReplaceAll(tc.name, " ", "-"), routes["/both"], mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
			defer c.EndSession(sess)
			resp := c.Handle(context.Background(), sess, jsonrpc.NewRequest(jsonrpc.IntID(7), tc.method, json.RawMessage(tc.params)), nil, nil)
			if tc.upstream == "" {
				if resp.Error != nil {
					t.Fatalf("error %d %s", resp.Error.Code, resp.Error.Message)
				}
				if tc.method == mcp.MethodCompletionComplete && !strings.Contains(string(resp.Result), `"world"`) {
					t.Errorf("result %s, want the upstream's completion", resp.Result)
				}
				return
			}
			if resp.Error == nil {
				t.Fatalf("result %s, want a refusal", resp.Result)
			}
			if resp.Error.Code != jsonrpc.CodeMethodNotFound || resp.Error.Message != tc.message {
				t.Errorf("error %d %q, want -32601 %q", resp.Error.Code, resp.Error.Message, tc.message)
			}
			var data map[string]string
			if err := json.Unmarshal(resp.Error.Data, &data); err != nil || data["upstream"] != tc.upstream || data["capability"] != tc.capability {
				t.Errorf("error data %s, want upstream %q and capability %q", resp.Error.Data, tc.upstream, tc.capability)
			}
		})
	}
}
