package host_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// interactiveClient connects an SDK client (a 2025-11-25 session) to url
// whose sampling and elicitation answers name it (who), so that an answer
// that reached another caller shows in that caller's results.
func interactiveClient(t *testing.T, ctx context.Context, url, who string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: who, Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			q := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: who + " saw [" + q + "]"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": who}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// interactiveCall makes one sampling (prompt != "") or elicitation call
// and checks that what the upstream got back came from who, for this very
// call; it returns a description of what went wrong, or "".
func interactiveCall(ctx context.Context, cs *mcp.ClientSession, tool, who, prompt string) string {
	p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
	if prompt != "" {
		p.Arguments = map[string]any{"prompt": prompt}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		return fmt.Sprintf("%s %s: %v", who, tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	got := text.String()
	want := fmt.Sprintf(`\"name\": \"%s\"`, who)
	if prompt != "" {
		want = fmt.Sprintf("%s saw [Resource trigger-sampling-request context: %s]", who, prompt)
	}
	if res.IsError || !strings.Contains(strings.ReplaceAll(got, `"`, `\"`), want) && !strings.Contains(got, want) {
		return fmt.Sprintf("%s %s (%q): error=%v, want %q in %.300q", who, tool, prompt, res.IsError, want, got)
	}
	return ""
}

// Issue 30 item 1: on a shared stdio upstream, a server→client request
// belongs to the only call in flight, so with several in flight every
// sampling or elicitation was refused (100 of 100 with 5 clients). A call
// from a client that declared sampling or elicitation now runs where it is
// the only call in flight from the first call on: the shared child when it
// is free, else a child of the pool (interactive_pool); on a stateful
// upstream a session's such calls take turns on its own child. Through the
// real server-everything on a fresh gateway (nothing learned, no warm-up):
// 5 clients sampling and 5 eliciting, 50 calls each, all 500 in flight
// at once (5 running, the rest queued), every answer its own caller's,
// none refused; and 4 calls at once in one stateful session, its first.
func TestInteractiveCallsOverlapOnStdio(t *testing.T) {
	cmd := gatewaytest.ServerEverything(t)
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  ev:
    command: [%[1]q, %[2]q, %[3]q]
  st:
    command: [%[1]q, %[2]q, %[3]q]
    stateful: true
routes:
  - path: /mcp
    upstreams: [ev]
  - path: /st
    upstreams: [st]
`, cmd[0], cmd[1], cmd[2])
	_, base := gatewaytest.StartGateway(t, yaml)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const clients, calls, parallel = 5, 50, 50
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	sessions := make([]*mcp.ClientSession, 2*clients)
	for i := range sessions {
		sessions[i] = interactiveClient(t, ctx, base+"/mcp", fmt.Sprintf("client%d", i))
	}
	start := time.Now()
	for i, cs := range sessions {
		who := fmt.Sprintf("client%d", i)
		tool := "ev__trigger-sampling-request"
		if i >= clients {
			tool = "ev__trigger-elicitation-request"
		}
		for w := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < calls; j += parallel {
					prompt := ""
					if i < clients {
						prompt = fmt.Sprintf("%s-call%d", who, j)
					}
					if bad := interactiveCall(ctx, cs, tool, who, prompt); bad != "" {
						mu.Lock()
						failures = append(failures, bad)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d interactive calls (%d clients, %d in flight each) on a fresh gateway in %v", 2*clients*calls, 2*clients, parallel, time.Since(start))
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed or crossed; first: %s", len(failures), 2*clients*calls, failures[0])
	}

	// stateful: one fresh session, 4 interactive calls in flight at once.
	ss := interactiveClient(t, ctx, base+"/st", "session")
	failures = nil
	for j := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if bad := interactiveCall(ctx, ss, "st__trigger-sampling-request", "session", fmt.Sprintf("s%d", j)); bad != "" {
				mu.Lock()
				failures = append(failures, bad)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("stateful: %d of 4 calls failed; first: %s", len(failures), failures[0])
	}
}
