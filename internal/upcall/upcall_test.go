package upcall_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// TestWithHeaders: nil leaves what an outer WithHeaders set; a non-nil
// set, even an empty one, replaces it.
func TestWithHeaders(t *testing.T) {
	ctx := context.Background()
	if _, ok := upcall.HeadersFrom(ctx); ok {
		t.Fatal("headers found in a bare context")
	}
	outer := http.Header{"Mcp-Param-A": {"1"}}
	ctx = upcall.WithHeaders(ctx, outer)
	if h, ok := upcall.HeadersFrom(upcall.WithHeaders(ctx, nil)); !ok || h.Get("Mcp-Param-A") != "1" {
		t.Errorf("nil replaced the outer headers: %v, %v", h, ok)
	}
	if h, ok := upcall.HeadersFrom(upcall.WithHeaders(ctx, http.Header{})); !ok || len(h) != 0 {
		t.Errorf("an empty set did not replace the outer headers: %v, %v", h, ok)
	}
}

type handler struct{ progress, notify, request int }

func (h *handler) Progress(json.RawMessage)       { h.progress++ }
func (h *handler) Notify(string, json.RawMessage) { h.notify++ }
func (h *handler) Request(context.Context, string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	h.request++
	return json.RawMessage(`{}`), nil
}

// TestCallOptionsHandler: Handler takes what the func fields leave nil,
// the func fields win where set, Roots answers roots/list, and Expand
// moves Handler into the fields.
func TestCallOptionsHandler(t *testing.T) {
	var zero upcall.CallOptions
	if zero.CanAsk() || zero.Interactive() || zero.ProgressFunc() != nil || zero.NotifyFunc() != nil {
		t.Fatal("zero options relay something")
	}
	h := &handler{}
	o := upcall.CallOptions{Handler: h}
	o.ProgressFunc()(nil)
	o.NotifyFunc()("m", nil)
	if _, err := o.Ask(context.Background(), mcp.MethodSamplingCreateMessage, nil); err != nil {
		t.Fatal(err)
	}
	if h.progress != 1 || h.notify != 1 || h.request != 1 || !o.CanAsk() || !o.Interactive() {
		t.Errorf("through Handler: %+v, CanAsk %v, Interactive %v", h, o.CanAsk(), o.Interactive())
	}
	own := 0
	o.Notify = func(string, json.RawMessage) { own++ }
	o.Roots = func() json.RawMessage { return json.RawMessage(`{"roots":[]}`) }
	o.NotifyFunc()("m", nil)
	if res, _ := o.Ask(context.Background(), mcp.MethodRootsList, nil); string(res) != `{"roots":[]}` || own != 1 || h.notify != 1 || h.request != 1 {
		t.Errorf("own Notify and Roots: roots %s, own %d, handler %+v", res, own, h)
	}
	o.Expand()
	if o.Handler != nil || o.Progress == nil || o.Request == nil {
		t.Error("Expand left Handler or did not fill the fields")
	}
	o.Notify("m", nil)
	if own != 2 {
		t.Error("Expand replaced a Notify that was set")
	}
	if bg := (upcall.CallOptions{Handler: h, Background: true}); bg.Interactive() {
		t.Error("a background call is interactive")
	}
}
