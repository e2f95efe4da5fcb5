package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

func TestNilRecordsNothing(t *testing.T) {
	var m *metrics.Metrics
	m.Request("/mcp", "tools/call", nil)
	m.RequestOutcome("/mcp", "tools/call", metrics.OutcomeDenied)
	m.CallStream("/mcp", 1)
	m.SetRouteSource(nil)
	m.SetUpstreamConnSource(nil)
	m.ConfigLoaded()
	m.ConfigReload(false)
	m.AuthFailure("invalid_token")
	m.PolicyDecision("/mcp", "deny")
	m.RateLimited("/mcp")
	m.BridgeParked(+1)
	m.BridgeRound(metrics.BridgeAsked)
	m.LimitRefused("sessions.max_sessions")
	u := m.Upstream("x")
	if u != nil {
		t.Fatal("nil Metrics gave a non-nil Upstream")
	}
	u.SetState("ready")
	u.Restart()
	u.HandshakeFailed()
	u.Breaker(true)
	u.Unavailable()
	u.CallDone("tools/call", u.CallStarted(), metrics.ReasonTimeout)
	if m.Registry() != nil {
		t.Fatal("nil Metrics has a registry")
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  *jsonrpc.Error
		want string
	}{
		{nil, "ok"},
		{&jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable}, "unavailable"},
		{&jsonrpc.Error{Code: mcp.CodeRequestTimeout}, "timeout"},
		{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams}, "invalid"},
		{&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound}, "invalid"},
		{&jsonrpc.Error{Code: mcp.CodeResourceNotFound}, "invalid"},
		{&jsonrpc.Error{Code: jsonrpc.CodeInternalError}, "error"},
		{&jsonrpc.Error{Code: -32000}, "error"},
	} {
		if got := metrics.OutcomeOf(tc.err).String(); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestSeriesAndLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{Version: "v1.2.3"})
	m.ConfigLoaded()
	for range 3 {
		m.Request("/mcp", "tools/call", nil)
	}
	m.Request("/mcp", "tools/call", &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable})
	m.Request("/mcp", "made/up", nil) // bounded: counted as "other"
	m.AuthFailure("invalid_token")
	m.PolicyDecision("/mcp", "deny")
	m.RateLimited("/mcp")
	m.CallStream("/mcp", +1)
	m.CallStream("/mcp", +1)
	m.CallStream("/mcp", -1)
	m.SetRouteSource(func() []metrics.RouteStats {
		return []metrics.RouteStats{{Route: "/mcp", Sessions: 4, Standalone: 2, Listen: 1}}
	})
	m.SetUpstreamConnSource(func() (int64, int64) { return 7, 3 })
	u := m.Upstream("fs")
	if m.Upstream("fs") != u {
		t.Fatal("Upstream is not memoized")
	}
	u.SetState("ready")
	u.Restart()
	u.HandshakeFailed()
	u.HandshakeFailed()
	u.Breaker(true)
	start := u.CallStarted()
	start2 := u.CallStarted()
	u.CallDone("tools/call", start, -1)
	u.CallDone("tools/call", start2, metrics.ReasonTimeout)
	u.Unavailable()

	want := `
# HELP mcpgw_requests_total Downstream MCP requests answered, by route, method and outcome (ok, error, invalid, unavailable, timeout, denied, rate_limited).
# TYPE mcpgw_requests_total counter
mcpgw_requests_total{method="other",outcome="ok",route="/mcp"} 1
mcpgw_requests_total{method="tools/call",outcome="ok",route="/mcp"} 3
mcpgw_requests_total{method="tools/call",outcome="unavailable",route="/mcp"} 1
# HELP mcpgw_sessions_active Live downstream sessions (Streamable HTTP and legacy HTTP+SSE), by route.
# TYPE mcpgw_sessions_active gauge
mcpgw_sessions_active{route="/mcp"} 4
# HELP mcpgw_streams_open Open downstream SSE streams, by route and kind (call: a response stream; standalone: a session's GET or legacy SSE stream; listen: subscriptions/listen).
# TYPE mcpgw_streams_open gauge
mcpgw_streams_open{kind="call",route="/mcp"} 1
mcpgw_streams_open{kind="listen",route="/mcp"} 1
mcpgw_streams_open{kind="standalone",route="/mcp"} 2
# HELP mcpgw_upstream_http_connections_opened_total Connections opened to plain-http upstreams (kept ones are reused: a rate that follows the call rate is churn).
# TYPE mcpgw_upstream_http_connections_opened_total counter
mcpgw_upstream_http_connections_opened_total 7
# HELP mcpgw_upstream_http_connections_idle Connections to plain-http upstreams kept idle for the next request (bounded per upstream address and in all; one past the bound is closed).
# TYPE mcpgw_upstream_http_connections_idle gauge
mcpgw_upstream_http_connections_idle 3
# HELP mcpgw_upstream_state Upstream connection state: 1 for the current state (starting, ready, down, breaker_open, stopped), 0 for the others.
# TYPE mcpgw_upstream_state gauge
mcpgw_upstream_state{state="breaker_open",upstream="fs"} 0
mcpgw_upstream_state{state="down",upstream="fs"} 0
mcpgw_upstream_state{state="ready",upstream="fs"} 1
mcpgw_upstream_state{state="starting",upstream="fs"} 0
mcpgw_upstream_state{state="stopped",upstream="fs"} 0
# HELP mcpgw_upstream_up Whether the upstream is connected and ready (1) or not (0).
# TYPE mcpgw_upstream_up gauge
mcpgw_upstream_up{upstream="fs"} 1
# HELP mcpgw_upstream_restarts_total Reconnection attempts after the upstream failed or was lost (for a stdio upstream: child processes respawned).
# TYPE mcpgw_upstream_restarts_total counter
mcpgw_upstream_restarts_total{upstream="fs"} 1
# HELP mcpgw_upstream_handshake_failures_total Connection attempts that failed: the child did not start, the server did not answer, or the handshake failed.
# TYPE mcpgw_upstream_handshake_failures_total counter
mcpgw_upstream_handshake_failures_total{upstream="fs"} 2
# HELP mcpgw_upstream_breaker_open 1 while the upstream's crash-loop breaker is open (failing repeatedly; retried slowly), else 0.
# TYPE mcpgw_upstream_breaker_open gauge
mcpgw_upstream_breaker_open{upstream="fs"} 1
# HELP mcpgw_upstream_breaker_opens_total Times the upstream's crash-loop breaker opened.
# TYPE mcpgw_upstream_breaker_opens_total counter
mcpgw_upstream_breaker_opens_total{upstream="fs"} 1
# HELP mcpgw_upstream_inflight_calls Calls in flight to each upstream.
# TYPE mcpgw_upstream_inflight_calls gauge
mcpgw_upstream_inflight_calls{upstream="fs"} 0
# HELP mcpgw_upstream_call_errors_total Upstream calls that did not return a result, by upstream and reason (unavailable, timeout, cancelled, transport, error_response).
# TYPE mcpgw_upstream_call_errors_total counter
mcpgw_upstream_call_errors_total{reason="timeout",upstream="fs"} 1
mcpgw_upstream_call_errors_total{reason="unavailable",upstream="fs"} 1
# HELP mcpgw_config_last_reload_successful Whether the last configuration load or reload succeeded (1) or failed (0).
# TYPE mcpgw_config_last_reload_successful gauge
mcpgw_config_last_reload_successful 1
# HELP mcpgw_config_reloads_total Configuration reloads, by result (success, failure).
# TYPE mcpgw_config_reloads_total counter
mcpgw_config_reloads_total{result="failure"} 0
mcpgw_config_reloads_total{result="success"} 0
`
	names := []string{
		"mcpgw_requests_total", "mcpgw_sessions_active", "mcpgw_streams_open", "mcpgw_upstream_state",
		"mcpgw_upstream_up", "mcpgw_upstream_restarts_total", "mcpgw_upstream_handshake_failures_total",
		"mcpgw_upstream_breaker_open", "mcpgw_upstream_breaker_opens_total", "mcpgw_upstream_inflight_calls",
		"mcpgw_upstream_call_errors_total", "mcpgw_config_last_reload_successful", "mcpgw_config_reloads_total",
		"mcpgw_upstream_http_connections_opened_total", "mcpgw_upstream_http_connections_idle",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "mcpgw_upstream_call_duration_seconds"); n != 1 {
		t.Errorf("call duration series = %d, want 1 (upstream fs, tools/call)", n)
	}
	if ts := gaugeValue(t, reg, "mcpgw_config_last_reload_success_timestamp_seconds"); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("reload timestamp = %v, want about now", ts)
	}

	m.ConfigReload(false)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpgw_config_last_reload_successful Whether the last configuration load or reload succeeded (1) or failed (0).
# TYPE mcpgw_config_last_reload_successful gauge
mcpgw_config_last_reload_successful 0
# HELP mcpgw_config_reloads_total Configuration reloads, by result (success, failure).
# TYPE mcpgw_config_reloads_total counter
mcpgw_config_reloads_total{result="failure"} 1
mcpgw_config_reloads_total{result="success"} 0
`), "mcpgw_config_last_reload_successful", "mcpgw_config_reloads_total"); err != nil {
		t.Fatal(err)
	}

	// Names, help and types follow the Prometheus conventions (promlint,
	// what promtool check metrics runs).
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "mcpgw_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	// The Go and process collectors are there.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total", "mcpgw_build_info"} {
		if !seen[n] {
			t.Errorf("%s is not exported", n)
		}
	}
}

// Every bound is exported at 0 from the start (alerts see it before its
// first refusal); a stateful upstream's appear when first refused.
func TestLimitRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	if n := testutil.CollectAndCount(reg, "mcpgw_limit_refusals_total"); n != len(metrics.Bounds) {
		t.Errorf("%d series at start, want one per bound (%d)", n, len(metrics.Bounds))
	}
	m.LimitRefused("sessions.max_sessions")
	m.LimitRefused("sessions.max_sessions")
	m.LimitRefused("upstreams.fs.max_sessions")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpgw_limit_refusals_total Requests refused, and clients disconnected, because a configured bound was full, by bound (its config key, e.g. sessions.max_sessions).
# TYPE mcpgw_limit_refusals_total counter
mcpgw_limit_refusals_total{bound="read_body_timeout"} 0
mcpgw_limit_refusals_total{bound="sessions.max_parked_calls"} 0
mcpgw_limit_refusals_total{bound="sessions.max_parked_calls_per_principal"} 0
mcpgw_limit_refusals_total{bound="sessions.max_replay_streams"} 0
mcpgw_limit_refusals_total{bound="sessions.max_requests_per_session"} 0
mcpgw_limit_refusals_total{bound="sessions.max_sessions"} 2
mcpgw_limit_refusals_total{bound="sessions.max_sessions_per_principal"} 0
mcpgw_limit_refusals_total{bound="sessions.sse_write_timeout"} 0
mcpgw_limit_refusals_total{bound="upstreams.fs.max_sessions"} 1
`), "mcpgw_limit_refusals_total"); err != nil {
		t.Fatal(err)
	}
}

func TestTwoRegistriesDoNotCollide(t *testing.T) {
	a := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	b := metrics.New(prometheus.NewRegistry(), metrics.Options{})
	a.Request("/mcp", "ping", nil)
	if testutil.CollectAndCount(b.Registry(), "mcpgw_requests_total") != 0 {
		t.Fatal("a request on one registry showed on the other")
	}
}

// gaugeValue reads an unlabelled gauge on reg by name.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not found", name)
	return 0
}

// BenchmarkRequest measures the hot-path cost of counting one request and
// one upstream call.
func BenchmarkRequest(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
	u := m.Upstream("fs")
	b.ReportAllocs()
	for b.Loop() {
		s := u.CallStarted()
		u.CallDone("tools/call", s, -1)
		m.Request("/mcp", "tools/call", nil)
	}
}
