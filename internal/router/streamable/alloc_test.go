package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// sessionCall is a 2025-11-25 session on route /mcp over the canned
// upstream "up", with the in-memory event log a single gateway has, and
// its tools/call of up__echo, as the bench's legacy call row sends it.
type sessionCall struct {
	tr   *Transport
	c    *core.Core
	rte  *core.Route
	sess *sessions.Session
	body []byte
	msg  *jsonrpc.Message
}

func newSessionCall(tb testing.TB) *sessionCall {
	tb.Helper()
	cfg, err := config.Parse("t.yaml", []byte("upstreams:\n  up: {url: http://up.test/mcp, timeout: 10s, protocol: legacy}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	h := host.New(cfg, host.Options{Logger: zap.NewNop(), HTTPClient: memhttp.Client(echoUpstream())})
	h.Start()
	tb.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	gen := &core.Generation{ByPath: map[string]*core.Route{}, MaxBody: 1 << 20, Limits: core.LimitsOf(&config.Config{})}
	rte := &core.Route{Path: "/mcp", View: catalog.NewView(h, nil, true), Gen: gen}
	gen.Routes, gen.ByPath["/mcp"] = []*core.Route{rte}, rte
	c := core.New(h, core.Options{Logger: zap.NewNop(), Current: func() *core.Generation { return gen }})
	tb.Cleanup(func() { c.Close(func() {}) })
	st := sessions.NewStore(sessions.StoreOptions{Events: sessions.NewMemoryEvents(sessions.Limits{SessionEvents: 64, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, nil)})
	sess, err := st.Create(rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Remove(sess.ID()) })
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"hi"}}}`)
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		tb.Fatal(err)
	}
	sc := &sessionCall{tr: New(c, st, time.Hour), c: c, rte: rte, sess: sess, body: body, msg: msg}
	// The first call lists the upstream's tools; check one answer whole.
	if w := sc.post(); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "echo:hi") {
		tb.Fatalf("call: %d %s", w.Code, w.Body)
	}
	return sc
}

// post sends the call as a client that accepts a stream, on a request
// whose context can end, as the HTTP server's can.
func (sc *sessionCall) post() *httptest.ResponseRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(sc.body))
	r.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {sc.sess.ID()}}
	w := httptest.NewRecorder()
	sc.tr.Post(w, r, sc.rte)
	return w
}

// The transport's own allocations on a session's streamed tools/call:
// what Post allocates beyond the core answering the same call, which
// leaves out the upstream client's (issue 28). A call on the in-memory
// event log registered a watch on the request's context for nothing
// (its cut is a no-op there): six allocations of every call.
func TestSessionCallTransportAllocs(t *testing.T) {
	sc := newSessionCall(t)
	ctx := context.Background()
	handle := testing.AllocsPerRun(200, func() { sc.c.Handle(ctx, sc.sess.Session, sc.msg, nil, nil) })
	post := testing.AllocsPerRun(200, func() { sc.post() })
	t.Logf("a session's streamed tools/call: %.0f allocations, %.0f of them the core's and the upstream's", post, handle)
	// About half are this test's request and recorder; the rest the
	// body's parse, the verdict, the call's context, the stream's writer
	// and its events, the answer's encoding. Measured 51 after issue 28's
	// fixes (no watch for a cut nobody reads, one buffer per small
	// stream, the Writer's ResponseController by value).
	const budget = 52
	if own := post - handle; own > budget {
		t.Errorf("the transport allocates %.0f times per streamed session call beyond the core's; want at most %d", own, budget)
	}
}

// BenchmarkSessionCall is one 2025-11-25 session's tools/call through the
// transport, answered on a stream: the path of the bench's legacy row
// without the sockets.
func BenchmarkSessionCall(b *testing.B) {
	sc := newSessionCall(b)
	b.ReportAllocs()
	for b.Loop() {
		sc.post()
	}
}
