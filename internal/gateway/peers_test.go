package gateway_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
)

// The test binary doubles as a stdio upstream: with MCPGW_TEST_STDIO_SERVER
// set it serves that test server on stdin/stdout instead of running tests,
// so stdio tests use a real child process speaking through real pipes.
func TestMain(m *testing.M) {
	if marker := os.Getenv("MCPGW_TEST_HOSTILE_STDIO"); marker != "" {
		serveHostileStdio(marker) // hostile_test.go
		os.Exit(0)
	}
	if dir := os.Getenv("MCPGW_TEST_SCRIPTED_STDIO"); dir != "" {
		serveScriptedStdio(dir)
		os.Exit(0)
	}
	if name := os.Getenv("MCPGW_TEST_STDIO_SERVER"); name != "" {
		// With MCPGW_TEST_STDIO_RELEASE, a server slow to start: it
		// answers nothing until that file exists (startup_test.go).
		// A child process polls for its release file (no channel crosses
		// processes); the test bounds the wait.
		for release := os.Getenv("MCPGW_TEST_STDIO_RELEASE"); release != ""; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(release); err == nil {
				break
			}
		}
		if err := testServer(name, 2).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "stdio test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The tests wait on sockets, child processes and timers far more than
	// they compute, so more of them run at once than there are cores:
	// four, unless -test.parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}

// testServer builds an official-SDK upstream named name: an "echo" tool
// (present on every server, to prove collisions are kept apart), several
// numbered tools to page through, a "slow" tool, a prompt, a resource whose
// URI every test server shares, a template and completions.
func testServer(name string, pageSize int) *mcp.Server {
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

// httpUpstream serves a test server over Streamable HTTP on loopback.
func httpUpstream(t *testing.T, name string, pageSize int) string {
	t.Helper()
	srv := testServer(name, pageSize)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// stdioUpstream returns the config command that runs a test server as a
// child process.
func stdioUpstream(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// startGateway starts a gateway on a free loopback port from YAML and waits
// for its upstreams' first connection attempts.
func startGateway(t *testing.T, yaml string) (*gateway.Gateway, string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := runGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	return gw, "http://" + ln.Addr().String()
}

// runGateway starts a gateway, stops it when the test ends (failing the
// test if it cannot drain), and waits for its upstreams' first connection
// attempts.
func runGateway(t *testing.T, cfg *config.Config, opts gateway.Options) *gateway.Gateway {
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

// connect opens an official-SDK client session to url.
func connect(t *testing.T, url string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
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
