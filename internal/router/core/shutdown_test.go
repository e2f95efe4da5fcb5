package core

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// Cut answers the calls still running with an error naming the shutdown,
// and every call that starts after it too; a call that ended before is
// not touched.
func TestCut(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{}) // a test that fails lets its held call go
	var calls atomic.Int32
	c, rte, _ := cannedCore(t, cannedUpstreamWith(func(r *http.Request) {
		if strings.Contains(r.Header.Get("Mcp-Session-Id"), "canned") {
			n := calls.Add(1)
			select {
			case started <- struct{}{}:
			default:
			}
			if n > 1 {
				// Every call after the first is in flight until it is
				// cut, however long Cut takes to come.
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the core's and host's
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
	for _, resp := range []*jsonrpc.Message{testwait.Recv(t, answer, "the cut call's answer"), c.Handle(context.Background(), sess, call, nil, nil)} {
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
	release := make(chan struct{}) // a test that fails lets its held call go
	c, rte, _ := cannedCore(t, cannedUpstreamWith(func(r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		select { // hangs until it is cut
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the core's and host's
	sess := NewRequestSession(context.Background(), rte, mcp.Version20260728, json.RawMessage(`{}`), nil, "", "", false)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	call := c.StartBridged(sess, msg, nil, nil)
	<-started
	c.Cut()
	done := make(chan Outcome, 1)
	go func() { done <- call.Next(nil, nil, func([]byte) {}) }()
	if out := testwait.Recv(t, done, "Cut to end the bridged call"); out.Resp == nil || out.Resp.Error == nil || !strings.Contains(out.Resp.Error.Message, "shutting down") {
		t.Errorf("a cut bridged call ended with %+v; want the shutdown error", out)
	}
}
