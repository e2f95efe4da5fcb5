package core_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// TestBadInputs checks that every kind of bad input gets one clear answer
// and that nothing else is affected.
func TestBadInputs(t *testing.T) {
	// Not parallel: a 300 ms upstream timeout is part of what it checks, even on a loaded machine.
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	slow := gatewaytest.HTTPUpstream(t, "slowpoke", 0)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
max_body_bytes: 2048
allowed_origins: [https://app.example.com]
upstreams:
  alpha:
    url: %s
  broken:
    command: [/nonexistent/mcp-server]
    startup_timeout: 2s
  slowpoke:
    url: %s
    timeout: 300ms
`, alpha, slow))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")

	call := func(name, args string) *gatewaytest.RawResponse {
		return c.Post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`)
	}

	t.Run("malformed JSON", func(t *testing.T) {
		r := c.Post(`{"jsonrpc":"2.0","id":1,"method":`)
		if r.Status != http.StatusBadRequest || gatewaytest.ErrorOf(t, r).Code != jsonrpc.CodeParseError {
			t.Errorf("HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("batch", func(t *testing.T) {
		r := c.Post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
		if r.Status != http.StatusBadRequest || gatewaytest.ErrorOf(t, r).Code != jsonrpc.CodeInvalidRequest || !strings.Contains(string(r.Body), "batches") {
			t.Errorf("HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		r := c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/frobnicate"}`)
		if e := gatewaytest.ErrorOf(t, r); e.Code != jsonrpc.CodeMethodNotFound || r.Last(t).ID.String() != "2" {
			t.Errorf("got %+v id %s", e, r.Last(t).ID)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		for _, name := range []string{"nosuch__echo", "noprefix", "alpha__"} {
			if e := gatewaytest.ErrorOf(t, call(name, `{}`)); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, name) {
				t.Errorf("%s: %+v", name, e)
			}
		}
		// A tool the upstream does not have: the upstream's own error passes through.
		r := call("alpha__nosuch", `{}`)
		if m := r.Last(t); m.Error == nil && !strings.Contains(string(m.Result), `"isError":true`) {
			t.Errorf("alpha__nosuch: %s", r.Body)
		}
	})
	t.Run("unknown prompt", func(t *testing.T) {
		r := c.Post(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"zzz__greet"}}`)
		if e := gatewaytest.ErrorOf(t, r); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "unknown prompt") {
			t.Errorf("%+v", e)
		}
	})
	t.Run("unknown resource", func(t *testing.T) {
		r := c.Post(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`)
		if e := gatewaytest.ErrorOf(t, r); e.Code != mcp.CodeResourceNotFound || !strings.Contains(e.Message, `"file:///etc/passwd?mcpgw=<upstream>"`) {
			t.Errorf("%+v", e)
		}
	})
	t.Run("upstream down", func(t *testing.T) {
		e := gatewaytest.ErrorOf(t, call("broken__echo", `{}`))
		// It names the upstream and the request id; why it is down (the
		// start error) is the operator's, in the log.
		if e.Code != mcp.CodeUpstreamUnavailable || !strings.Contains(e.Message, `"broken"`) || !strings.Contains(e.Message, "request id ") || strings.Contains(e.Message, "/nonexistent/mcp-server") {
			t.Errorf("%+v", e)
		}
		// Its tools are absent; the others are listed.
		r := c.Post(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
		res := string(r.Last(t).Result)
		if strings.Contains(res, "broken__") || !strings.Contains(res, "alpha__echo") {
			t.Errorf("tools/list with a down upstream: %s", res)
		}
	})
	t.Run("upstream timeout", func(t *testing.T) {
		start := time.Now()
		e := gatewaytest.ErrorOf(t, call("slowpoke__slow", `{"ms":30000}`))
		if e.Code != mcp.CodeRequestTimeout || !strings.Contains(e.Message, `"slowpoke"`) || !strings.Contains(e.Message, "300ms") {
			t.Errorf("%+v", e)
		}
		// The 300ms timeout, not the tool's 30s, ended the call: a bound
		// between the two that load cannot cross.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("timeout took %s", d)
		}
		// The same upstream and the others still answer, each its own call.
		for _, up := range []string{"slowpoke", "alpha"} {
			r := call(up+"__echo", `{"text":"after"}`)
			if m := r.Last(t); m.Error != nil || !strings.Contains(string(m.Result), up+":after") || m.ID.String() != "7" {
				t.Errorf("%s after timeout: %s", up, r.Body)
			}
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"` + strings.Repeat("x", 4096) + `"}}}`
		if r := c.Post(big); r.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("origin", func(t *testing.T) {
		bad := c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") })
		if bad.Status != http.StatusForbidden || !strings.Contains(string(bad.Body), "allowed_origins") {
			t.Errorf("bad origin: HTTP %d %s", bad.Status, bad.Body)
		}
		for _, o := range []string{"https://app.example.com", "http://localhost:3000", "http://127.0.0.1:8080"} {
			good := c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Origin", o) })
			if good.Status != http.StatusOK {
				t.Errorf("allowed origin %s: HTTP %d %s", o, good.Status, good.Body)
			}
		}
		// A loopback-looking name on another host is still another site.
		bad = c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Origin", "http://localhost.evil.example") })
		if bad.Status != http.StatusForbidden {
			t.Errorf("lookalike origin: HTTP %d", bad.Status)
		}
	})
	t.Run("dns rebinding host", func(t *testing.T) {
		r := c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, func(r *http.Request) { r.Host = "attacker.example:8080" })
		if r.Status != http.StatusForbidden {
			t.Errorf("HTTP %d %s", r.Status, r.Body)
		}
		r = c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, func(r *http.Request) { r.Host = "localhost:8080" })
		if r.Status != http.StatusOK {
			t.Errorf("localhost: HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		noSession := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
		if r := noSession.Post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.Status != http.StatusBadRequest {
			t.Errorf("missing session: HTTP %d", r.Status)
		}
		unknown := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Session: "bogus"}
		if r := unknown.Post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.Status != http.StatusNotFound {
			t.Errorf("unknown session: HTTP %d", r.Status)
		}
		s := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
		s.Initialize("2025-06-18")
		if r := s.Do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", "1999-01-01") }); r.Status != http.StatusBadRequest {
			t.Errorf("unsupported version header: HTTP %d", r.Status)
		}
		if r := s.Do(http.MethodDelete, "", nil); r.Status != http.StatusNoContent {
			t.Errorf("DELETE: HTTP %d", r.Status)
		}
		if r := s.Post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.Status != http.StatusNotFound {
			t.Errorf("ended session: HTTP %d", r.Status)
		}
		if r := c.Do(http.MethodPut, `{}`, nil); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("PUT: HTTP %d", r.Status)
		}
		if r := c.Do(http.MethodGet, "", func(r *http.Request) { r.Header.Set("Accept", "application/json") }); r.Status != http.StatusNotAcceptable {
			t.Errorf("GET without event-stream: HTTP %d", r.Status)
		}
	})
	t.Run("version negotiation", func(t *testing.T) {
		s := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
		r := s.Initialize("1999-01-01")
		if v := gatewaytest.MustJSON(t, r.Last(t).Result); !strings.Contains(v, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("counter-offer: %s", v)
		}
	})
}
