package serial_test

// Bounds (DESIGN.md invariant 7), end to end: every test drives a real
// gateway on 127.0.0.1 the way a runaway or hostile client would and
// checks that it costs a bounded amount and is refused clearly — HTTP 503
// or 429 with Retry-After and a JSON-RPC error naming the config key, or
// that error on the transport — and that the refusal is counted in
// mcpgw_limit_refusals_total. Each was checked against the code before its
// fix (the fix reverted, this file kept): see each test's comment.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// postMessages POSTs one message and returns every JSON-RPC message of the
// answer (a JSON body or an SSE stream), or the transport's error.
func postMessages(url, body string, h http.Header) ([]*jsonrpc.Message, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		m, perr := jsonrpc.Parse(b)
		if perr != nil {
			return nil, fmt.Errorf("HTTP %d %q: %v", resp.StatusCode, b, perr)
		}
		return []*jsonrpc.Message{m}, nil
	}
	var out []*jsonrpc.Message
	rd := sse.NewReader(resp.Body, 1<<20)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if m, perr := jsonrpc.Parse(ev.Data); perr == nil {
			out = append(out, m)
		}
	}
}

// settle waits for the goroutine count to fall to at most want, and
// returns it.
func settle(want int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
}

// TestBoundsLegacySSEClientThatNeverReads (finding 4): a legacy HTTP+SSE
// client that reads its stream's endpoint event and then never reads
// again, while it POSTs 400 calls with 64 KB answers. The gateway answers
// the POSTs beyond sessions.max_requests_per_session with 429, disconnects
// the client once a write has waited sessions.sse_write_timeout (its
// session ends, its calls are cancelled, later POSTs get 404), and its
// goroutines stay bounded. Before the fix every POST was taken (202) and
// each parked a goroutine on the unread stream: with pushconn.go and
// legacysse.go reverted, the goroutine check fails (+400 goroutines, all
// 400 POSTs 202, no 404).
func TestBoundsLegacySSEClientThatNeverReads(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
sessions:
  sse_queue: 8
  sse_write_timeout: 2s
  max_requests_per_session: 16
`, alpha), true)
	send, closeIdle := gatewaytest.MuteLegacySession(t, base)

	baseline, rss0 := runtime.NumGoroutine(), gatewaytest.RSS()
	text := strings.Repeat("x", 64<<10)
	var mu sync.Mutex
	counts := map[int]int{}
	peak := baseline
	var refusal struct {
		status int
		header http.Header
		body   []byte
		id     string
	}
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 8 { // fast enough to fill the session before sse_write_timeout, even under -race
		wg.Go(func() {
			for i := range ids {
				id := strconv.Itoa(i)
				st, h, b := send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"` + text + `"}}}`)
				mu.Lock()
				counts[st]++
				if st == http.StatusTooManyRequests && refusal.status == 0 {
					refusal.status, refusal.header, refusal.body, refusal.id = st, h, b, id
				}
				peak = max(peak, runtime.NumGoroutine())
				mu.Unlock()
			}
		})
	}
	const posts = 400
	for i := 1; i <= posts; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	refused := refusal.status != 0
	if refused {
		gatewaytest.WantRefusal(t, "POST beyond max_requests_per_session", refusal.status, refusal.header, refusal.body, http.StatusTooManyRequests, "sessions.max_requests_per_session", refusal.id)
	}
	// The client is disconnected within sse_write_timeout of its stream
	// filling up: its POSTs then find no session.
	gone := false
	for deadline := time.Now().Add(10 * time.Second); !gone && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) { // a poll, bounded by deadline
		st, _, _ := send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
		gone = st == http.StatusNotFound
	}
	closeIdle()
	after := settle(baseline+60, 10*time.Second)
	t.Logf("%d POSTs to a client that never reads: HTTP statuses %v; goroutines %d before, peak %d, %d after; RSS %.0f -> %.0f MB",
		posts, counts, baseline, peak, after, rss0, gatewaytest.RSS())
	// At most 16 calls at once (max_requests_per_session): two goroutines
	// each, and up to three per pooled upstream connection; plus the 8
	// senders' connections.
	if peak-baseline > 200 {
		t.Errorf("goroutines grew by %d while the client did not read (want ≤ 200: max_requests_per_session is 16)", peak-baseline)
	}
	if counts[http.StatusAccepted] == posts || !refused {
		t.Errorf("every POST was taken (%v): want 429 beyond sessions.max_requests_per_session", counts)
	}
	if !gone {
		t.Error("the client that never reads is still connected after sse_write_timeout: want its session ended (POST 404)")
	}
	if after > baseline+60 { // pooled connections to the upstream (16 calls at once) stay
		t.Errorf("goroutines: %d before, %d after the client was disconnected", baseline, after)
	}
	if n := gatewaytest.Refusals(t, m, "sessions.sse_write_timeout"); n != 1 {
		t.Errorf("mcpgw_limit_refusals_total{bound=sessions.sse_write_timeout} = %v, want 1", n)
	}
	if n := gatewaytest.Refusals(t, m, "sessions.max_requests_per_session"); n < 1 {
		t.Errorf("mcpgw_limit_refusals_total{bound=sessions.max_requests_per_session} = %v, want ≥ 1", n)
	}
}

// TestBoundsLegacySSEReaderKeepsUp: the bounds cost a client that reads
// nothing: 60 concurrent calls with 64 KB answers, more than sse_queue
// and max_requests_per_session allow at once, all answered on the stream.
func TestBoundsLegacySSEReaderKeepsUp(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, _ := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
sessions: {sse_queue: 4, sse_write_timeout: 2s, max_requests_per_session: 64}
`, alpha), true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
	defer body.Close()
	post := base + endpoint
	gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"reader","version":"0"}}}`, nil)
	gatewaytest.NextMessage(t, events)
	text := strings.Repeat("y", 64<<10)
	var wg sync.WaitGroup
	for i := 1; i <= 60; i++ {
		wg.Go(func() {
			if st, m := gatewaytest.LegacyPost(t, post, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"`+text+`"}}}`, nil); st != http.StatusAccepted {
				t.Errorf("call %d: HTTP %d %+v", i, st, m)
			}
		})
	}
	seen := map[string]bool{}
	for len(seen) < 60 {
		m := gatewaytest.NextMessage(t, events)
		if m.Error != nil || !strings.Contains(string(m.Result), text) {
			t.Fatalf("answer %s: %+v", m.ID, m.Error)
		}
		seen[string(m.ID)] = true
	}
	wg.Wait()
}

// TestBoundsSessions (finding 5): sessions.max_sessions and
// sessions.max_sessions_per_principal bound the sessions kept, for
// Streamable HTTP and legacy HTTP+SSE alike; a principal over its share
// gets 429, anyone past the replica's bound 503, both with Retry-After and
// a JSON-RPC error naming the key; a DELETE frees a slot. Before the fix
// every initialize was taken (the test's 4th alice session got 200).
func TestBoundsSessions(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
sessions:
  max_sessions: 5
  max_sessions_per_principal: 3
`, alpha), true)
	as := func(key string) *gatewaytest.RawClient {
		return &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {key}}}
	}
	const initialize = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	var alice []*gatewaytest.RawClient
	for range 3 {
		c := as("alice-secret-0123456789")
		c.Initialize("2025-11-25")
		alice = append(alice, c)
	}
	r := as("alice-secret-0123456789").Post(initialize)
	gatewaytest.WantRefusal(t, "alice's 4th session", r.Status, r.Header, r.Body, http.StatusTooManyRequests, "sessions.max_sessions_per_principal", `"init"`)

	// A legacy HTTP+SSE stream is a session too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Api-Key", "bob-secret-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's legacy stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	bob := as("bob-secret-0123456789")
	bob.Initialize("2025-11-25") // the 5th session
	r = as("bob-secret-0123456789").Post(initialize)
	gatewaytest.WantRefusal(t, "a 6th session", r.Status, r.Header, r.Body, http.StatusServiceUnavailable, "sessions.max_sessions", `"init"`)
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second) // a stream, were it taken
	defer scancel()
	sreq, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/mcp/sse", nil)
	sreq.Header.Set("Accept", "text/event-stream")
	sreq.Header.Set("X-Api-Key", "bob-secret-0123456789")
	if sresp, err := http.DefaultClient.Do(sreq); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(sresp.Body)
		sresp.Body.Close()
		gatewaytest.WantRefusal(t, "a 6th session over legacy SSE", sresp.StatusCode, sresp.Header, b, http.StatusServiceUnavailable, "sessions.max_sessions", "")
	}

	// Ending one frees its slot, for its principal too.
	if d := alice[0].Do(http.MethodDelete, "", nil); d.Status != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d %s", d.Status, d.Body)
	}
	as("alice-secret-0123456789").Initialize("2025-11-25")
	if got := gatewaytest.Refusals(t, m, "sessions.max_sessions_per_principal"); got != 1 {
		t.Errorf("refusals{sessions.max_sessions_per_principal} = %v, want 1", got)
	}
	if got := gatewaytest.Refusals(t, m, "sessions.max_sessions"); got != 2 {
		t.Errorf("refusals{sessions.max_sessions} = %v, want 2", got)
	}
}

// slowBody opens a connection that sends a request's headers and then its
// body one byte every interval; it returns the connection and a channel
// closed when the gateway closes it (or answers and closes).
func slowBody(t *testing.T, addr, path string, interval time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}` + strings.Repeat(" ", 200)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", path, addr, len(body))
	go func() {
		for i := 0; i < len(body); i++ {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(interval) // the behaviour under test: a client that sends slowly
		}
	}()
	return conn, bufio.NewReader(conn)
}

// closedWithin reads the connection until EOF (or an error) and reports
// how long that took; false when it is still open after d.
func closedWithin(conn net.Conn, br *bufio.Reader, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return time.Since(start), false
	}
	return time.Since(start), true
}

// TestBoundsSlowBody (finding 6): a request body sent at 10 bytes a second
// is cut read_body_timeout after its headers, with 408 naming the key when
// a handler was reading it, and the connection closed when none was (an
// unknown path); 20 such connections at once cost nothing to a normal
// call. Long answers are not cut: a streamed call and a JSON call longer
// than read_body_timeout complete, and a GET stream stays open. Before the
// fix the slow connections stayed open until their body ended (the test's
// checks time out at 3 s).
func TestBoundsSlowBody(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
read_body_timeout: 1s
read_header_timeout: 1s
`, alpha), true)
	addr := strings.TrimPrefix(base, "http://")

	var wg sync.WaitGroup
	for i := range 20 {
		path := "/mcp"
		if i%2 == 1 {
			path = "/nowhere" // answered 404 at once; the body is never read
		}
		wg.Go(func() {
			conn, br := slowBody(t, addr, path, 100*time.Millisecond)
			status, _ := br.ReadString('\n')
			took, closed := closedWithin(conn, br, 3*time.Second)
			if !closed {
				t.Errorf("%s: a body sent at 10 B/s still holds its connection %v after its headers (read_body_timeout 1s)", path, took)
			}
			if path == "/mcp" && !strings.Contains(status, " 408 ") {
				t.Errorf("%s: status line %q, want 408", path, status)
			}
		})
	}
	// Meanwhile a normal client is served.
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	if r := c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hi"}}}`); r.Last(t).Error != nil {
		t.Errorf("a normal call during the slow ones: %s", r.Body)
	}
	wg.Wait()
	if n := gatewaytest.Refusals(t, m, "read_body_timeout"); n < 10 {
		t.Errorf("refusals{read_body_timeout} = %v, want ≥ 10 (one per slow body a handler read)", n)
	}

	// The 408 names the key.
	conn, br := slowBody(t, addr, "/mcp", 200*time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if msg, _ := jsonrpc.Parse(b); resp.StatusCode != http.StatusRequestTimeout || msg == nil || msg.Error == nil || !strings.Contains(msg.Error.Message, "read_body_timeout") {
		t.Errorf("slow body: HTTP %d %s, want 408 naming read_body_timeout", resp.StatusCode, b)
	}

	// Headers sent slowly are cut at read_header_timeout.
	hc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	fmt.Fprintf(hc, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr)
	if took, closed := closedWithin(hc, bufio.NewReader(hc), 3*time.Second); !closed {
		t.Errorf("half-sent headers still hold the connection after %v (read_header_timeout 1s)", took)
	}

	// Answers longer than read_body_timeout are not cut.
	for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
		r := c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":1800}}}`,
			func(r *http.Request) { r.Header.Set("Accept", accept) })
		if m := r.Last(t); m.Error != nil || !strings.Contains(string(m.Result), "done") {
			t.Errorf("a 1.8 s call (Accept %s) with read_body_timeout 1s: %s", accept, r.Body)
		}
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 1800*time.Millisecond)
	defer gcancel()
	req, _ := http.NewRequestWithContext(gctx, http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	gresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer gresp.Body.Close()
	if _, err := io.Copy(io.Discard, gresp.Body); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the GET stream ended before the client did (%v): read_body_timeout must not cut streams", err)
	}
}

// bridgedFirstRound sends a 2026-07-28 call of a tool that asks for
// sampling, as principal key, and returns the answer (JSON only, so a
// refusal comes with its HTTP status).
func bridgedFirstRound(t *testing.T, base, key string, id int) *gatewaytest.RawResponse {
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__sample"}, "X-Api-Key": {key},
	}}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	return c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"up__sample","arguments":{"tag":"X"},`+meta+`}}`,
		func(r *http.Request) { r.Header.Set("Accept", "application/json") })
}

// TestBoundsBridgedCallsPerPrincipal (finding 8): one principal parks at
// most sessions.max_parked_calls_per_principal bridged calls (429), the
// replica at most sessions.max_parked_calls (503). Before the fix alice's
// third call parked like the others (input_required, HTTP 200).
func TestBoundsBridgedCallsPerPrincipal(t *testing.T) {
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	_, base, m := gatewaytest.BoundsGateway(t, "listen: 127.0.0.1:0\nupstreams:\n"+up.Entry+`auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
policy: {default: allow}
sessions:
  max_parked_calls: 3
  max_parked_calls_per_principal: 2
`, true)
	parked := func(who string, r *gatewaytest.RawResponse) {
		t.Helper()
		if m := r.Last(t); r.Status != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), "input_required") {
			t.Fatalf("%s: HTTP %d %s, want input_required", who, r.Status, r.Body)
		}
	}
	parked("alice 1", bridgedFirstRound(t, base, "alice-secret-0123456789", 1))
	parked("alice 2", bridgedFirstRound(t, base, "alice-secret-0123456789", 2))
	r := bridgedFirstRound(t, base, "alice-secret-0123456789", 3)
	gatewaytest.WantRefusal(t, "alice's 3rd parked call", r.Status, r.Header, r.Body, http.StatusTooManyRequests, "sessions.max_parked_calls_per_principal", "3")
	parked("bob 1", bridgedFirstRound(t, base, "bob-secret-0123456789", 4))
	r = bridgedFirstRound(t, base, "bob-secret-0123456789", 5)
	gatewaytest.WantRefusal(t, "a 4th parked call", r.Status, r.Header, r.Body, http.StatusServiceUnavailable, "sessions.max_parked_calls", "5")
	if a, g := gatewaytest.Refusals(t, m, "sessions.max_parked_calls_per_principal"), gatewaytest.Refusals(t, m, "sessions.max_parked_calls"); a != 1 || g != 1 {
		t.Errorf("refusals: per principal %v, global %v; want 1 and 1", a, g)
	}
}

// TestBoundsStatefulSlotsPerPrincipal (finding 8): a stateful upstream
// gives one principal at most max_sessions_per_principal of its
// max_sessions connections; the call beyond gets -32004 naming the key,
// and a session's end frees its slot. Before the fix alice's third
// session took a third connection.
func TestBoundsStatefulSlotsPerPrincipal(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	gw, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
    stateful: true
    max_sessions: 3
    max_sessions_per_principal: 2
auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
policy: {default: allow}
`, alpha), true)
	session := func(key string) *gatewaytest.RawClient {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {key}}}
		c.Initialize("2025-11-25")
		return c
	}
	call := func(c *gatewaytest.RawClient, id int) *jsonrpc.Message {
		return c.Post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hi"}}}`).Last(t)
	}
	a1, a2, a3 := session("alice-secret-0123456789"), session("alice-secret-0123456789"), session("alice-secret-0123456789")
	for i, c := range []*gatewaytest.RawClient{a1, a2} {
		if m := call(c, i+1); m.Error != nil {
			t.Fatalf("alice's session %d: %v", i+1, m.Error)
		}
	}
	gatewaytest.WantError(t, "alice's 3rd stateful session", call(a3, 3), "upstreams.alpha.max_sessions_per_principal", "3")
	b1, b2 := session("bob-secret-0123456789"), session("bob-secret-0123456789")
	if m := call(b1, 4); m.Error != nil {
		t.Fatalf("bob's first session: %v", m.Error)
	}
	gatewaytest.WantError(t, "a 4th stateful session", call(b2, 5), "upstreams.alpha.max_sessions", "5")
	if n := gw.Host().Upstream("alpha").SessionConnections(); n != 3 {
		t.Errorf("the upstream holds %d session connections, want 3", n)
	}
	if d := a1.Do(http.MethodDelete, "", nil); d.Status != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", d.Status)
	}
	if m := call(a3, 6); m.Error != nil {
		t.Errorf("after alice ended a session, her third: %v", m.Error)
	}
	if a, g := gatewaytest.Refusals(t, m, "upstreams.alpha.max_sessions_per_principal"), gatewaytest.Refusals(t, m, "upstreams.alpha.max_sessions"); a != 1 || g != 1 {
		t.Errorf("refusals: per principal %v, global %v; want 1 and 1", a, g)
	}
}

// TestBoundsReplayStreams (low): a session opens at most
// sessions.max_replay_streams Last-Event-ID streams at once; the next gets
// 429. Before the fix every replay GET was taken and held a goroutine
// until the call ended.
func TestBoundsReplayStreams(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
sessions: {max_replay_streams: 2}
`, alpha), true)
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A streamed call whose stream the client drops after the priming event.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":3000}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sse.NewReader(resp.Body, 1<<20).Next()
	resp.Body.Close()
	if err != nil || ev.ID == "" {
		t.Fatalf("priming event %+v, %v", ev, err)
	}
	replay := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.Session)
		req.Header.Set("Last-Event-ID", ev.ID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for i := range 2 {
		if r := replay(); r.StatusCode != http.StatusOK {
			t.Fatalf("replay %d: HTTP %d", i+1, r.StatusCode)
		}
	}
	r := replay()
	b, _ := io.ReadAll(r.Body)
	gatewaytest.WantRefusal(t, "a 3rd replay stream", r.StatusCode, r.Header, b, http.StatusTooManyRequests, "sessions.max_replay_streams", "")
	if n := gatewaytest.Refusals(t, m, "sessions.max_replay_streams"); n != 1 {
		t.Errorf("refusals{sessions.max_replay_streams} = %v, want 1", n)
	}
}

// TestBoundsLegacySessionIDIsNotStreamable (low): a legacy HTTP+SSE
// session's id is no Mcp-Session-Id: the Streamable endpoint answers 404,
// as for an unknown session. Before the fix the POST was served in the
// legacy session (200).
func TestBoundsLegacySessionIDIsNotStreamable(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, _ := gatewaytest.BoundsGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha: {url: %s}\n", alpha), true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
	defer body.Close()
	gatewaytest.LegacyPost(t, base+endpoint, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, nil)
	gatewaytest.NextMessage(t, events)
	id := endpoint[strings.Index(endpoint, "sessionId=")+len("sessionId="):]
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Session: id}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		r := c.Do(method, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, nil)
		if r.Status != http.StatusNotFound {
			t.Errorf("%s /mcp with a legacy session's id: HTTP %d %s, want 404", method, r.Status, r.Body)
		}
	}
	// The legacy session itself is untouched.
	if st, _ := gatewaytest.LegacyPost(t, base+endpoint, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); st != http.StatusAccepted {
		t.Errorf("the legacy session after: HTTP %d", st)
	}
	if m := gatewaytest.NextMessage(t, events); string(m.ID) != "2" {
		t.Errorf("the legacy session answered %s, want ping 2", m.ID)
	}
}

// TestBoundsCancelledCallDuringReload (low): a call to an upstream that a
// reload replaced, cancelled by its client while the new connection is
// still being made, is answered as cancelled (-32001), not as
// "unavailable" (-32003). Before the fix it reported -32003 "starting".
func TestBoundsCancelledCallDuringReload(t *testing.T) {
	yaml := func(arg string) string {
		return "listen: 127.0.0.1:0\nupstreams:\n  hung:\n    command: [sleep, \"" + arg + "\"]\n    startup_timeout: 30s\n"
	}
	gw, base, _ := gatewaytest.BoundsGateway(t, yaml("60"), false)
	cfg, err := config.Parse("bounds.yaml", []byte(yaml("61")), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(cfg); err != nil { // replaced: a new child, starting
		t.Fatal(err)
	}
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	done := make(chan *gatewaytest.RawResponse, 1)
	go func() {
		done <- c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hung__x","arguments":{}}}`,
			func(r *http.Request) { r.Header.Set("Accept", "application/json") })
	}()
	testwait.Until(t, "the call to wait for the connection", func() bool { return gw.Host().Upstream("hung").InFlight() == 1 })
	if r := c.Post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: HTTP %d", r.Status)
	}
	select {
	case r := <-done:
		e := gatewaytest.ErrorOf(t, r)
		if e.Code != -32001 || !strings.Contains(e.Message, "cancelled") {
			t.Errorf("cancelled call answered %d %q, want -32001 request cancelled", e.Code, e.Message)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("the cancelled call was not answered")
	}
}

// TestBoundsDrainTimeoutAnswersCutCalls (low): calls still running when
// the drain timeout runs out are answered — on a JSON response, an SSE
// response, a legacy session's stream and a 2026-07-28 request — with an
// error naming the shutdown before their connections close. Before the
// fix each connection was closed without an answer (EOF).
func TestBoundsDrainTimeoutAnswersCutCalls(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	gw, base, _ := gatewaytest.BoundsGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha: {url: %s}\n", alpha), true)
	slow := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":20000}%s}}`
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
	defer body.Close()
	gatewaytest.LegacyPost(t, base+endpoint, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, nil)
	gatewaytest.NextMessage(t, events)

	answers := make(chan string, 3)
	call := func(what string, id int, meta string, h http.Header) {
		got, err := postMessages(base+"/mcp", fmt.Sprintf(slow, id, meta), h)
		switch {
		case err != nil:
			answers <- fmt.Sprintf("%s: %v", what, err)
		case len(got) == 0:
			answers <- what + ": no answer"
		case got[len(got)-1].Error == nil || !strings.Contains(got[len(got)-1].Error.Message, "shutting down"):
			answers <- fmt.Sprintf("%s: answered %s %+v, want an error naming the shutdown", what, got[len(got)-1].Result, got[len(got)-1].Error)
		default:
			answers <- ""
		}
	}
	go call("JSON", 1, "", http.Header{"Mcp-Session-Id": {c.Session}, "Accept": {"application/json"}})
	go call("SSE", 2, "", http.Header{"Mcp-Session-Id": {c.Session}, "Accept": {"application/json, text/event-stream"}})
	go call("2026", 3, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"alpha__slow"}, "Accept": {"application/json"}})
	gatewaytest.LegacyPost(t, base+endpoint, fmt.Sprintf(slow, 4, ""), nil)
	testwait.Until(t, "every call to be in flight", func() bool { return gw.Host().Upstream("alpha").InFlight() == 4 })

	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	start := time.Now()
	if err := gw.Shutdown(sctx); err == nil {
		t.Error("Shutdown reported no drain timeout")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	for range 3 {
		if s := <-answers; s != "" {
			t.Error(s)
		}
	}
	if m := gatewaytest.NextMessage(t, events); string(m.ID) != "4" || m.Error == nil || !strings.Contains(m.Error.Message, "shutting down") {
		t.Errorf("legacy session: %s %+v, want call 4 answered with an error naming the shutdown", m.ID, m.Error)
	}
}

// TestBoundsStdioRequestsPerSession (finding 4, stdio): a stdio client
// that sends more requests than sessions.max_requests_per_session allows at
// once gets the refusal, with the request's id, for those beyond; the
// others are answered. Before the fix all three ran (request 3 "done").
func TestBoundsStdioRequestsPerSession(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	in, out, _ := gatewaytest.StdioGateway(t, fmt.Sprintf("upstreams:\n  alpha: {url: %s}\nsessions: {max_requests_per_session: 2}\n", alpha), "")
	s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.Next()
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":500}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":500}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":500}}}`)
	answers := map[string]*jsonrpc.Message{}
	for len(answers) < 3 {
		if m, _ := s.Next(); m.Kind() == jsonrpc.KindResponse {
			answers[string(m.ID)] = m
		}
	}
	for _, id := range []string{"1", "2"} {
		if m := answers[id]; m.Error != nil || !strings.Contains(string(m.Result), "done") {
			t.Errorf("call %s: %s %+v", id, m.Result, m.Error)
		}
	}
	gatewaytest.WantError(t, "a 3rd request at once", answers["3"], "sessions.max_requests_per_session", "3")
}
