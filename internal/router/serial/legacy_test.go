package serial_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// legacyGateway is a gateway over alpha (the shared test server) and peer
// (gatewaytest.LegacyPeerServer), both official-SDK Streamable HTTP upstreams.
func legacyGateway(t *testing.T) (base string, started, cancelled chan string) {
	t.Helper()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 2)
	started, cancelled = make(chan string, 8), make(chan string, 8)
	peer := gatewaytest.LegacyPeerServer(started, cancelled)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return peer }, nil))
	t.Cleanup(ts.Close)
	_, base = gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
  peer:
    url: %s/mcp
routes:
  - path: /mcp
  - path: /mcp/alpha
    upstreams: [alpha]
    prefix: false
`, alpha, ts.URL))
	return base, started, cancelled
}

func TestLegacySSEClient(t *testing.T) {
	t.Parallel()
	base, _, _ := legacyGateway(t)
	// "" is the SDK's default: it tries 2026-07-28's server/discover first
	// and falls back to initialize.
	for _, version := range []string{"", "2024-11-05", "2025-03-26", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			ctx := context.Background()
			var mu sync.Mutex
			var progress []string
			cs := gatewaytest.ConnectLegacy(t, base+"/mcp/sse", &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.Message)
					mu.Unlock()
				},
			}, version)
			want := version
			if want == "" {
				want = "2025-11-25"
			}
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("negotiated %q, want %q", got, want)
			}
			if got := cs.InitializeResult().ServerInfo.Name; got != "mcpgw" {
				t.Errorf("serverInfo.name = %q", got)
			}

			var names []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
			}
			// alpha: echo, progress, slow, t00..t06 (paged 2 at a time); peer: ask, block.
			if len(names) != 12 || !slices.Contains(names, "alpha__echo") || !slices.Contains(names, "peer__ask") {
				t.Errorf("tools = %v", names)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := gatewaytest.TextOf(t, res); got != "alpha:hi" {
				t.Errorf("alpha__echo = %q", got)
			}

			// Progress sent during the call arrives on the session's stream.
			params := &mcp.CallToolParams{Name: "alpha__progress", Arguments: map[string]any{"tag": "p-" + version}}
			params.SetProgressToken("tok")
			if _, err := cs.CallTool(ctx, params); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n := len(progress)
				mu.Unlock()
				if n == 3 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
			}
			mu.Lock()
			if len(progress) != 3 || progress[0] != "p-"+version {
				t.Errorf("progress messages = %v, want 3 × %q", progress, "p-"+version)
			}
			mu.Unlock()

			if err := cs.Ping(ctx, nil); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
}

func TestLegacySSEUnprefixedRoute(t *testing.T) {
	t.Parallel()
	base, _, _ := legacyGateway(t)
	cs := gatewaytest.ConnectLegacy(t, base+"/mcp/alpha/sse", nil, "2024-11-05")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "alpha:x" {
		t.Errorf("echo = %q", got)
	}
}

// Two legacy sessions, each with many concurrent calls: every call gets
// exactly its own answer.
func TestLegacySSEConcurrentSessions(t *testing.T) {
	t.Parallel()
	base, _, _ := legacyGateway(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for s := range 2 {
		cs := gatewaytest.ConnectLegacy(t, base+"/mcp/sse", nil, "2024-11-05")
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := fmt.Sprintf("s%d-c%d", s, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": text}})
				if err != nil {
					t.Errorf("%s: %v", text, err)
					return
				}
				if got := gatewaytest.TextOf(t, res); got != "alpha:"+text {
					t.Errorf("call %s answered %q", text, got)
				}
			}()
		}
	}
	wg.Wait()
}

// A server→client request made during a call reaches the calling legacy
// session's stream, and its answer goes back to the upstream.
func TestLegacySSESampling(t *testing.T) {
	t.Parallel()
	base, _, _ := legacyGateway(t)
	ctx := context.Background()
	var sessions []*mcp.ClientSession
	for _, name := range []string{"one", "two"} {
		sessions = append(sessions, gatewaytest.ConnectLegacy(t, base+"/mcp/sse", &mcp.ClientOptions{
			CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				q := req.Params.Messages[0].Content.(*mcp.TextContent).Text
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: name + " saw " + q}}, nil
			},
		}, "2024-11-05"))
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		name := []string{"one", "two"}[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peer__ask", Arguments: map[string]any{"tag": "q-" + name}})
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := gatewaytest.TextOf(t, res), "answer="+name+" saw q-"+name; got != want {
				t.Errorf("peer__ask = %q, want %q", got, want)
			}
		}()
	}
	wg.Wait()
}

func TestLegacySSEWire(t *testing.T) {
	t.Parallel()
	base, started, cancelled := legacyGateway(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
	defer body.Close()
	if !strings.HasPrefix(endpoint, "/mcp/message?sessionId=") || len(endpoint) < len("/mcp/message?sessionId=")+26 { // crypto/rand.Text: 130 bits
		t.Fatalf("endpoint = %q, want /mcp/message?sessionId=<unguessable id>", endpoint)
	}
	post := base + endpoint

	// Before initialize only ping is answered.
	if st, _ := gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); st != http.StatusAccepted {
		t.Fatalf("POST before initialize: HTTP %d", st)
	}
	if m := gatewaytest.NextMessage(t, events); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || string(m.ID) != "1" {
		t.Errorf("tools/list before initialize = %+v", m)
	}

	// initialize: an unknown revision gets the latest as counter-offer.
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, nil)
	m := gatewaytest.NextMessage(t, events)
	if string(m.ID) != `"init"` || !strings.Contains(string(m.Result), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize answered %s / %+v", m.Result, m.Error)
	}
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	if st, _ := gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":"2024-11-05"}}`, nil); st != http.StatusAccepted {
		t.Fatalf("second initialize: HTTP %d", st)
	}
	if m := gatewaytest.NextMessage(t, events); m.Error == nil || string(m.ID) != `"again"` {
		t.Errorf("second initialize = %+v, want an error", m)
	}

	// Parse errors and limits are answered on the POST, as on Streamable HTTP.
	if st, m := gatewaytest.LegacyPost(t, post, `{"jsonrpc":`, nil); st != http.StatusBadRequest || m == nil || m.Error.Code != jsonrpc.CodeParseError {
		t.Errorf("bad JSON: HTTP %d %+v", st, m)
	}
	if st, _ := gatewaytest.LegacyPost(t, post, `{}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }); st != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: HTTP %d", st)
	}
	if st, _ := gatewaytest.LegacyPost(t, base+"/mcp/message?sessionId=nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); st != http.StatusNotFound {
		t.Errorf("unknown session: HTTP %d", st)
	}
	if st, _ := gatewaytest.LegacyPost(t, base+"/mcp/message", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); st != http.StatusBadRequest {
		t.Errorf("no sessionId: HTTP %d", st)
	}
	// A session belongs to the route that created it.
	if st, _ := gatewaytest.LegacyPost(t, base+"/mcp/alpha"+strings.TrimPrefix(endpoint, "/mcp"), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); st != http.StatusNotFound {
		t.Errorf("session on another route: HTTP %d", st)
	}
	// Edge checks apply to both endpoints.
	if st, _ := gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }); st != http.StatusForbidden {
		t.Errorf("foreign Origin on POST: HTTP %d", st)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp/sse", nil)
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin on GET: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	// Concurrent requests on one session: one response each.
	for i := range 5 {
		gatewaytest.LegacyPost(t, post, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"c%d"}}}`, 100+i, i), nil)
	}
	seen := map[string]bool{}
	for range 5 {
		m := gatewaytest.NextMessage(t, events)
		var i int
		fmt.Sscan(string(m.ID), &i)
		if seen[string(m.ID)] || !strings.Contains(string(m.Result), fmt.Sprintf("alpha:c%d", i-100)) {
			t.Errorf("response %s: %s", m.ID, m.Result)
		}
		seen[string(m.ID)] = true
	}

	// Closing the stream ends the session and cancels its calls.
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"peer__block","arguments":{"tag":"wire"},"_meta":{"progressToken":"pt"}}}`, nil)
	select {
	case <-started:
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("peer__block did not start")
	}
	// The call's progress comes on the stream, with the client's own token.
	if m := gatewaytest.NextMessage(t, events); m.Method != "notifications/progress" || !strings.Contains(string(m.Params), `"progressToken":"pt"`) {
		t.Errorf("event during the call = %s %s, want progress with token pt", m.Method, m.Params)
	}
	cancel()
	body.Close()
	select {
	case tag := <-cancelled:
		if tag != "wire" {
			t.Errorf("cancelled %q", tag)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("closing the stream did not cancel the in-flight call upstream")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, nil)
		if st == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST after the stream closed: HTTP %d, want 404", st)
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
}

// Shutdown lets a legacy session's call in flight finish and be answered on
// its stream, then ends the stream instead of waiting out the drain timeout.
func TestLegacySSEDrain(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 2)
	gw, base := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha:\n    url: %s\n", alpha))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
	defer body.Close()
	post := base + endpoint
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, nil)
	gatewaytest.NextMessage(t, events)
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":400}}}`, nil)
	testwait.Until(t, "the call to be in flight", func() bool { return gw.Host().Upstream("alpha").InFlight() == 1 })

	start := time.Now()
	shut := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer scancel()
		shut <- gw.Shutdown(sctx)
	}()
	if m := gatewaytest.NextMessage(t, events); string(m.ID) != "1" || !strings.Contains(string(m.Result), "done") {
		t.Errorf("in-flight call answered %s %s %s %+v", m.ID, m.Method, m.Result, m.Error)
	}
	if _, err := events.Next(); err == nil {
		t.Error("the stream went on after its last call was answered during shutdown")
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("shutdown took %v: the legacy stream held it up", d)
	}
}
