package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// After known traffic, /metrics on the admin listener holds the series with
// the right values; the MCP listener does not serve it.
func TestMetricsAfterKnownTraffic(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 2)
	exe := gatewaytest.StdioUpstream(t)
	_, base, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0"}
upstreams:
  alpha:
    url: %s
  beta:
    command: [%q]
    env: {MCPGW_TEST_STDIO_SERVER: beta}
`, alpha, exe), gateway.Options{})

	cs := gatewaytest.Connect(t, base+"/mcp", nil, "2025-11-25") // a session (2026-07-28 is stateless)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"text": "b"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch__tool"}); err == nil {
		t.Fatal("a call to an unknown upstream succeeded")
	}
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Fatal(err)
	}

	mfs, body := gatewaytest.Scrape(t, admin)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "tools/call", "outcome", "ok"}, 5},
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "tools/call", "outcome", "invalid"}, 1},
		{"mcpgw_requests_total", []string{"route", "/mcp", "method", "prompts/list", "outcome", "ok"}, 1},
		{"mcpgw_upstream_call_duration_seconds_count", []string{"upstream", "alpha", "method", "tools/call"}, 3},
		{"mcpgw_upstream_call_duration_seconds_count", []string{"upstream", "beta", "method", "tools/call"}, 2},
		{"mcpgw_upstream_inflight_calls", []string{"upstream", "alpha"}, 0},
		{"mcpgw_upstream_up", []string{"upstream", "alpha"}, 1},
		{"mcpgw_upstream_up", []string{"upstream", "beta"}, 1},
		{"mcpgw_upstream_state", []string{"upstream", "beta", "state", "ready"}, 1},
		{"mcpgw_upstream_state", []string{"upstream", "beta", "state", "down"}, 0},
		{"mcpgw_upstream_restarts_total", []string{"upstream", "beta"}, 0},
		{"mcpgw_upstream_handshake_failures_total", []string{"upstream", "beta"}, 0},
		{"mcpgw_upstream_breaker_open", []string{"upstream", "beta"}, 0},
		{"mcpgw_sessions_active", []string{"route", "/mcp"}, 1},
		{"mcpgw_streams_open", []string{"route", "/mcp", "kind", "call"}, 0},
		{"mcpgw_config_last_reload_successful", nil, 1},
		{"mcpgw_config_reloads_total", []string{"result", "failure"}, 0},
		{"mcpgw_build_info", []string{"version", "test"}, 1},
	} {
		got, ok := gatewaytest.Sample(mfs, c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// alpha's handshake, listings and calls are a dozen requests in turn
	// (its GET stream holds one connection): kept connections carry them.
	if opened, _ := gatewaytest.Sample(mfs, "mcpgw_upstream_http_connections_opened_total"); opened < 1 || opened > 4 {
		t.Errorf("mcpgw_upstream_http_connections_opened_total = %v, want 1-4 (connections reused)", opened)
	}
	// A connection goes back to the pool once its answer's body is read
	// to the end, which may come just after the caller has its answer.
	testwait.Until(t, "the last call's connection kept idle (mcpgw_upstream_http_connections_idle >= 1)", func() bool {
		m, _ := gatewaytest.Scrape(t, admin)
		idle, ok := gatewaytest.Sample(m, "mcpgw_upstream_http_connections_idle")
		return ok && idle >= 1
	})
	if sum, _ := gatewaytest.Sample(mfs, "mcpgw_upstream_call_duration_seconds_sum", "upstream", "alpha", "method", "tools/call"); sum <= 0 || sum > 10 {
		t.Errorf("alpha tools/call duration sum = %v s, want a small positive number", sum)
	}
	if ts, _ := gatewaytest.Sample(mfs, "mcpgw_config_last_reload_success_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("config load timestamp %v is not recent", ts)
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if mfs[n] == nil {
			t.Errorf("%s missing: the Go and process collectors should be registered", n)
		}
	}
	gatewaytest.PromtoolCheck(t, body)

	// Never on the MCP listener.
	if status, _ := gatewaytest.HTTPGet(t, base+"/metrics"); status != http.StatusNotFound {
		t.Errorf("MCP listener /metrics: HTTP %d, want 404", status)
	}
	if status, _ := gatewaytest.HTTPGet(t, admin+"/mcp"); status != http.StatusNotFound {
		t.Errorf("admin listener /mcp: HTTP %d, want 404", status)
	}
}

// /readyz depends on the upstreams marked required, and only on those.
func TestReadyzRequiredUpstreams(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 2)
	// Nothing listens on a port we just closed.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()

	t.Run("required upstream down", func(t *testing.T) {
		_, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
admin: {listen: "127.0.0.1:0"}
upstreams:
  alpha: {url: %q, required: true}
  dead: {url: %q, required: true}
`, alpha, dead), gateway.Options{})
		status, r := gatewaytest.Readiness(t, admin)
		if status != http.StatusServiceUnavailable || r.Ready {
			t.Fatalf("/readyz = %d %+v, want 503", status, r)
		}
		if len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], `"dead"`) || r.Upstreams["alpha"].State != "ready" {
			t.Errorf("reasons %q, upstreams %+v: want only dead named", r.Reasons, r.Upstreams)
		}
		if status, body := gatewaytest.HTTPGet(t, admin+"/healthz"); status != http.StatusOK {
			t.Errorf("/healthz = %d %s, want 200 (alive even when not ready)", status, body)
		}
	})
	t.Run("optional upstream down", func(t *testing.T) {
		_, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
admin: {listen: "127.0.0.1:0"}
upstreams:
  alpha: {url: %q, required: true}
  dead: {url: %q}
`, alpha, dead), gateway.Options{})
		status, r := gatewaytest.Readiness(t, admin)
		if status != http.StatusOK || !r.Ready || !r.Listener || !r.ConfigLoaded {
			t.Fatalf("/readyz = %d %+v, want 200", status, r)
		}
		if r.Upstreams["dead"].State != "down" || r.Upstreams["dead"].Error == "" {
			t.Errorf("dead upstream reported as %+v", r.Upstreams["dead"])
		}
	})
}

// Shutdown turns /readyz 503 first, keeps serving through ShutdownDelay,
// then stops accepting.
func TestReadyzTurns503FirstOnShutdown(t *testing.T) {
	// Not parallel: it checks what happens within a 500 ms shutdown delay, even on a loaded machine.
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 2)
	gw, base, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
admin: {listen: "127.0.0.1:0"}
upstreams:
  alpha: {url: %q}
`, alpha), gateway.Options{ShutdownDelay: 500 * time.Millisecond})
	if status, _ := gatewaytest.Readiness(t, admin); status != http.StatusOK {
		t.Fatalf("/readyz before shutdown = %d", status)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- gw.Shutdown(ctx)
	}()
	deadline := time.Now().Add(2 * time.Second)
	for {
		status, r := gatewaytest.Readiness(t, admin)
		if status == http.StatusServiceUnavailable {
			if !r.ShuttingDown {
				t.Errorf("503 without shutting_down: %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz never turned 503")
		}
		time.Sleep(5 * time.Millisecond) // a poll, bounded by deadline
	}
	// Still serving MCP while load balancers catch up.
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("MCP during the shutdown delay: %v", err)
	}
	_ = cs.Close()
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := http.Get(admin + "/readyz"); err == nil {
		t.Error("admin listener still up after Shutdown")
	}
}
