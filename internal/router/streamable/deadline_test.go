package streamable

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// TestGetStreamWriteDeadline (issue 37.5): a client that opens its
// session's GET stream and stops reading is disconnected once a write has
// waited sessions.sse_write_timeout, counted under that bound, as on the
// legacy transport. Before the fix the stream's handler waited in its
// write for as long as the client kept the connection.
func TestGetStreamWriteDeadline(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
	c := core.New(nil, core.Options{Metrics: m})
	defer c.Close(func() {})
	st := sessions.NewStore(sessions.StoreOptions{Events: sessions.NewMemoryEvents(sessions.Limits{SessionEvents: 4, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, nil)})
	rte := &core.Route{Path: "/mcp", Gen: &core.Generation{Limits: core.Limits{MaxSessions: 1, MaxSessionsPerPrincipal: 1, MaxReplayStreams: 1, SSEWriteTimeout: 300 * time.Millisecond}}}
	sess, err := st.Create(rte, mcp.Version20250618, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove(sess.ID())
	tr := New(c, st, time.Hour)
	returned := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.Get(w, r, rte)
		once.Do(func() { close(returned) })
	}))
	defer srv.Close()

	// A client with a small receive window that reads the response's head
	// and then nothing.
	addr := strings.TrimPrefix(srv.URL, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + sess.ID() + "\r\n\r\n"))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("GET: %q %v", status, err)
	}

	// Session notifications, 64 KiB each, until the stream gives up.
	note, _ := jsonrpc.Encode(jsonrpc.NewNotification("notifications/message", []byte(`{"level":"info","data":"`+strings.Repeat("x", 64<<10)+`"}`)))
	go func() {
		for {
			sess.Send(note)
			select {
			case <-returned:
				return
			case <-time.After(time.Millisecond): // pacing, not a wait for an event
			}
		}
	}()
	select {
	case <-returned:
	case <-time.After(20 * time.Second): // the failure's deadline, not a wait
		t.Fatal("the GET stream of a client that does not read is still open 20s on (sessions.sse_write_timeout is 300ms)")
	}
	families, _ := m.Registry().Gather()
	var n float64
	for _, f := range families {
		if f.GetName() == "mcpgw_limit_refusals_total" {
			for _, s := range f.GetMetric() {
				if s.GetLabel()[0].GetValue() == "sessions.sse_write_timeout" {
					n = s.GetCounter().GetValue()
				}
			}
		}
	}
	if n != 1 {
		t.Errorf("mcpgw_limit_refusals_total{bound=sessions.sse_write_timeout} = %v, want 1", n)
	}
}
