package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/demo"
)

// TestStreamableReinitializesExpiredSession: an upstream that forgets the
// session (a restart) answers 404; the request was not processed, so the
// client makes a new session and sends it again — the caller never sees it.
func TestStreamableReinitializesExpiredSession(t *testing.T) {
	srv := demo.Server("test")
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var mu sync.Mutex
	forgotten := map[string]bool{}
	var initializes atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gone := forgotten[r.Header.Get("Mcp-Session-Id")]
		mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			initializes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t", Protocol: "legacy", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func() string {
		t.Helper()
		resp, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), client.CallOptions{})
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		if resp.Error != nil {
			t.Fatalf("call: %v", resp.Error)
		}
		return string(resp.Result)
	}
	if got := call(); !strings.Contains(got, "hi") {
		t.Fatalf("first call: %s", got)
	}
	if n := initializes.Load(); n != 1 {
		t.Fatalf("initializes = %d, want 1", n)
	}
	// The upstream restarts and forgets every session it had.
	forgetAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for s := range srv.Sessions() {
			forgotten[s.ID()] = true
		}
	}
	forgetAll()
	if got := call(); !strings.Contains(got, "hi") {
		t.Fatalf("call after the upstream forgot the session: %s", got)
	}
	if n := initializes.Load(); n != 2 {
		t.Errorf("initializes = %d, want 2 (one new session)", n)
	}
	select {
	case <-c.Done():
		t.Errorf("the connection was dropped instead of re-initialized: %v", c.Err())
	default:
	}
}
