package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// counterUpstream is a stateful HTTP upstream: its "count" tool answers
// how many times it was called in this upstream session. It counts the
// initializes and DELETEs it sees, and forgets a session on demand (its
// requests then get 404, as after an upstream restart).
type counterUpstream struct {
	url string

	mu        sync.Mutex
	inits     int
	deletes   map[string]int
	forgotten map[string]bool
	counts    map[string]int
}

func newCounterUpstream(t *testing.T) *counterUpstream {
	t.Helper()
	u := &counterUpstream{deletes: map[string]int{}, forgotten: map[string]bool{}, counts: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "counter", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		u.counts[req.Session.ID()]++
		n := u.counts[req.Session.ID()]
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("count=%d", n)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		u.mu.Lock()
		gone := u.forgotten[id]
		switch {
		case r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"initialize"`)):
			u.inits++
		case r.Method == http.MethodDelete:
			u.deletes[id]++
		}
		u.mu.Unlock()
		if gone {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *counterUpstream) initializes() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.inits
}

// sessionsCounting are the upstream sessions that counted.
func (u *counterUpstream) sessionsCounting() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ids []string
	for id := range u.counts {
		ids = append(ids, id)
	}
	return ids
}

func (u *counterUpstream) forget(id string) {
	u.mu.Lock()
	u.forgotten[id] = true
	u.mu.Unlock()
}

func (u *counterUpstream) deleted(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.deletes[id]
}

// statefulFleet is two replicas sharing Redis and a key ring, with the
// stateful HTTP upstream "st" besides newFleet's "up".
func statefulFleet(t *testing.T) (*counterUpstream, string, string) {
	t.Helper()
	up := newCounterUpstream(t)
	f := newFleet(t, "")
	f.cfg = strings.Replace(f.cfg, "upstreams:\n", fmt.Sprintf("upstreams:\n  st: {url: %s, stateful: true}\n", up.url), 1)
	a, _ := f.start()
	b, _ := f.start()
	return up, a, b
}

const countCall = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"st__count","arguments":{}}}`

// callVia sends tools/call st__count through replica url and returns the
// tool's text, or the error's message.
func callVia(c *gatewaytest.RawClient, url string, id int) string {
	c.T.Helper()
	c.URL = url
	m := c.Post(fmt.Sprintf(countCall, id)).Last(c.T)
	if m.Error != nil {
		return "error: " + m.Error.Message
	}
	return string(m.Result)
}

// TestFleetStatefulHTTPUpstream: a session's calls on a stateful HTTP
// upstream, alternating between two replicas, continue one upstream
// session — one counter (1, 2, 3, 4) and exactly one initialize upstream —
// because the replica that opened it recorded it in Redis and the other
// continued it (same Mcp-Session-Id, no initialize).
func TestFleetStatefulHTTPUpstream(t *testing.T) {
	up, a, b := statefulFleet(t)

	t.Run("alternating replicas share one upstream session", func(t *testing.T) {
		before := up.initializes()
		c := &gatewaytest.RawClient{T: t, URL: a}
		c.Initialize("2025-11-25")
		for i, via := range []string{a, b, a, b} {
			if got, want := callVia(c, via, i+10), fmt.Sprintf("count=%d", i+1); !strings.Contains(got, want) {
				t.Fatalf("call %d (replica %d): %s, want %s", i+1, i%2, got, want)
			}
		}
		if n := up.initializes() - before; n != 1 {
			t.Errorf("the upstream saw %d initializes for the session, want 1", n)
		}
	})

	t.Run("an upstream session gone is told, then replaced", func(t *testing.T) {
		c := &gatewaytest.RawClient{T: t, URL: b}
		c.Initialize("2025-11-25")
		if got := callVia(c, b, 1); !strings.Contains(got, "count=1") {
			t.Fatalf("first call: %s", got)
		}
		ids := up.sessionsCounting()
		for _, id := range ids {
			up.forget(id) // the upstream restarted
		}
		got := callVia(c, a, 2)
		if !strings.Contains(got, "error") || !strings.Contains(got, "no longer knows this session's upstream session") {
			t.Fatalf("call after the upstream forgot the session: %q, want a clear error", got)
		}
		// A's connection ended with the error; the next request makes a new
		// upstream session and records it, and B (whose connection holds
		// the old id too) tells the same once, then continues the new one.
		if got := callVia(c, a, 3); !strings.Contains(got, "count=1") {
			t.Fatalf("call after the error: %s, want a new upstream session (count=1)", got)
		}
		if got := callVia(c, b, 4); !strings.Contains(got, "no longer knows") {
			t.Fatalf("B after the upstream forgot: %s, want the same clear error", got)
		}
		if got := callVia(c, b, 5); !strings.Contains(got, "count=2") {
			t.Fatalf("B's next call: %s, want to continue A's new upstream session (count=2)", got)
		}
	})

	t.Run("a DELETE ends the upstream session, an idle end only detaches", func(t *testing.T) {
		// Earlier subtests leave upstream sessions with two calls too; this
		// session's is the one that did not exist before it.
		before := map[string]bool{}
		for _, s := range up.sessionsCounting() {
			before[s] = true
		}
		c := &gatewaytest.RawClient{T: t, URL: a}
		c.Initialize("2025-11-25")
		callVia(c, a, 1)
		callVia(c, b, 2)
		var fresh []string
		up.mu.Lock()
		for s, n := range up.counts {
			if !before[s] && n == 2 && up.deletes[s] == 0 && !up.forgotten[s] {
				fresh = append(fresh, s)
			}
		}
		up.mu.Unlock()
		if len(fresh) != 1 {
			t.Fatalf("upstream sessions new in this subtest with two calls: %q, want exactly one", fresh)
		}
		id := fresh[0]
		c.URL = b
		c.Do(http.MethodDelete, "", nil)
		deadline := time.Now().Add(5 * time.Second)
		for up.deleted(id) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
		}
		if up.deleted(id) == 0 {
			t.Error("the client's DELETE did not end the upstream session")
		}
	})
}

// TestFleetStatefulStdioNeedsAffinity: a stateful stdio upstream's child
// runs on the replica that started it; the session's request on another
// replica is refused, naming the cause and the fix, instead of starting a
// second child with none of the state — and the holder goes on serving it.
func TestFleetStatefulStdioNeedsAffinity(t *testing.T) {
	up := gatewaytest.FidStdioUpstream(t, "pipe", "stateful: true")
	f := newFleet(t, "")
	f.cfg = strings.Replace(f.cfg, "upstreams:\n", "upstreams:\n"+up.Entry, 1)
	a, _ := f.start()
	b, _ := f.start()
	c := &gatewaytest.RawClient{T: t, URL: a}
	c.Initialize("2025-11-25")
	call := func(url string, id int) *jsonrpc.Message {
		c.URL = url
		return c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"pipe__block","arguments":{"tag":"t","ms":1}}}`, id)).Last(t)
	}
	if m := call(a, 1); m.Error != nil || !strings.Contains(string(m.Result), "done t") {
		t.Fatalf("on A: %s %v", m.Result, m.Error)
	}
	m := call(b, 2)
	if m.Error == nil || !strings.Contains(m.Error.Message, "on another gateway replica") || !strings.Contains(m.Error.Message, "affinity") {
		t.Fatalf("on B: %s %v, want a refusal that asks for affinity", m.Result, m.Error)
	}
	if m := call(a, 3); m.Error != nil || !strings.Contains(string(m.Result), "done t") {
		t.Fatalf("on A again: %s %v", m.Result, m.Error)
	}
}

// TestFleetStatefulRedisDown: without Redis a replica cannot learn the
// session's upstream session, so it opens its own, as a single replica
// would: calls go on (the state is per replica until Redis returns).
func TestFleetStatefulRedisDown(t *testing.T) {
	up := newCounterUpstream(t)
	f := newFleet(t, "")
	f.cfg = strings.Replace(f.cfg, "upstreams:\n", fmt.Sprintf("upstreams:\n  st: {url: %s, stateful: true}\n", up.url), 1)
	a, _ := f.start()
	b, _ := f.start()
	c := &gatewaytest.RawClient{T: t, URL: a}
	c.Initialize("2025-11-25")
	if got := callVia(c, a, 1); !strings.Contains(got, "count=1") {
		t.Fatalf("on A: %s", got)
	}
	f.redis.Stop()
	before := up.initializes()
	for i, via := range []string{b, a, b} {
		if got, want := callVia(c, via, i+2), []string{"count=1", "count=2", "count=2"}[i]; !strings.Contains(got, want) {
			t.Fatalf("call %d with Redis down: %s, want %s", i+2, got, want)
		}
	}
	if n := up.initializes() - before; n != 1 {
		t.Errorf("initializes with Redis down = %d, want 1 (B's own upstream session)", n)
	}
}

// TestFleetStatefulIdleEndDetaches: a replica that reaps its idle copy of
// a session leaves the upstream session to the replicas still serving it
// (no DELETE upstream): the session goes on, with its state, on the other.
// (A copy reaped on A is not served by A again: the store remembers it as
// ended there, fleet or not.)
func TestFleetStatefulIdleEndDetaches(t *testing.T) {
	up := newCounterUpstream(t)
	f := newFleet(t, "  idle_timeout: 400ms")
	f.cfg = strings.Replace(f.cfg, "upstreams:\n", fmt.Sprintf("upstreams:\n  st: {url: %s, stateful: true}\n", up.url), 1)
	a, _ := f.start()
	b, _ := f.start()
	c := &gatewaytest.RawClient{T: t, URL: a}
	c.Initialize("2025-11-25")
	want := 0
	next := func(via string) {
		t.Helper()
		want++
		if got := callVia(c, via, want); !strings.Contains(got, fmt.Sprintf("count=%d", want)) {
			t.Fatalf("call %d: %s, want count=%d", want, got, want)
		}
	}
	next(a)
	next(b)
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); { // A reaps its copy meanwhile
		next(b)
		time.Sleep(80 * time.Millisecond) // the behaviour under test: calls spread over the reaper's wall-clock window
	}
	next(b)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.counts) != 1 {
		t.Fatalf("%d upstream sessions counted, want one", len(up.counts))
	}
	for id := range up.counts {
		if up.deletes[id] != 0 {
			t.Errorf("the upstream session was DELETEd when A reaped its copy")
		}
	}
}
