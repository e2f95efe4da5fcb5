package gatewaytest

// Helpers of the bounds tests (DESIGN.md invariant 7) that tests in more
// than one package use: a gateway with metrics of its own, the refusal
// counter and checks of a refusal, and a legacy HTTP+SSE client that never
// reads.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// BoundsGateway starts a gateway from YAML with metrics of its own (so a
// test reads only its own refusals) and returns it, its base URL and the
// metrics; wait says whether to wait for the upstreams' first connection
// attempts.
func BoundsGateway(t *testing.T, yaml string, wait bool) (*gateway.Gateway, string, *metrics.Metrics) {
	t.Helper()
	cfg, err := config.Parse("bounds.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
	opts := gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, Metrics: m}
	var gw *gateway.Gateway
	if wait {
		gw = RunGateway(t, cfg, opts)
	} else {
		if gw, err = gateway.Start(cfg, opts); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = gw.Shutdown(ctx)
		})
	}
	return gw, "http://" + ln.Addr().String(), m
}

// Refusals is mcpgw_limit_refusals_total{bound}.
func Refusals(t *testing.T, m *metrics.Metrics, bound string) float64 {
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
			for _, l := range s.GetLabel() {
				if l.GetName() == "bound" && l.GetValue() == bound {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// WantRefusal checks an HTTP refusal by bound: status, Retry-After and the
// JSON-RPC error (with id, when one is given) naming the bound's key.
func WantRefusal(t *testing.T, what string, status int, header http.Header, body []byte, wantStatus int, bound string, id string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: HTTP %d %s, want %d", what, status, body, wantStatus)
		return
	}
	if ra, err := strconv.Atoi(header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds", what, header.Get("Retry-After"))
	}
	m, err := jsonrpc.Parse(body)
	if err != nil || m.Error == nil {
		t.Errorf("%s: body %s is not a JSON-RPC error (%v)", what, body, err)
		return
	}
	WantError(t, what, m, bound, id)
}

// WantError checks a JSON-RPC refusal by bound: the rate-limited code, a
// message naming the bound's key, and data with the bound, its maximum and
// a retry delay.
func WantError(t *testing.T, what string, m *jsonrpc.Message, bound string, id string) {
	t.Helper()
	if m.Error == nil {
		t.Errorf("%s: result %s, want a refusal by %s", what, m.Result, bound)
		return
	}
	var data struct {
		Bound      string `json:"bound"`
		Max        int    `json:"max"`
		RetryAfter int    `json:"retryAfterSeconds"`
	}
	_ = json.Unmarshal(m.Error.Data, &data)
	if m.Error.Code != mcp.CodeRateLimited || data.Bound != bound || data.Max < 1 || data.RetryAfter < 1 || !strings.Contains(m.Error.Message, bound) {
		t.Errorf("%s: error %d %q data %s; want %d naming %s", what, m.Error.Code, m.Error.Message, m.Error.Data, mcp.CodeRateLimited, bound)
	}
	if id != "" && string(m.ID) != id {
		t.Errorf("%s: error has id %s, want the request's %s", what, m.ID, id)
	}
}

// RSS is the process's resident set in MB (0 where /proc is missing).
func RSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// SmallWindowDial connects with a 4 KB receive buffer, so that a client
// that stops reading stops the gateway's writes after a few kilobytes.
func SmallWindowDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// MuteLegacySession opens a 2024-11-05 HTTP+SSE session whose client reads
// its stream's endpoint event and then nothing more (a small receive
// window, so what the gateway writes backs up), and returns a function
// that POSTs one message to the session and returns the answer, and one
// that closes the poster's idle connections.
func MuteLegacySession(t *testing.T, base string) (send func(body string) (int, http.Header, []byte), closeIdle func()) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn := SmallWindowDial(t, addr)
	fmt.Fprintf(conn, "GET /mcp/sse HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", addr)
	br := bufio.NewReader(conn)
	var endpoint string
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for endpoint == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream's endpoint event: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			endpoint = v
		}
	}
	// From here on the client reads nothing.
	post := base + endpoint
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(client.CloseIdleConnections)
	send = func(body string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodPost, post, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	if st, _, b := send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"mute","version":"0"}}}`); st != http.StatusAccepted {
		t.Fatalf("initialize: HTTP %d %s", st, b)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return send, client.CloseIdleConnections
}
