package streamable_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// writeCounter counts the writes to the connections it accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return &countedConn{c, &l.writes}, err
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) { c.n.Add(1); return c.Conn.Write(b) }

// TestPostStreamPriming: a 2025-11-25 session's POST answer stream starts
// with the priming event. A call that answers at once sends it with the
// headers and the answer in one write; a longer call gets it first, long
// before its answer, so the client can resume a stream cut early.
func TestPostStreamPriming(t *testing.T) { testPostStreamPriming(t, "", 1) }

// With sessions.priming_hold: 0s the priming event goes out at once, on
// its own: every call takes two writes.
func TestPostStreamPrimingHoldOff(t *testing.T) {
	testPostStreamPriming(t, "sessions: {priming_hold: 0s}\n", 2)
}

func testPostStreamPriming(t *testing.T, extra string, wantLeast int64) {
	t.Parallel()
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	cfg, err := config.Parse("test.yaml", []byte("listen: 127.0.0.1:0\n"+extra+"upstreams:\n"+up.Entry), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: wc})
	base := "http://" + ln.Addr().String() + "/mcp"
	c := &gatewaytest.RawClient{T: t, URL: base}
	c.Initialize("2025-11-25")

	call := func(id int, args string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, base, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__block","arguments":%s}}`, id, args)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.Session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// events reads the stream's events, each with the time it was read.
	type event struct {
		text string
		at   time.Time
	}
	events := func(resp *http.Response) []event {
		defer resp.Body.Close()
		var evs []event
		var cur strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "" {
				evs = append(evs, event{cur.String(), time.Now()})
				cur.Reset()
				continue
			}
			cur.WriteString(sc.Text() + "\n")
		}
		return evs
	}
	isPriming := func(e event) bool {
		return strings.Contains(e.text, "id: ") && strings.Contains(e.text, "retry: ") && strings.Contains(e.text, "data: \n")
	}

	// Quick calls: one write each (headers, priming event and answer
	// together), or two when the upstream took longer than the hold —
	// which a loaded machine under -race makes common. Flushing the
	// priming event on its own makes every call two, so some call must
	// have taken one.
	least := int64(99)
	for i := range 20 {
		before := wc.writes.Load()
		evs := events(call(100+i, `{"tag":"q","ms":0}`))
		if len(evs) != 2 || !isPriming(evs[0]) || !strings.Contains(evs[1].text, "done q") {
			t.Fatalf("quick call's stream: %+v, want the priming event, then the answer", evs)
		}
		least = min(least, wc.writes.Load()-before)
	}
	if least != wantLeast {
		t.Errorf("every quick call took at least %d writes, want %d (1: the priming event sent with the answer; 2: on its own)", least, wantLeast)
	}

	evs := events(call(20, `{"tag":"slow","ms":800}`))
	if len(evs) != 2 || !isPriming(evs[0]) || !strings.Contains(evs[1].text, "done slow") {
		t.Fatalf("slow call's stream: %+v", evs)
	}
	if gap := evs[1].at.Sub(evs[0].at); gap < 400*time.Millisecond {
		t.Errorf("the priming event came %s before the answer of an 800 ms call: it was held back with the answer", gap)
	}
}
