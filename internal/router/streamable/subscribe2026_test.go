package streamable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// TestSubscribeThroughModernUpstream: an upstream spoken to in 2026-07-28
// has no resources/subscribe; a legacy session's subscription reaches it as
// a resourceSubscriptions entry of the gateway's subscriptions/listen
// stream, and its updates reach the subscribed session only.
func TestSubscribeThroughModernUpstream(t *testing.T) {
	t.Parallel()
	rec := gatewaytest.NewFidMemLog()
	srv := gatewaytest.FidelityServer("up", rec, nil, true)
	// The SDK speaks 2026-07-28 over HTTP only when stateless.
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	up := &gatewaytest.FidUpstream{Name: "up", Srv: srv, Log: rec, Entry: fmt.Sprintf("  up:\n    url: %s/mcp\n    protocol: \"2026\"\n", ts.URL)}
	gw, base := gatewaytest.FidGatewayGW(t, "", up)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := gw.Host().Upstream("up").Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the gateway speaks %s to the upstream, want 2026-07-28", v)
	}

	watcher := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
		return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			inbox.Add(req.Params.URI)
		}}
	}
	inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
	a := gatewaytest.FidConnect(t, base+"/mcp", watcher(inA)) // 2025-11-25
	b := gatewaytest.FidConnect(t, base+"/mcp", watcher(inB))
	inboxes := map[string]*gatewaytest.FidInbox{"A": inA, "B": inB}

	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
		t.Fatalf("A subscribe: %v", err)
	}
	if !slices.Contains(rec.All(), "subscribe mem://watched") {
		t.Errorf("the upstream saw %q, want a subscription to mem://watched", rec.All())
	}
	gatewaytest.FidExpect(ctx, t, "B", b, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
	gatewaytest.FidSettle(t, inboxes, map[string][]string{"A": {"mem://watched"}})

	if err := a.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://watched"}); err != nil {
		t.Fatalf("A unsubscribe: %v", err)
	}
	// The last subscriber gone, the upstream stops watching too.
	for !slices.Contains(rec.All(), "unsubscribe mem://watched") {
		select {
		case <-rec.Events:
		case <-ctx.Done():
			t.Fatalf("the upstream saw %q, want the subscription to mem://watched ended", rec.All())
		}
	}
	gatewaytest.FidExpect(ctx, t, "B", b, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
	gatewaytest.FidSettle(t, inboxes, map[string][]string{"A": {"mem://watched"}})
}

// TestListenSubscriptionsObeyPolicy: the resources a subscriptions/listen
// stream names are subscribed like resources/subscribe, through the access
// policy: one the caller may not see is left out of the acknowledgement and
// never subscribed upstream.
func TestListenSubscriptionsObeyPolicy(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nupstreams:\n"+up.Entry+`policy:
  default: allow
  rules:
    - match: {routes: [/mcp]}
      allow: ["up__*", "resource:*"]
      deny: ["resource:up+mem://watched"]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["up+mem://watched"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"subscriptions/listen"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev, err := sse.NewReader(resp.Body, 1<<20).Next()
	if err != nil {
		t.Fatalf("no acknowledgement: %v", err)
	}
	var ack struct {
		Method string `json:"method"`
		Params struct {
			Notifications struct {
				ToolsListChanged      bool     `json:"toolsListChanged"`
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal(ev.Data, &ack); err != nil || ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first event %s: %v", ev.Data, err)
	}
	if !ack.Params.Notifications.ToolsListChanged || len(ack.Params.Notifications.ResourceSubscriptions) != 0 {
		t.Errorf("acknowledged %+v, want tools list changes and no denied resource", ack.Params.Notifications)
	}
	if got := up.Log.All(); slices.Contains(got, "subscribe mem://watched") {
		t.Errorf("the upstream saw %q: a denied resource was subscribed", got)
	}
}
