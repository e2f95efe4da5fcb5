package streamable_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStatelessAnswerShape: a 2026-07-28 request that accepts an event
// stream gets one only when the call has something to stream besides its
// answer. A call that outlasts the gateway's stream delay (50 ms) with
// nothing to send answers plain JSON, as a quick one does; progress sent
// before or after the delay streams, ahead of the answer. Both ways a
// stateless call runs are covered: bridged (a session-revision upstream)
// and direct (a 2026-07-28 upstream, the SDK's stateless server).
func TestStatelessAnswerShape(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shape", Version: "1"}, nil)
	type in struct {
		Before int `json:"before"` // ms before the progress notification (<0: none)
		After  int `json:"after"`  // ms after it, before the answer
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		sleep := func(ms int) {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond): // the behaviour under test: a tool that takes ms
			case <-ctx.Done():
			}
		}
		if a.Before >= 0 {
			sleep(a.Before)
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "working"})
			}
		}
		sleep(a.After)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "worked"}}}, nil, nil
	})
	session := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(session.Close)
	stateless := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(stateless.Close)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  bridged:
    url: %s/mcp
  direct:
    url: %s/mcp
    protocol: "2026"
`, session.URL, stateless.URL))

	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	for _, up := range []string{"bridged", "direct"} {
		for _, tc := range []struct {
			name          string
			before, after int
			stream        bool     // an event stream, else plain JSON
			msgs          []string // the messages' methods ("" the answer)
		}{
			{"quick", -1, 0, false, []string{""}},
			{"slow, nothing to stream", -1, 150, false, []string{""}},
			{"progress at once, then slow", 0, 150, true, []string{"notifications/progress", ""}},
			{"progress after the delay", 150, 50, true, []string{"notifications/progress", ""}},
		} {
			t.Run(up+"/"+tc.name, func(t *testing.T) {
				tool := up + "__work"
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{"before":%d,"after":%d},`+
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}}}`, tool, tc.before, tc.after)
				r := c.Do(http.MethodPost, body, func(req *http.Request) {
					req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
					req.Header.Set("Mcp-Method", "tools/call")
					req.Header.Set("Mcp-Name", tool)
				})
				if r.Status != http.StatusOK {
					t.Fatalf("HTTP %d: %s", r.Status, r.Body)
				}
				ct := r.Header.Get("Content-Type")
				if got := strings.HasPrefix(ct, "text/event-stream"); got != tc.stream {
					t.Errorf("Content-Type %q, want an event stream: %v", ct, tc.stream)
				}
				var methods []string
				for _, m := range r.Msgs {
					methods = append(methods, m.Method)
				}
				if !slices.Equal(methods, tc.msgs) {
					t.Errorf("messages %q, want %q (body %s)", methods, tc.msgs, r.Body)
				}
				if last := r.Last(t); last.Error != nil || !strings.Contains(string(last.Result), "worked") {
					t.Errorf("answer %s %+v", last.Result, last.Error)
				}
			})
		}
	}
}
