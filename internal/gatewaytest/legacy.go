package gatewaytest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConnectLegacy opens an official-SDK client session over the 2024-11-05
// HTTP+SSE transport.
func ConnectLegacy(t *testing.T, endpoint string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	// The SDK's SSE transport ties its event stream to Connect's context,
	// so this one must outlive the session: no timeout.
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-client", Version: "1"}, opts)
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	// Its own connection pool, closed after the session: a connection the
	// pool dialed but never used would hold up the gateway's Shutdown for
	// 5s (net/http waits that long for a new connection's first request).
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}}, sopts)
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// LegacyStream opens GET <path>/sse by hand and returns the message
// endpoint it announces and a reader of the stream's events.
func LegacyStream(t *testing.T, ctx context.Context, url string) (endpoint string, events *sse.Reader, body io.Closer) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: HTTP %d %s", url, resp.StatusCode, b)
	}
	events = sse.NewReader(bufio.NewReader(resp.Body), 1<<20)
	ev, err := events.Next()
	if err != nil || ev.Name != "endpoint" {
		t.Fatalf("first event = %+v, %v; want endpoint", ev, err)
	}
	return string(ev.Data), events, resp.Body
}

func LegacyPost(t *testing.T, url, body string, mutate func(*http.Request)) (int, *jsonrpc.Message) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m *jsonrpc.Message
	if len(b) > 0 {
		m, _ = jsonrpc.Parse(b)
	}
	return resp.StatusCode, m
}

// NextMessage reads the stream's next "message" event, skipping list_changed
// hints (upstreams coming up send them at any time).
func NextMessage(t *testing.T, events *sse.Reader) *jsonrpc.Message {
	t.Helper()
	for {
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev.Name != "message" {
			continue
		}
		m, err := jsonrpc.Parse(ev.Data)
		if err != nil {
			t.Fatalf("event data %q: %v", ev.Data, err)
		}
		if strings.HasSuffix(m.Method, "/list_changed") {
			continue
		}
		return m
	}
}

// ServerEverything returns the command that starts the npm
// @modelcontextprotocol/server-everything as a stdio server (installed by
// `npm ci` in test/interop), or skips the test without node or the
// package, unless MCPGW_REQUIRE_NPM is set (.ci/run sets it).
func ServerEverything(t *testing.T) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	entry := filepath.Join(RepoRoot(t), "test", "interop", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if err == nil {
		_, err = os.Stat(entry)
	}
	if err != nil {
		if os.Getenv("MCPGW_REQUIRE_NPM") != "" {
			t.Fatalf("server-everything is needed and MCPGW_REQUIRE_NPM is set: %v (run npm ci in test/interop)", err)
		}
		t.Skipf("server-everything not available (%v); npm ci in test/interop installs it", err)
	}
	return []string{node, entry, "stdio"}
}

// LegacyPeerServer is an official-SDK upstream whose tools need the client:
// "ask" sends sampling/createMessage during the call, "block" reports its
// start on started, waits until the call is cancelled and reports that on
// cancelled.
func LegacyPeerServer(started, cancelled chan<- string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy-peer", Version: "1"}, nil)
	type tagIn struct {
		Tag string `json:"tag"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			MaxTokens: 8,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Tag}}},
		})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil
		}
		text := ""
		if tc, ok := res.Content.(*mcp.TextContent); ok {
			text = tc.Text
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer=" + text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		// A first event starts the upstream's response stream: a call
		// cancelled before that is not cancelled upstream (a known client
		// transport limitation, see fidHTTPCancelBug), which is not what
		// this test is about.
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "blocking " + in.Tag})
		}
		started <- in.Tag
		select {
		case <-ctx.Done():
			cancelled <- in.Tag
			return nil, nil, ctx.Err()
		case <-time.After(15 * time.Second): // never hold up the test's cleanup
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not cancelled"}}}, nil, nil
		}
	})
	return s
}

// RepoRoot is the repository's root: the nearest directory above the test's
// working directory (its package's) that holds go.mod. Tests find the npm
// servers, configs and docs from there, whatever their package's depth.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
