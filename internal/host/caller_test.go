package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// TestCaller: the one request-scope value carries every field the router
// sets; the single-field helpers change only their own field (of a copy:
// the value handed to WithCaller is never written); CallOnly drops the
// capabilities for what a capability view does not serve and keeps the
// rest.
func TestCaller(t *testing.T) {
	caps := json.RawMessage(`{"sampling":{}}`)
	sess := &host.Caller{Session: "s1", Capabilities: caps, Route: "/mcp", Principal: "apikey\x00ci"}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		want     host.Caller
		wantCaps bool
	}{
		{"none", context.Background(), host.Caller{}, false},
		{"WithCaller", host.WithCaller(context.Background(), sess), *sess, true},
		{"WithSession keeps the rest", host.WithSession(host.WithCaller(context.Background(), sess), "s2"),
			host.Caller{Session: "s2", Capabilities: caps, Route: "/mcp", Principal: "apikey\x00ci"}, true},
		{"WithCallerCapabilities over WithSession", host.WithCallerCapabilities(host.WithSession(context.Background(), "s3"), caps),
			host.Caller{Session: "s3", Capabilities: caps}, true},
		{"empty capabilities record none", host.WithCallerCapabilities(context.Background(), nil), host.Caller{}, false},
		{"empty session records none", host.WithSession(host.WithCaller(context.Background(), sess), ""), *sess, true},
		{"CallOnly, a call", host.CallOnly(host.WithCaller(context.Background(), sess), mcp.MethodToolsCall), *sess, true},
		{"CallOnly, a subscription", host.CallOnly(host.WithCaller(context.Background(), sess), mcp.MethodResourcesSubscribe),
			host.Caller{Session: "s1", Route: "/mcp", Principal: "apikey\x00ci"}, false},
	} {
		got := host.CallerOf(tc.ctx)
		if got.Session != tc.want.Session || string(got.Capabilities) != string(tc.want.Capabilities) || got.Route != tc.want.Route || got.Principal != tc.want.Principal {
			t.Errorf("%s: CallerOf = %+v, want %+v", tc.name, got, tc.want)
		}
		if c, ok := host.CallerCapabilities(tc.ctx); ok != tc.wantCaps || string(c) != string(tc.want.Capabilities) {
			t.Errorf("%s: CallerCapabilities = %s, %v; want %s, %v", tc.name, c, ok, tc.want.Capabilities, tc.wantCaps)
		}
	}
	if sess.Session != "s1" || string(sess.Capabilities) != string(caps) {
		t.Errorf("a helper wrote the caller handed to WithCaller: %+v", sess)
	}
}
