package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// capsUpstream serves an SDK server over Streamable HTTP on loopback:
// with rich, it offers resource subscriptions, completions and logging
// beside its prompt and resource; without, only a tool, a prompt and a
// resource.
func capsUpstream(t *testing.T, name string, rich bool) string {
	t.Helper()
	opts := &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}} // no logging either
	if rich {
		opts = &mcp.ServerOptions{
			SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{name + ":" + req.Params.Argument.Value}}}, nil
			},
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "a"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///" + name + ".txt", Name: name}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// advertised is what a session was offered, in the terms a test compares.
func advertised(caps *mcp.ServerCapabilities) string {
	var parts []string
	if caps.Tools != nil {
		parts = append(parts, fmt.Sprintf("tools(listChanged=%v)", caps.Tools.ListChanged))
	}
	if caps.Prompts != nil {
		parts = append(parts, fmt.Sprintf("prompts(listChanged=%v)", caps.Prompts.ListChanged))
	}
	if caps.Resources != nil {
		parts = append(parts, fmt.Sprintf("resources(subscribe=%v,listChanged=%v)", caps.Resources.Subscribe, caps.Resources.ListChanged))
	}
	if caps.Completions != nil {
		parts = append(parts, "completions")
	}
	if caps.Logging != nil {
		parts = append(parts, "logging")
	}
	return strings.Join(parts, " ")
}

// gatewayError is the JSON-RPC error inside an SDK client's error.
func gatewayError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("error %v is not a JSON-RPC error", err)
	}
	return werr
}

// The case through the gateway, with official-SDK clients of both
// kinds: a route over an upstream without subscriptions or completions
// advertises neither (initialize and server/discover alike), and a
// subscribe or completion aimed at it is refused naming the upstream and
// the capability. When a reload brings an upstream that has them, the
// open session is told its lists changed, new sessions are offered the
// union, and the same requests to the new upstream go through.
func TestCapabilitiesFollowTheUpstreams(t *testing.T) {
	fs := capsUpstream(t, "fs", false)
	notes := capsUpstream(t, "notes", true)
	gw, base, _ := gatewaytest.StartReloadable(t, fmt.Sprintf("upstreams:\n  fs: {url: %q}\n", fs))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resourcesChanged := make(chan struct{}, 16)
	before := gatewaytest.Connect(t, base+"/mcp", &mcp.ClientOptions{ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
		select {
		case resourcesChanged <- struct{}{}:
		default:
		}
	}}, "2025-11-25")
	const fsOnly = "tools(listChanged=true) prompts(listChanged=true) resources(subscribe=false,listChanged=true)"
	if got := advertised(before.InitializeResult().Capabilities); got != fsOnly {
		t.Errorf("initialize over fs: %s, want %s", got, fsOnly)
	}
	if got := advertised(gatewaytest.Connect2026(t, base+"/mcp", nil).InitializeResult().Capabilities); got != fsOnly {
		t.Errorf("server/discover over fs: %s, want %s", got, fsOnly)
	}

	for _, tc := range []struct {
		name, capability, message string
		call                      func() error
	}{
		{"subscribe", "resources.subscribe", `upstream "fs" does not support resource subscriptions (its capabilities have no resources.subscribe)`,
			func() error { return before.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///fs.txt"}) }},
		{"complete", "completions", `upstream "fs" does not support completions (its capabilities have no completions)`,
			func() error {
				_, err := before.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "fs__p"}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "x"}})
				return err
			}},
	} {
		werr := gatewayError(t, tc.call())
		var data map[string]string
		_ = json.Unmarshal(werr.Data, &data)
		if werr.Code != jsonrpc.CodeMethodNotFound || werr.Message != tc.message || data["upstream"] != "fs" || data["capability"] != tc.capability {
			t.Errorf("%s to fs: %d %q data %s; want -32601 %q naming fs and %s", tc.name, werr.Code, werr.Message, werr.Data, tc.message, tc.capability)
		}
	}

	gatewaytest.DrainSignals(resourcesChanged)
	if err := gw.Reload(gatewaytest.ParseConfig(t, fmt.Sprintf("upstreams:\n  fs: {url: %q}\n  notes: {url: %q}\n", fs, notes))); err != nil {
		t.Fatal(err)
	}
	if err := gw.Host().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	gatewaytest.WaitSignal(t, resourcesChanged, "resources/list_changed after notes arrived")

	const union = "tools(listChanged=true) prompts(listChanged=true) resources(subscribe=true,listChanged=true) completions logging"
	after := gatewaytest.Connect(t, base+"/mcp", nil, "2025-11-25")
	if got := advertised(after.InitializeResult().Capabilities); got != union {
		t.Errorf("initialize over fs and notes: %s, want %s", got, union)
	}
	if got := advertised(gatewaytest.Connect2026(t, base+"/mcp", nil).InitializeResult().Capabilities); got != union {
		t.Errorf("server/discover over fs and notes: %s, want %s", got, union)
	}
	if err := after.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///notes.txt"}); err != nil {
		t.Errorf("subscribe to notes: %v", err)
	}
	res, err := after.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "notes__p"}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "x"}})
	if err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "notes:x" {
		t.Errorf("complete on notes: %+v %v", res, err)
	}
	// fs still lacks them, and says so on the merged route too.
	if werr := gatewayError(t, after.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///fs.txt"})); !strings.Contains(werr.Message, `upstream "fs" does not support resource subscriptions`) {
		t.Errorf("subscribe to fs beside notes: %q", werr.Message)
	}
}
