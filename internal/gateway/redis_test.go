package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	mcpgw "github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// tickServer is an upstream whose "ticks" tool sends n progress
// notifications, ms apart, then answers "ticked n".
func tickServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "ticks", Version: "1"}, nil)
	type in struct {
		N  int `json:"n"`
		MS int `json:"ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ticks"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		for i := range a.N {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond): // the behaviour under test: a tool that takes ms
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Message: fmt.Sprintf("tick %d", i+1)})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("ticked %d", a.N)}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// fleet is replicas sharing one key ring and one Redis.
type fleet struct {
	t     *testing.T
	redis *redistest.Server
	cfg   string
}

func newFleet(t *testing.T, replay string) *fleet {
	t.Helper()
	srv := redistest.Start(t)
	keys := filepath.Join(t.TempDir(), "session-keys")
	if err := os.WriteFile(keys, []byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  up: {url: %s}
sessions:
  key_file: %q
  redis: {addr: %q, key_prefix: "gwtest:", read_timeout: 300ms, dial_timeout: 300ms}
%s
`, tickServer(t), keys, srv.Addr, replay)
	return &fleet{t: t, redis: srv, cfg: cfg}
}

// start starts one replica; stop shuts it down early (else the test's end
// does).
func (f *fleet) start() (base string, stop func()) {
	f.t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(f.cfg), func(string) (string, bool) { return "", false })
	if err != nil {
		f.t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(f.t), Listener: ln})
	if err != nil {
		f.t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			f.t.Errorf("shutdown: %v", err)
		}
	}
	f.t.Cleanup(stop)
	base = "http://" + ln.Addr().String() + "/mcp"
	// Wait for the upstream's tools, so the first call finds them.
	c := &gatewaytest.RawClient{T: f.t, URL: base}
	c.Initialize("2025-11-25")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if strings.Contains(string(c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Last(f.t).Result), "up__ticks") {
			break
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the upstream's tools did not appear")
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
	c.Do(http.MethodDelete, "", nil)
	return base, stop
}

// stream is one SSE response being read.
type stream struct {
	t    *testing.T
	resp *http.Response
	r    *sse.Reader
}

func (s *stream) next() sse.Event {
	s.t.Helper()
	ev, err := s.r.Next()
	if err != nil {
		s.t.Fatalf("reading the stream: %v", err)
	}
	return ev
}

// rest reads the stream to its end: the event ids and messages.
func (s *stream) rest() (ids []string, msgs []*jsonrpc.Message) {
	s.t.Helper()
	defer s.resp.Body.Close()
	for {
		ev, err := s.r.Next()
		if err != nil {
			return ids, msgs
		}
		if len(ev.Data) == 0 {
			continue
		}
		m, err := jsonrpc.Parse(ev.Data)
		if err != nil {
			s.t.Fatalf("event %q: %v", ev.Data, err)
		}
		ids, msgs = append(ids, ev.ID), append(msgs, m)
	}
}

func open(t *testing.T, method, url, session, body, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", session)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("%s: HTTP %d %s, want an event stream", method, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &stream{t: t, resp: resp, r: sse.NewReader(resp.Body, 1<<20)}
}

func ticksCall(id, n, ms int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__ticks","arguments":{"n":%d,"ms":%d},"_meta":{"progressToken":"p%d"}}}`, id, n, ms, id)
}

// TestRedisResumeOnAnotherReplica: a 2025-11-25 session's call stream cut
// on replica A is resumed with Last-Event-ID on replica B, which sends
// exactly the events after it — the rest of the progress and the answer,
// nothing twice — while the call still runs on A.
func TestRedisResumeOnAnotherReplica(t *testing.T) {
	f := newFleet(t, "")
	a, _ := f.start()
	b, _ := f.start()
	c := &gatewaytest.RawClient{T: t, URL: a}
	c.Initialize("2025-11-25")

	s := open(t, http.MethodPost, a, c.Session, ticksCall(7, 6, 60), "")
	prime := s.next()
	first, second := s.next(), s.next()
	s.resp.Body.Close() // the connection is cut after tick 2
	if prime.ID == "" || !strings.Contains(string(second.Data), "tick 2") {
		t.Fatalf("before the cut: %q %q %q", prime.ID, first.Data, second.Data)
	}

	ids, msgs := open(t, http.MethodGet, b, c.Session, "", second.ID).rest()
	stream, seq, _ := strings.Cut(second.ID, "/")
	var want []string
	for i := range 5 { // ticks 3..6 and the answer
		want = append(want, fmt.Sprintf("%s/%d", stream, mustAtoi(t, seq)+i+1))
	}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("event ids on B = %v, want %v", ids, want)
	}
	for i, m := range msgs[:4] {
		if !strings.Contains(string(m.Params), fmt.Sprintf("tick %d", i+3)) {
			t.Errorf("event %d on B = %s, want tick %d", i, m.Params, i+3)
		}
	}
	if last := msgs[4]; last.Error != nil || string(last.ID) != "7" || !strings.Contains(string(last.Result), "ticked 6") {
		t.Errorf("the answer on B = id %s %s %v", last.ID, last.Result, last.Error)
	}
}

// TestRedisResumeIntoTrimmedEvents: when the events after Last-Event-ID
// were trimmed by sessions.replay.session_events, replica B answers the
// request with "events purged", never with a silent gap.
func TestRedisResumeIntoTrimmedEvents(t *testing.T) {
	f := newFleet(t, "  replay: {session_events: 3}")
	a, _ := f.start()
	b, _ := f.start()
	c := &gatewaytest.RawClient{T: t, URL: a}
	c.Initialize("2025-11-25")
	s := open(t, http.MethodPost, a, c.Session, ticksCall(9, 8, 1), "")
	prime := s.next()
	// Read the whole call on A, so every event was logged (and copied)
	// before the resume.
	ids, _ := s.rest()
	if len(ids) != 9 {
		t.Fatalf("the call on A sent %d events, want 9", len(ids))
	}
	waitForEnd(t, f.redis.Addr)

	_, msgs := open(t, http.MethodGet, b, c.Session, "", prime.ID).rest()
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != mcpgw.CodeEventsPurged || string(msgs[0].ID) != "9" {
		t.Fatalf("resume into trimmed events on B = %+v, want one error %d for id 9", msgs, mcpgw.CodeEventsPurged)
	}
	// What is still there is still served: the answer, after the last tick.
	_, msgs = open(t, http.MethodGet, b, c.Session, "", ids[7]).rest()
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), "ticked 8") {
		t.Fatalf("resume after the last tick on B = %+v, want the answer", msgs)
	}
}

// waitForEnd waits until a stream's end marker reached Redis.
func waitForEnd(t *testing.T, addr string) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // a poll, bounded by deadline
		keys, _ := rc.Keys(ctx, "gwtest:{s:*}").Result()
		for _, k := range keys {
			es, _ := rc.XRevRangeN(ctx, k, "+", "-", 1).Result()
			if len(es) == 1 && es[0].Values["f"] != nil {
				return
			}
		}
	}
	t.Fatal("no stream end reached Redis within 5s")
}

// TestRedisDeleteRefusedEverywhere: a session DELETEd on A is refused on B
// — which was serving it — and on B restarted.
func TestRedisDeleteRefusedEverywhere(t *testing.T) {
	f := newFleet(t, "")
	a, _ := f.start()
	b, stopB := f.start()
	onA := &gatewaytest.RawClient{T: t, URL: a}
	onA.Initialize("2025-11-25")
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__ticks","arguments":{"n":0}}}`
	onB := &gatewaytest.RawClient{T: t, URL: b, Session: onA.Session}
	if m := onB.Post(call).Last(t); m.Error != nil {
		t.Fatalf("B serving A's session: %v", m.Error)
	}
	if r := onA.Do(http.MethodDelete, "", nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE on A: HTTP %d", r.Status)
	}
	status := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // a poll, bounded by deadline
		if status = onB.Post(call).Status; status == http.StatusNotFound {
			break
		}
	}
	if status != http.StatusNotFound {
		t.Fatalf("B after the DELETE on A: HTTP %d, want 404", status)
	}
	stopB()
	b2, _ := f.start()
	if r := (&gatewaytest.RawClient{T: t, URL: b2, Session: onA.Session}).Post(call); r.Status != http.StatusNotFound {
		t.Fatalf("B restarted: HTTP %d, want 404", r.Status)
	}
}

// TestRedisDownCallsGoOn: with Redis stopped mid-run, plain calls, new
// sessions, calls served by another replica and same-replica resumption
// all still work, and none waits on Redis for long.
func TestRedisDownCallsGoOn(t *testing.T) {
	f := newFleet(t, "")
	a, _ := f.start()
	b, _ := f.start()
	onA := &gatewaytest.RawClient{T: t, URL: a}
	onA.Initialize("2025-11-25")
	f.redis.Stop()

	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__ticks","arguments":{"n":2,"ms":1}}}`
	fresh := &gatewaytest.RawClient{T: t, URL: b}
	fresh.Initialize("2025-11-25")
	for name, c := range map[string]*gatewaytest.RawClient{
		"on A":               onA,
		"A's session on B":   {T: t, URL: b, Session: onA.Session},
		"a new session on B": fresh,
	} {
		start := time.Now()
		for range 20 {
			if m := c.Post(call).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "ticked 2") {
				t.Fatalf("%s with Redis down: %s %v", name, m.Result, m.Error)
			}
		}
		// Not a speed goal: a bound far above a working call and far below
		// 20 Redis timeouts, to catch a call waiting on Redis.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: 20 calls took %v with Redis down", name, d)
		}
	}
	// Same-replica resumption is local.
	s := open(t, http.MethodPost, a, onA.Session, ticksCall(8, 4, 40), "")
	s.next()
	first := s.next()
	s.resp.Body.Close()
	ids, msgs := open(t, http.MethodGet, a, onA.Session, "", first.ID).rest()
	if len(ids) != 4 || !strings.Contains(string(msgs[3].Result), "ticked 4") {
		t.Fatalf("resume on A with Redis down: %v", ids)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A fleet (sessions.redis) refuses to start without a usable key ring,
// saying what to do: no key_file in the config, a key_file that does not
// exist, one with no key in it.
func TestRedisNeedsKeyRing(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# no key yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sessions, want string
	}{
		{"no key_file", `{redis: {addr: "127.0.0.1:1"}}`, "needs sessions.key_file: replicas sharing Redis must share the key ring"},
		{"missing file", fmt.Sprintf(`{key_file: %q, redis: {addr: "127.0.0.1:1"}}`, filepath.Join(dir, "nope")), "create it with one key per line"},
		{"no key in it", fmt.Sprintf(`{key_file: %q, redis: {addr: "127.0.0.1:1"}}`, empty), "no key in the file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "listen: 127.0.0.1:0\nupstreams:\n  up: {url: http://127.0.0.1:1/mcp}\nsessions: " + c.sessions + "\n"
			cfg, err := config.Parse("test.yaml", []byte(src), func(string) (string, bool) { return "", false })
			if err == nil {
				ln, lerr := net.Listen("tcp", "127.0.0.1:0")
				if lerr != nil {
					t.Fatal(lerr)
				}
				defer ln.Close()
				var gw *gateway.Gateway
				gw, err = gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
				if err == nil {
					_ = gw.Shutdown(context.Background())
					t.Fatal("started")
				}
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
		})
	}
}

// /readyz's redis detail follows Redis: up, then degraded (still ready)
// while it is stopped, then up again once it is back.
func TestRedisReadinessDegraded(t *testing.T) {
	f := newFleet(t, "")
	cfg, err := config.Parse("test.yaml", []byte(f.cfg), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Shutdown(context.Background()) })
	wait := func(state string) gateway.Readiness {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := gw.Readiness()
			if r.Redis != nil && r.Redis.State == state {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis state %+v, want %s", r.Redis, state)
			}
			time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
		}
	}
	wait("up")
	f.redis.Stop()
	r := wait("degraded")
	if r.Redis.Error == "" || r.Redis.Degraded == "" {
		t.Errorf("degraded without the error or what stops: %+v", r.Redis)
	}
	for _, reason := range r.Reasons {
		if strings.Contains(reason, "redis") {
			t.Errorf("Redis down made the replica not ready: %v", r.Reasons)
		}
	}
	f.redis.Restart()
	wait("up")
}

// A start that fails after sessions.redis was connected (here: tracing's
// OTEL_* settings are wrong) leaves no Redis client behind: the build's
// undo stack closes it, so the server sees the replica's connections go.
// Its health check pings once before it can be stopped, so the server
// always sees the replica connect.
func TestRedisClosedWhenStartFailsLater(t *testing.T) {
	f := newFleet(t, "")
	cfg, err := config.Parse("test.yaml", []byte(f.cfg), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(&redis.Options{Addr: f.redis.Addr})
	defer probe.Close()
	ctx := context.Background()
	// info reads a field of INFO's clients and stats sections.
	info := func(field string) int {
		s, err := probe.Info(ctx, "clients", "stats").Result()
		if err != nil {
			t.Fatalf("redis INFO: %v", err)
		}
		for _, line := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatalf("redis INFO has no %s", field)
		return 0
	}
	received := info("total_connections_received") // the probe's own included
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	badEnv := func(k string) (string, bool) {
		if k == "OTEL_TRACES_EXPORTER" {
			return "zipkin", true // not OTLP: tracing refuses to start
		}
		return "", false
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, Getenv: badEnv})
	if err == nil {
		_ = gw.Shutdown(ctx)
		t.Fatal("started with OTEL_TRACES_EXPORTER=zipkin")
	}
	if !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("error %q, want it to name OTEL_TRACES_EXPORTER", err)
	}
	// Connected once (never, and the test would prove nothing), and
	// then only the probe is left.
	testwait.Until(t, "the failed start's Redis connections to close", func() bool {
		return info("total_connections_received") > received && info("connected_clients") == 1
	})
}
