package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// refusedBy reports the bound a -32004 refusal names ("" for none).
func refusedBy(e *jsonrpc.Error) string {
	if e == nil || e.Code != mcp.CodeRateLimited {
		return ""
	}
	var d struct {
		Bound string `json:"bound"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Bound
}

func limitRefusals(t *testing.T, m *metrics.Metrics, bound string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mcpgw_limit_refusals_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetLabel()[0].GetValue() == bound {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSubscriptionBounds (issue 27.2): resource subscriptions are bounded
// per session, per principal and in URI length, and listen streams per
// principal and in how many subscriptions one names; each refusal names
// its key and is counted, and what is released frees its slot. Before the
// fix every subscription was taken: one API key held 9,000 subscriptions
// to 64 KiB URIs (808 MB) with no refusal.
func TestSubscriptionBounds(t *testing.T) {
	c, routes := capabilityFixture(t)
	m := metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
	c.opts.Metrics = m
	rte := routes["/rich"]
	rte.Gen.Limits.MaxSubscriptionsPerSession = 3
	rte.Gen.Limits.MaxSubscriptionsPerPrincipal = 5
	rte.Gen.Limits.MaxListenStreamsPerPrincipal = 1
	rte.Gen.Limits.MaxSubscriptionURIBytes = 100
	ctx := context.Background()
	alice := &auth.Principal{Subject: "alice", APIKey: "a"}
	subscribe := func(s *Session, method, uri string) *jsonrpc.Error {
		t.Helper()
		params, _ := json.Marshal(map[string]string{"uri": uri})
		return c.Handle(ctx, s, jsonrpc.NewRequest(jsonrpc.IntID(1), method, params), nil, nil).Error
	}

	a := NewSession("a", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, alice)
	if e := subscribe(a, mcp.MethodResourcesSubscribe, "mem://"+strings.Repeat("x", 200)); e == nil || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "sessions.max_subscription_uri_bytes") {
		t.Errorf("a 206-byte URI: %+v, want -32602 naming sessions.max_subscription_uri_bytes", e)
	}
	for _, u := range []string{"mem://a1", "mem://a2", "mem://a3", "mem://a1"} {
		if e := subscribe(a, mcp.MethodResourcesSubscribe, u); e != nil {
			t.Fatalf("subscribe %s: %+v", u, e)
		}
	}
	if e := subscribe(a, mcp.MethodResourcesSubscribe, "mem://a4"); refusedBy(e) != "sessions.max_subscriptions_per_session" {
		t.Errorf("a 4th subscription on a session: %+v, want sessions.max_subscriptions_per_session", e)
	}
	b := NewSession("b", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, alice)
	defer c.EndSession(b)
	for _, u := range []string{"mem://b1", "mem://b2"} {
		if e := subscribe(b, mcp.MethodResourcesSubscribe, u); e != nil {
			t.Fatalf("subscribe %s: %+v", u, e)
		}
	}
	if e := subscribe(b, mcp.MethodResourcesSubscribe, "mem://b3"); refusedBy(e) != "sessions.max_subscriptions_per_principal" {
		t.Errorf("alice's 6th subscription: %+v, want sessions.max_subscriptions_per_principal", e)
	}
	// What is released frees its slot: an unsubscribe, a session's end.
	if e := subscribe(a, mcp.MethodResourcesUnsubscribe, "mem://a1"); e != nil {
		t.Fatal(e)
	}
	if e := subscribe(b, mcp.MethodResourcesSubscribe, "mem://b3"); e != nil {
		t.Errorf("after an unsubscribe: %+v", e)
	}
	c.EndSession(a)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) { // a poll, bounded by deadline
		c.subs.mu.Lock()
		n := c.subs.perPrincipal[alice.Key()]
		c.subs.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice holds %d subscriptions after her first session ended, want 3", n)
		}
	}

	// A listen stream: its fan-out, and the streams one principal keeps.
	listen := func(uris ...string) (func(), *jsonrpc.Error) {
		t.Helper()
		s := NewRequestSession(ctx, rte, mcp.Version20260728, json.RawMessage(`{}`), nil, alice.Key(), "", true)
		params, _ := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris}})
		_, end, e := c.OpenListen(ctx, s, jsonrpc.NewRequest(jsonrpc.ID(`"L"`), mcp.MethodSubscriptionsListen, params))
		return func() { end(); s.End() }, e
	}
	if _, e := listen("mem://l1", "mem://l2", "mem://l3", "mem://l4"); refusedBy(e) != "sessions.max_subscriptions_per_session" {
		t.Errorf("a listen naming 4 resources: %+v, want sessions.max_subscriptions_per_session", e)
	}
	end, e := listen("mem://l1")
	if e != nil {
		t.Fatal(e)
	}
	if _, e := listen(); refusedBy(e) != "sessions.max_listen_streams_per_principal" {
		t.Errorf("alice's 2nd listen stream: %+v, want sessions.max_listen_streams_per_principal", e)
	}
	end()
	end, e = listen()
	if e != nil {
		t.Errorf("a listen stream after the first ended: %+v", e)
	} else {
		end()
	}
	for _, bound := range []string{"sessions.max_subscription_uri_bytes", "sessions.max_subscriptions_per_session", "sessions.max_subscriptions_per_principal", "sessions.max_listen_streams_per_principal"} {
		if limitRefusals(t, m, bound) < 1 {
			t.Errorf("mcpgw_limit_refusals_total{bound=%q} not counted", bound)
		}
	}
}
