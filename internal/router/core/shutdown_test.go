package core

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Cut answers the calls still running with an error naming the shutdown,
// and every call that starts after it too; a call that ended before is
// not touched.
func TestCut(t *testing.T) {
	started := make(chan struct{}, 1)
	c, rte, _ := cannedCore(t, cannedUpstreamWith(func(r *http.Request) {
		if strings.Contains(r.Header.Get("Mcp-Session-Id"), "canned") {
			select {
			case started <- struct{}{}:
			default:
			}
			select { // the first call hangs until it is cut
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}))
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	call := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	if resp := c.Handle(context.Background(), sess, call, nil, nil); resp.Error != nil {
		t.Fatalf("a call before the cut: %v", resp.Error)
	}
	<-started // that one
	answer := make(chan *jsonrpc.Message, 1)
	go func() { answer <- c.Handle(context.Background(), sess, call, nil, nil) }()
	<-started
	c.Cut()
	for _, resp := range []*jsonrpc.Message{<-answer, c.Handle(context.Background(), sess, call, nil, nil)} {
		if resp.Error == nil || !strings.Contains(resp.Error.Message, "shutting down") {
			t.Errorf("a cut call was answered %s %+v; want the shutdown error", resp.Result, resp.Error)
		}
	}
	if n := len(c.cut.calls); n != 0 {
		t.Errorf("%d calls left registered", n)
	}
}

// A bridged call (a 2026-07-28 caller's routed request) is cut too, though
// Handle registers none: its context derives from the core's, which Cut
// cancels.
func TestCutBridged(t *testing.T) {
	started := make(chan struct{}, 1)
	c, rte, _ := cannedCore(t, cannedUpstreamWith(func(r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		select { // hangs until it is cut
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	sess := NewRequestSession(context.Background(), rte, mcp.Version20260728, json.RawMessage(`{}`), nil, "", "", false)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	call := c.StartBridged(sess, msg, nil, nil)
	<-started
	c.Cut()
	done := make(chan Outcome, 1)
	go func() { done <- call.Next(nil, nil, func([]byte) {}) }()
	select {
	case out := <-done:
		if out.Resp == nil || out.Resp.Error == nil || !strings.Contains(out.Resp.Error.Message, "shutting down") {
			t.Errorf("a cut bridged call ended with %+v; want the shutdown error", out)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Cut did not end the bridged call")
	}
}
