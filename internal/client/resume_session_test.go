package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// sessionLog is a Streamable HTTP upstream that records each request's
// method, Mcp-Session-Id and MCP-Protocol-Version, and answers 404 for a
// session it was told to forget.
type sessionLog struct {
	mu        sync.Mutex
	seen      []string // "METHOD session version"
	forgotten map[string]bool
}

func newSessionLog(t *testing.T) (*sessionLog, string) {
	t.Helper()
	l := &sessionLog{forgotten: map[string]bool{}}
	srv := demo.Server("test")
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		l.mu.Lock()
		l.seen = append(l.seen, r.Method+" "+id+" "+r.Header.Get("Mcp-Protocol-Version"))
		gone := l.forgotten[id]
		l.mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return l, ts.URL
}

func (l *sessionLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func echo(ctx context.Context, c *client.Client) error {
	resp, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), client.CallOptions{})
	if err == nil && resp.Error != nil {
		err = errors.New(resp.Error.Message)
	}
	return err
}

// TestResumeUpstreamSession: a connection given Options.Resume continues
// the upstream session another one initialized — its first request
// already carries that Mcp-Session-Id and MCP-Protocol-Version, with no
// initialize — and its InitializeResult is the recorded one. Detach leaves
// the session alive (no DELETE); with NoReinitialize a 404 fails the call
// with ErrSessionExpired and ends the connection instead of initializing.
func TestResumeUpstreamSession(t *testing.T) {
	l, url := newSessionLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: url}), client.Options{Name: "t", Protocol: "legacy", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id, init := first.SessionID(), first.InitializeResult()
	if id == "" {
		t.Fatal("no upstream session id after initialize")
	}
	if err := first.Detach(); err != nil {
		t.Fatal(err)
	}

	n := len(l.requests())
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: url}), client.Options{
		Name: "t", Timeout: 5 * time.Second, NoReinitialize: true,
		Resume: &client.Resumption{SessionID: id, Init: init},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(ctx, c); err != nil {
		t.Fatalf("a call on the resumed session: %v", err)
	}
	if c.SessionID() != id || c.ProtocolVersion() != string(init.ProtocolVersion) || !c.HasCapability("tools") {
		t.Errorf("resumed: session %q version %q, want %q %q with the recorded capabilities", c.SessionID(), c.ProtocolVersion(), id, init.ProtocolVersion)
	}
	for _, r := range l.requests()[n:] {
		if strings.HasPrefix(r, "DELETE") {
			t.Errorf("Detach ended the upstream session: %q", r)
		}
		if r != "POST "+id+" "+string(init.ProtocolVersion) && r != "GET "+id+" "+string(init.ProtocolVersion) {
			t.Errorf("request %q, want every one on session %s, version %s", r, id, init.ProtocolVersion)
		}
	}

	l.mu.Lock()
	l.forgotten[id] = true
	l.mu.Unlock()
	n = len(l.requests())
	err = echo(ctx, c)
	if !errors.Is(err, client.ErrSessionExpired) || !strings.Contains(err.Error(), "no longer knows") {
		t.Fatalf("after the upstream forgot the session: %v, want ErrSessionExpired, told plainly", err)
	}
	select {
	case <-c.Done():
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("the connection went on after its session was gone")
	}
	for _, r := range l.requests()[n:] {
		if strings.HasPrefix(r, "POST  ") {
			t.Errorf("a new session was initialized: %q", r)
		}
	}
}

// TestResumeNeedsStreamable: only a Streamable HTTP session with an id can
// be resumed; anything else is refused at Connect, saying so.
func TestResumeNeedsStreamable(t *testing.T) {
	_, url := newSessionLog(t)
	for name, r := range map[string]*client.Resumption{
		"no id":      {Init: initResult("2025-11-25")},
		"no version": {SessionID: "x"},
		"stateless":  {SessionID: "x", Init: initResult("2026-07-28")},
	} {
		_, err := client.Connect(context.Background(), client.NewStreamable(client.HTTPConfig{URL: url}), client.Options{Name: "t", Resume: r})
		if err == nil || !strings.Contains(err.Error(), "can be resumed") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

func initResult(v string) mcp.InitializeResult {
	return mcp.InitializeResult{ProtocolVersion: mcp.Revision(v)}
}
