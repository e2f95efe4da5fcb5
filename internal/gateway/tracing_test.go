package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// tracedUpstream is an HTTP MCP server with an echo tool, a failing tool
// and a slow one, which records the trace context each tools/call arrived
// with (header and params._meta).
type tracedUpstream struct {
	url   string
	mu    sync.Mutex
	calls []seenTrace
}

type seenTrace struct{ tool, header, meta string }

func newTracedUpstream(t *testing.T) *tracedUpstream {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	type in struct {
		Text string `json:"text,omitempty"`
		MS   int    `json:"ms,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the tool failed")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond): // the behaviour under test: a tool that takes ms
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	u := &tracedUpstream{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Name string         `json:"name"`
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				mt, _ := m.Params.Meta["traceparent"].(string)
				u.mu.Lock()
				u.calls = append(u.calls, seenTrace{m.Params.Name, r.Header.Get("Traceparent"), mt})
				u.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

func (u *tracedUpstream) seen() []seenTrace {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenTrace(nil), u.calls...)
}

// startTracedGateway runs a gateway whose spans go to a recorder.
func startTracedGateway(t *testing.T, yaml string) (*tracetest.SpanRecorder, string) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, TracerProvider: tp})
	return sr, "http://" + ln.Addr().String()
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// spansOf waits for n ended spans (the client span of a call can end just
// after the caller got its answer).
func spansOf(t *testing.T, sr *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ended := sr.Ended()
		if len(ended) >= n || time.Now().After(deadline) {
			return ended
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

// Each request is a server span, child of the caller's traceparent, and
// each upstream call a client span, child of it; the upstream receives the
// client span as its parent, in the header and in params._meta (where it
// replaces the caller's own). Spans carry the method, tool, upstream,
// route, a hash of the session id and the outcome, never arguments; errors
// (a tool error, a timeout, a policy denial) are recorded.
func TestTracingSpans(t *testing.T) {
	up := newTracedUpstream(t)
	sr, base := startTracedGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s, timeout: 300ms}
policy:
  default: allow
  rules:
    - deny: [alpha__slow_secret]
`, up.url))
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const callerSpan = "00f067aa0ba902b7"
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}}}
	c.Initialize("2025-11-25")
	sessionID := c.Session

	call := func(id int, body string) {
		c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, body)).Last(t)
	}
	call(1, `{"name":"alpha__echo","arguments":{"text":"secret-argument"}}`)
	// The caller's _meta trace context wins over its header (the MCP convention).
	const metaTrace, metaSpan = "11111111111111111111111111111111", "2222222222222222"
	call(2, `{"name":"alpha__echo","arguments":{"text":"b"},"_meta":{"traceparent":"00-`+metaTrace+`-`+metaSpan+`-01"}}`)
	call(3, `{"name":"alpha__fail","arguments":{}}`)
	call(4, `{"name":"alpha__slow","arguments":{"ms":3000}}`)
	call(5, `{"name":"alpha__slow_secret","arguments":{}}`)

	// 5 server spans, 4 client spans (the denied call reaches no upstream).
	ended := spansOf(t, sr, 9)
	var servers, clients []sdktrace.ReadOnlySpan
	for _, s := range ended {
		switch s.SpanKind() {
		case trace.SpanKindServer:
			if attrs(s)["mcp.method.name"] == "tools/call" {
				servers = append(servers, s)
			}
		case trace.SpanKindClient:
			if attrs(s)["mcp.method.name"] == "tools/call" {
				clients = append(clients, s)
			}
		}
	}
	if len(servers) != 5 || len(clients) != 4 {
		for _, s := range ended {
			t.Logf("span %q kind %v attrs %v", s.Name(), s.SpanKind(), attrs(s))
		}
		t.Fatalf("%d server and %d client tools/call spans, want 5 and 4", len(servers), len(clients))
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range servers {
		byID[attrs(s)["jsonrpc.request.id"]] = s
	}
	clientOf := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range clients {
		clientOf[s.Parent().SpanID()] = s
	}

	for _, tc := range []struct {
		id                string
		name              string
		parentTrace       string
		parentSpan        string
		outcome, errType  string
		clientErr         string
		client, errStatus bool
	}{
		{id: "1", name: "tools/call alpha__echo", parentTrace: callerTrace, parentSpan: callerSpan, outcome: "ok", client: true},
		{id: "2", name: "tools/call alpha__echo", parentTrace: metaTrace, parentSpan: metaSpan, outcome: "ok", client: true},
		{id: "3", name: "tools/call alpha__fail", parentTrace: callerTrace, parentSpan: callerSpan, outcome: "ok", errType: "tool_error", clientErr: "tool_error", client: true, errStatus: true},
		{id: "4", name: "tools/call alpha__slow", parentTrace: callerTrace, parentSpan: callerSpan, outcome: "timeout", errType: "-32001", clientErr: "timeout", client: true, errStatus: true},
		{id: "5", name: "tools/call alpha__slow_secret", parentTrace: callerTrace, parentSpan: callerSpan, outcome: "denied", errType: "-32602", errStatus: true},
	} {
		s := byID[tc.id]
		if s == nil {
			t.Errorf("no server span for request %s", tc.id)
			continue
		}
		a := attrs(s)
		if s.Name() != tc.name {
			t.Errorf("request %s: span name %q, want %q", tc.id, s.Name(), tc.name)
		}
		if got := s.Parent(); got.TraceID().String() != tc.parentTrace || got.SpanID().String() != tc.parentSpan || !got.IsRemote() {
			t.Errorf("request %s: parent %s/%s (remote %v), want the caller's %s/%s", tc.id, got.TraceID(), got.SpanID(), got.IsRemote(), tc.parentTrace, tc.parentSpan)
		}
		tool := strings.TrimPrefix(tc.name, "tools/call ")
		want := map[string]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool",
			"mcpgw.route": "/mcp", "mcpgw.upstream": "alpha", "mcp.protocol.version": "2025-11-25",
			"mcp.session.id": telemetry.SessionID(sessionID), "mcpgw.outcome": tc.outcome,
		}
		if tc.errType != "" {
			want["error.type"] = tc.errType
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("request %s: server span %s = %q, want %q", tc.id, k, a[k], v)
			}
		}
		if (s.Status().Code == codes.Error) != tc.errStatus {
			t.Errorf("request %s: status %v, want error %v", tc.id, s.Status(), tc.errStatus)
		}
		for k, v := range a {
			if strings.Contains(v, "secret-argument") || strings.Contains(v, sessionID) {
				t.Errorf("request %s: attribute %s leaks an argument or the session id: %q", tc.id, k, v)
			}
		}
		cl := clientOf[s.SpanContext().SpanID()]
		if !tc.client {
			if cl != nil {
				t.Errorf("request %s: a client span although nothing reached the upstream", tc.id)
			}
			continue
		}
		if cl == nil {
			t.Errorf("request %s: no client span under the server span", tc.id)
			continue
		}
		ca := attrs(cl)
		upName := strings.TrimPrefix(tool, "alpha__")
		for k, v := range map[string]string{"gen_ai.tool.name": upName, "mcpgw.upstream": "alpha", "network.transport": "tcp", "error.type": tc.clientErr} {
			if ca[k] != v {
				t.Errorf("request %s: client span %s = %q, want %q", tc.id, k, ca[k], v)
			}
		}
		if cl.Name() != "tools/call "+upName || cl.SpanContext().TraceID() != s.SpanContext().TraceID() {
			t.Errorf("request %s: client span %q in trace %s", tc.id, cl.Name(), cl.SpanContext().TraceID())
		}
	}
	// The header context of request 2 is linked, not lost.
	if links := byID["2"].Links(); len(links) != 1 || links[0].SpanContext.SpanID().String() != callerSpan {
		t.Errorf("request 2 links: %+v, want the header's span", links)
	}

	// What the upstream received: the gateway's client span as parent,
	// in the header and in _meta (the caller's own _meta traceparent replaced).
	seen := up.seen()
	if len(seen) != 4 {
		t.Fatalf("upstream saw %d calls: %+v", len(seen), seen)
	}
	for i, id := range []string{"1", "2", "3", "4"} {
		cl := clientOf[byID[id].SpanContext().SpanID()]
		if cl == nil {
			continue
		}
		want := telemetry.Traceparent(cl.SpanContext())
		if seen[i].header != want || seen[i].meta != want {
			t.Errorf("request %s: upstream saw traceparent header %q, _meta %q; want the client span %q", id, seen[i].header, seen[i].meta, want)
		}
	}
}

// A request without a caller trace context starts a trace of its own, and
// the upstream still gets the gateway's span as parent.
func TestTracingRootSpan(t *testing.T) {
	up := newTracedUpstream(t)
	sr, base := startTracedGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha: {url: %s}\n", up.url))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`).Last(t)
	var server sdktrace.ReadOnlySpan
	for _, s := range spansOf(t, sr, 2) {
		if s.SpanKind() == trace.SpanKindServer && attrs(s)["mcp.method.name"] == "tools/call" {
			server = s
		}
	}
	if server == nil || server.Parent().IsValid() {
		t.Fatalf("server span %v: want a root span", server)
	}
	seen := up.seen()
	if len(seen) != 1 || !strings.Contains(seen[0].header, server.SpanContext().TraceID().String()) || seen[0].header != seen[0].meta {
		t.Errorf("upstream saw %+v, want the gateway's trace %s", seen, server.SpanContext().TraceID())
	}
}

// Bridged rounds are events: a legacy upstream's sampling request during a
// 2026-07-28 client's call is mcpgw.upstream_request on the client span,
// and the input_required round trip is mcpgw.bridge.input_required then
// mcpgw.bridge.resumed on the server span, which covers the whole call.
func TestTracingBridgedRounds(t *testing.T) {
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	sr, base := startTracedGateway(t, "listen: 127.0.0.1:0\nupstreams:\n"+up.Entry)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a := gatewaytest.Connect2026(t, base+"/mcp", gatewaytest.FidSampler("A", &gatewaytest.FidInbox{}))
	gatewaytest.FidExpect(ctx, t, "A", a, "up__sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")

	var server, client sdktrace.ReadOnlySpan
	deadline := time.Now().Add(5 * time.Second)
	for (server == nil || client == nil) && time.Now().Before(deadline) {
		for _, s := range sr.Ended() {
			switch s.Name() {
			case "tools/call up__sample":
				server = s
			case "tools/call sample":
				client = s
			}
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	if server == nil || client == nil {
		t.Fatalf("server span %v, client span %v", server, client)
	}
	events := func(s sdktrace.ReadOnlySpan) []string {
		var out []string
		for _, e := range s.Events() {
			out = append(out, e.Name)
		}
		return out
	}
	if got := events(server); strings.Join(got, ",") != "mcpgw.bridge.input_required,mcpgw.bridge.resumed" {
		t.Errorf("server span events %v", got)
	}
	if got := events(client); len(got) != 1 || got[0] != telemetry.EventUpstreamRequest || attrsOfEvent(client.Events()[0])["mcp.method.name"] != "sampling/createMessage" {
		t.Errorf("client span events %v", got)
	}
	if client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Error("the client span is not the server span's child")
	}
}

func attrsOfEvent(e sdktrace.Event) map[string]string {
	out := map[string]string{}
	for _, kv := range e.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}
