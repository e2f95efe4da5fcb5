package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
)

// TestCloseLetsCancellationsOut: a call cancelled just before the client
// is closed (the gateway shutting down cancels what is in flight, then
// closes its upstreams) is still cancelled upstream: CloseGracefully waits
// briefly for the notifications/cancelled already on their way.
func TestCloseLetsCancellationsOut(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	started := make(chan struct{}, 1)
	sdk.AddTool(srv, &sdk.Tool{Name: "wait"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // never cancelled: do not hold httptest.Server.Close
		}
		return &sdk.CallToolResult{}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	cancelled := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"notifications/cancelled"`)) {
				select {
				case cancelled <- struct{}{}:
				default:
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t", Protocol: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancelCall := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(callCtx, "tools/call", json.RawMessage(`{"name":"wait","arguments":{}}`), client.CallOptions{})
		done <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the tool never started")
	}
	cancelCall()
	<-done
	_ = c.CloseGracefully() // at once, as at shutdown
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the upstream never got notifications/cancelled for the call cancelled before Close")
	}
}
