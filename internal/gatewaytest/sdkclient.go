package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TwoUpstreams is a gateway over alpha (official SDK, Streamable HTTP) and
// beta (official SDK, stdio child), both paging their lists 2 items at a time.
func TwoUpstreams(t *testing.T) string {
	t.Helper()
	alpha := HTTPUpstream(t, "alpha", 2)
	exe := StdioUpstream(t)
	_, base := StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
  beta:
    command: [%q]
    env: {MCPGW_TEST_STDIO_SERVER: beta}
routes:
  - path: /mcp
  - path: /mcp/beta
    upstreams: [beta]
    prefix: false
  - path: /mcp/small
    page_size: 4
`, alpha, exe))
	return base
}

func TextOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %+v", res.Content)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// credentials adds a bearer token and a cookie to every request, as a
// browser-based or misconfigured client might.
type BearerTransport struct {
	Token string
	Base  http.RoundTripper
}

// AuthCookie is the downstream cookie BearerTransport sends, which must never
// reach an upstream.
const AuthCookie = "sid=downstream-cookie-9b8c7d"

func (c BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+c.Token)
	r.Header.Set("Cookie", AuthCookie)
	return c.Base.RoundTrip(r)
}

// ConnectWith opens an official-SDK session that sends token.
func ConnectWith(t *testing.T, url, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "auth-client", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: BearerTransport{token, tr}}}, sopts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func Echo(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return TextOf(t, res)
}

func Bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// Connect2026 opens a stateless (2026-07-28) official-SDK client.
func Connect2026(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bridge-client", Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", got)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// ToolNames lists a raw client's tools/list result.
func ToolNames(t *testing.T, c *RawClient) []string {
	t.Helper()
	m := c.Post(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`).Last(t)
	if m.Error != nil {
		t.Fatalf("tools/list: %v", m.Error)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func SDKToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func CallText(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("tool error: %+v", res.Content)
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return "", fmt.Errorf("not text: %+v", res.Content[0])
	}
	return tc.Text, nil
}

// ListChanges opens a session whose tools/list_changed notifications are
// counted on the returned channel.
func ListChanges(t *testing.T, url string) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	cs := Connect(t, url, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}}, "")
	return cs, ch
}

func WaitSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatalf("no %s", what)
	}
}

func DrainSignals(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
