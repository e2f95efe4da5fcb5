package gatewaytest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"
)

// SDKServer builds an official-SDK upstream named name: an "echo" tool
// (present on every server, to prove collisions are kept apart), several
// numbered tools to page through, a "slow" tool, a prompt, a resource whose
// URI every test server shares, a template and completions.
func SDKServer(name string, pageSize int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-" + name, Version: "1"}, &mcp.ServerOptions{
		PageSize:     pageSize,
		Instructions: "instructions of " + name,
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
				Values: []string{name + "-" + req.Params.Argument.Value + "-1", name + "-" + req.Params.Argument.Value + "-2"},
			}}, nil
		},
	})
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + in.Text}}}, nil, nil
	})
	type slowIn struct {
		MS int `json:"ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond): // the behaviour under test: a tool that takes ms
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	type progressIn struct {
		Tag string `json:"tag"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
		for i := range 3 {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 3, Message: in.Tag})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	for i := range toolCount(name) {
		tool := fmt.Sprintf("t%02d", i)
		mcp.AddTool(s, &mcp.Tool{Name: tool}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + "/" + tool}}}, nil, nil
		})
	}
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name + " greets " + req.Params.Arguments["who"]}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "mem://shared", Name: "shared"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "content of " + name}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://items/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name + " item " + strings.TrimPrefix(req.Params.URI, "mem://items/")}}}, nil
		})
	return s
}

// toolCount gives each test server a different number of numbered tools, so
// page boundaries fall differently on each.
func toolCount(name string) int {
	switch name {
	case "alpha":
		return 7
	case "beta":
		return 4
	}
	return 3
}

// HTTPUpstream serves a test server over Streamable HTTP on loopback.
func HTTPUpstream(t *testing.T, name string, pageSize int) string {
	t.Helper()
	srv := SDKServer(name, pageSize)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// StdioUpstream returns the config command that runs a test server as a
// child process.
func StdioUpstream(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// StartGateway starts a gateway on a free loopback port from YAML and waits
// for its upstreams' first connection attempts.
func StartGateway(t *testing.T, yaml string) (*gateway.Gateway, string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	return gw, "http://" + ln.Addr().String()
}

// RunGateway starts a gateway, stops it when the test ends (failing the
// test if it cannot drain), and waits for its upstreams' first connection
// attempts.
func RunGateway(t *testing.T, cfg *config.Config, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.Start(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		t.Fatalf("upstreams did not start: %v", err)
	}
	return gw
}

// Connect opens an official-SDK client session to url.
func Connect(t *testing.T, url string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, opts)
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, sopts)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
