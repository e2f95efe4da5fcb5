package gateway_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// After known traffic — allowed calls, policy denials, a rate limit,
// requests without or with a bad credential — /metrics holds the per-tool
// series, the denied and rate_limited outcomes apart from errors, and the
// authentication failures by reason, with exact values.
func TestMetricsPerToolDeniedAndAuthFailures(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0"}
upstreams:
  alpha: {url: %s}
auth:
  api_keys:
    - {name: eng, key: eng-key-0123456789, principal: alice, groups: [eng]}
    - {name: ops, key: ops-key-0123456789, principal: bob, groups: [ops]}
policy:
  default: deny
  rules:
    - match: {groups: [eng]}
      allow: ["alpha__*"]
    - match: {groups: [ops]}
      allow: ["alpha__echo"]
  rate_limits:
    tools:
      - {tool: alpha__progress, rate: 1/m, burst: 1}
`, alpha), gateway.Options{})

	client := func(key string) *gatewaytest.RawClient {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Authorization": {"Bearer " + key}}}
		c.Initialize("2025-11-25")
		return c
	}
	alice, bob := client("eng-key-0123456789"), client("ops-key-0123456789")
	id := 0
	call := func(c *gatewaytest.RawClient, tool, args string) {
		id++
		c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)).Last(t)
	}
	for range 3 {
		call(alice, "alpha__echo", `{"text":"x"}`)
	}
	call(alice, "alpha__slow", `{"ms":1}`)
	for range 2 {
		call(bob, "alpha__slow", `{"ms":1}`) // the ops group may not: denied
	}
	call(alice, "alpha__progress", `{"tag":"a"}`)
	call(alice, "alpha__progress", `{"tag":"b"}`) // over the limit: rate_limited
	for range 2 {
		(&gatewaytest.RawClient{T: t, URL: base + "/mcp"}).Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`) // no credentials
	}
	(&gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Authorization": {"Bearer not-a-key-0123456789"}}}).Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)

	mfs, body := gatewaytest.Scrape(t, admin)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "tools/call", "outcome", "ok"}, 5},
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "tools/call", "outcome", "denied"}, 2},
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "tools/call", "outcome", "rate_limited"}, 1},
		{"mcpgw_tool_calls_total", []string{"route", "/mcp", "tool", "alpha__echo", "outcome", "ok"}, 3},
		{"mcpgw_tool_calls_total", []string{"route", "/mcp", "tool", "alpha__slow", "outcome", "ok"}, 1},
		{"mcpgw_tool_calls_total", []string{"route", "/mcp", "tool", "alpha__slow", "outcome", "denied"}, 2},
		{"mcpgw_tool_calls_total", []string{"route", "/mcp", "tool", "alpha__progress", "outcome", "ok"}, 1},
		{"mcpgw_tool_calls_total", []string{"route", "/mcp", "tool", "alpha__progress", "outcome", "rate_limited"}, 1},
		{"mcpgw_tool_call_duration_seconds_count", []string{"route", "/mcp", "tool", "alpha__echo"}, 3},
		{"mcpgw_tool_call_duration_seconds_count", []string{"route", "/mcp", "tool", "alpha__slow"}, 3},
		{"mcpgw_request_duration_seconds_count", []string{"route", "/mcp", "method", "tools/call"}, 8},
		{"mcpgw_auth_failures_total", []string{"reason", "no_credentials"}, 2},
		{"mcpgw_auth_failures_total", []string{"reason", "malformed"}, 1},
		{"mcpgw_policy_decisions_total", []string{"route", "/mcp", "decision", "deny"}, 2},
		{"mcpgw_rate_limited_total", []string{"route", "/mcp"}, 1},
		{"mcpgw_metric_names_overflow_total", []string{"kind", "tool"}, 0},
	} {
		got, ok := gatewaytest.Sample(mfs, c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Refusals are not errors: no error or invalid series at all.
	for _, o := range []string{"error", "invalid"} {
		if v, ok := gatewaytest.Sample(mfs, "mcpgw_requests_total", "method", "tools/call", "outcome", o); ok {
			t.Errorf("tools/call outcome %s = %v; refusals counted as errors", o, v)
		}
	}
	if _, ok := gatewaytest.Sample(mfs, "mcpgw_tool_calls_total", "tool", "other"); ok {
		t.Error(`a tool counted as "other" under the bound`)
	}
	gatewaytest.PromtoolCheck(t, body)
}
