package serial_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// stdio2026Upstream is an official-SDK upstream of the session revisions
// (so its sampling is a server→client request the gateway must bridge)
// with an echo tool and an "ask" tool that samples; the test adds tools to
// the returned server to change its list.
func stdio2026Upstream(t *testing.T) (string, *mcp.Server) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "live", Version: "1"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "live:" + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 8, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer=" + res.Content.(*mcp.TextContent).Text}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", s
}

// An official-SDK client at 2026-07-28 over stdio (newline-delimited pipes
// into gateway.ServeStdio): it discovers (no initialize), lists, calls,
// answers a legacy upstream's sampling through input_required, and its
// subscriptions/listen stream carries the upstream's list change. Closing
// the client cancels the listen stream and ServeStdio returns at EOF.
func TestStdio2026SDKClient(t *testing.T) {
	url, up := stdio2026Upstream(t)
	in, out, done := gatewaytest.StdioGateway(t, fmt.Sprintf("upstreams:\n  live:\n    url: %s\n", url), "")
	changed := make(chan struct{}, 16)
	sampled := make(chan string, 4)
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-2026", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			q := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			sampled <- q
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "saw " + q}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(out), Writer: in}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q over stdio, want 2026-07-28 (server/discover, no initialize)", v)
	}
	if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || !caps.Tools.ListChanged {
		t.Errorf("discovered capabilities %+v, want tools with listChanged", caps)
	}

	if names := gatewaytest.SDKToolNames(t, cs); !slices.Equal(names, []string{"live__ask", "live__echo"}) {
		t.Errorf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "live:hi" {
		t.Errorf("live__echo = %q", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__ask", Arguments: map[string]any{"text": "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "answer=saw q" {
		t.Errorf("live__ask = %q (sampling bridged through input_required)", got)
	}
	if q := <-sampled; q != "q" {
		t.Errorf("the client was asked %q", q)
	}

	gatewaytest.DrainSignals(changed)
	mcp.AddTool(up, &mcp.Tool{Name: "later"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	gatewaytest.WaitSignal(t, changed, "tools/list_changed on the stdio listen stream")
	if names := gatewaytest.SDKToolNames(t, cs); !slices.Contains(names, "live__later") {
		t.Errorf("tools after list_changed = %v", names)
	}

	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after EOF: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}

// The wire, line by line: 2026-07-28 requests beside an initialized
// session on one connection; the revision's refusals; a listen stream
// acknowledged, tagged, and answered when stdin ends.
func TestStdio2026Wire(t *testing.T) {
	url, _ := stdio2026Upstream(t)
	in, out, done := gatewaytest.StdioGateway(t, fmt.Sprintf("upstreams:\n  live:\n    url: %s\n", url), "")
	s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

	s.Send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`)
	m, _ := s.Next()
	var disc struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &disc) != nil || disc.ResultType != "complete" || !slices.Contains(disc.SupportedVersions, "2026-07-28") {
		t.Fatalf("server/discover: %+v %s", m.Error, m.Result)
	}
	for _, tc := range []struct {
		name, line string
		code       int
		contains   string
	}{
		{"old version in _meta", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022, "unsupported protocol version"},
		{"no client capabilities", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, jsonrpc.CodeInvalidParams, "clientCapabilities"},
		{"no ping in 2026-07-28", `{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + meta + `}}`, jsonrpc.CodeMethodNotFound, "does not exist in protocol revision 2026-07-28"},
		{"listen needs notifications", `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{` + meta + `}}`, jsonrpc.CodeInvalidParams, "params.notifications"},
	} {
		s.Send(tc.line)
		if m, line := s.Next(); m.Error == nil || m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.contains) {
			t.Errorf("%s: %s", tc.name, line)
		}
	}
	// Stateless requests need no initialize, and one stays possible.
	s.Send(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{` + meta + `}}`)
	if m, line := s.Next(); m.Error != nil || !strings.Contains(string(m.Result), `"name":"live__echo"`) || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Errorf("stateless tools/list: %s", line)
	}
	s.Send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m, _ := s.Next(); m.Error != nil || !strings.Contains(string(m.Result), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize beside 2026-07-28 requests: %+v %s", m.Error, m.Result)
	}
	s.Send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"live__echo","arguments":{"text":"s"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"live__echo","arguments":{"text":"x"},`+meta+`}}`)
	got := map[string]string{}
	for range 2 {
		m, line := s.Next()
		got[string(m.ID)] = string(line)
	}
	if !strings.Contains(got["8"], "live:s") || strings.Contains(got["8"], "resultType") {
		t.Errorf("session call: %s", got["8"])
	}
	if !strings.Contains(got["9"], "live:x") || !strings.Contains(got["9"], `"resultType":"complete"`) {
		t.Errorf("stateless call: %s", got["9"])
	}

	s.Send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///none"]},` + meta + `}}`)
	m, line := s.Next()
	if m.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(line), `"toolsListChanged":true`) ||
		strings.Contains(string(line), "file:///none") || !strings.Contains(string(line), `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("listen acknowledgement: %s", line)
	}
	in.Close()
	if m, line := s.Next(); string(m.ID) != `"L"` || m.Error != nil || !strings.Contains(string(line), `"resultType":"complete"`) {
		t.Errorf("listen at EOF: %s", line)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("ServeStdio did not return at EOF")
	}
}
