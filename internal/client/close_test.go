package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// TestCloseLetsCancellationsOut: a call cancelled just before the client
// is closed (the gateway shutting down cancels what is in flight, then
// closes its upstreams) is still cancelled upstream: CloseGracefully waits
// briefly for the notifications/cancelled already on their way.
func TestCloseLetsCancellationsOut(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	started := make(chan struct{}, 1)
	// The tool holds the call until it is cancelled and the caller has
	// seen the call end: the call must end by the caller's cancellation
	// alone. (A tool that answered as soon as its context ended could have
	// its answer win the race with the caller's cancellation, and then
	// rightly no notifications/cancelled is sent.)
	callEnded := make(chan struct{})
	endCall := sync.OnceFunc(func() { close(callEnded) })
	sdk.AddTool(srv, &sdk.Tool{Name: "wait"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		<-callEnded
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
	defer endCall() // before ts.Close, which waits for the tool

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
	if err := testwait.Recv(t, done, "the cancelled call to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call ended with %v; want context.Canceled", err)
	}
	endCall()
	_ = c.CloseGracefully() // at once, as at shutdown
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the upstream never got notifications/cancelled for the call cancelled before Close")
	}
}
