package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSubscribeThroughModernUpstream: an upstream spoken to in 2026-07-28
// has no resources/subscribe; a legacy session's subscription reaches it as
// a resourceSubscriptions entry of the gateway's subscriptions/listen
// stream, and its updates reach the subscribed session only.
func TestSubscribeThroughModernUpstream(t *testing.T) {
	rec := newFidMemLog()
	srv := fidelityServer("up", rec, nil, true)
	// The SDK speaks 2026-07-28 over HTTP only when stateless.
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	up := &fidUpstream{name: "up", srv: srv, log: rec, entry: fmt.Sprintf("  up:\n    url: %s/mcp\n    protocol: \"2026\"\n", ts.URL)}
	gw, base := fidGatewayGW(t, "", up)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := gw.Host().Upstream("up").Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the gateway speaks %s to the upstream, want 2026-07-28", v)
	}

	watcher := func(inbox *fidInbox) *mcp.ClientOptions {
		return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			inbox.add(req.Params.URI)
		}}
	}
	inA, inB := &fidInbox{}, &fidInbox{}
	a := fidConnect(t, base+"/mcp", watcher(inA)) // 2025-11-25
	b := fidConnect(t, base+"/mcp", watcher(inB))
	inboxes := map[string]*fidInbox{"A": inA, "B": inB}

	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
		t.Fatalf("A subscribe: %v", err)
	}
	if !slices.Contains(rec.all(), "subscribe mem://watched") {
		t.Errorf("the upstream saw %q, want a subscription to mem://watched", rec.all())
	}
	fidExpect(ctx, t, "B", b, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
	fidSettle(t, inboxes, map[string][]string{"A": {"mem://watched"}})

	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://watched"}); err != nil {
		t.Fatalf("A unsubscribe: %v", err)
	}
	// The last subscriber gone, the upstream stops watching too.
	for !slices.Contains(rec.all(), "unsubscribe mem://watched") {
		select {
		case <-rec.events:
		case <-ctx.Done():
			t.Fatalf("the upstream saw %q, want the subscription to mem://watched ended", rec.all())
		}
	}
	fidExpect(ctx, t, "B", b, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
	fidSettle(t, inboxes, map[string][]string{"A": {"mem://watched"}})
}
