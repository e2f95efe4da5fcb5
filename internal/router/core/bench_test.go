package core

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
)

// cannedUpstream is the cheapest upstream that works: a 2025-11-25
// Streamable HTTP server answering from canned bytes (one echo tool), so
// that a benchmark through it measures the gateway's code and not an
// SDK's.
func cannedUpstream() http.Handler { return cannedUpstreamWith(nil) }

// cannedUpstreamWith is cannedUpstream with onCall run before each
// tools/call is answered.
func cannedUpstreamWith(onCall func(r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if msg.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var res string
		switch msg.Method {
		case mcp.MethodInitialize:
			w.Header().Set("Mcp-Session-Id", "canned")
			res = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"canned","version":"1"}}`
		case mcp.MethodToolsList:
			res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case mcp.MethodToolsCall:
			if onCall != nil {
				onCall(r)
				if r.Context().Err() != nil {
					return // as over a socket: a call whose caller went away gets no answer to race its cancellation
				}
			}
			res = `{"content":[{"type":"text","text":"echo:hi"}]}`
		case mcp.MethodPing:
			res = `{}`
		}
		reply := jsonrpc.NewResult(msg.ID, json.RawMessage(res))
		if res == "" {
			reply = jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s here", msg.Method))
		}
		out, _ := jsonrpc.Encode(reply)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// benchCore is a core over the canned upstream "up" on route /mcp, with
// no policy, as a config without one makes it.
func benchCore(b testing.TB) (*Core, *Route, *host.Host) {
	b.Helper()
	return cannedCore(b, cannedUpstream())
}

func cannedCore(b testing.TB, up http.Handler) (*Core, *Route, *host.Host) {
	b.Helper()
	cfg, err := config.Parse("bench.yaml", []byte("upstreams:\n  up: {url: http://up.test/mcp, timeout: 10s, protocol: legacy}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	h := host.New(cfg, host.Options{Logger: zap.NewNop(), HTTPClient: memhttp.Client(up)})
	h.Start()
	b.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	gen := &Generation{ByPath: map[string]*Route{}, MaxBody: 1 << 20, Limits: LimitsOf(&config.Config{})}
	rte := &Route{Path: "/mcp", View: catalog.NewView(h, nil, true), Gen: gen}
	gen.Routes, gen.ByPath["/mcp"] = []*Route{rte}, rte
	c := New(h, Options{Logger: zap.NewNop(), Current: func() *Generation { return gen }, Sessions: noStored{}})
	b.Cleanup(func() { c.Close(func() {}) })
	return c, rte, h
}

// BenchmarkHandleCall is the core handling one small tools/call of a
// session caller against an in-memory upstream; BenchmarkUpstreamCall is
// the same call made by the upstream client alone. The difference is the
// router's own cost (issue 18: at most 10 allocations).
func BenchmarkHandleCall(b *testing.B) {
	c, rte, _ := benchCore(b)
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	ctx := context.Background()
	if resp := c.Handle(ctx, sess, msg, nil, nil); resp.Error != nil || string(resp.Result) != `{"content":[{"type":"text","text":"echo:hi"}]}` {
		b.Fatalf("answer %s %v", resp.Result, resp.Error)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Handle(ctx, sess, msg, nil, nil)
	}
}

func BenchmarkUpstreamCall(b *testing.B) {
	_, _, h := benchCore(b)
	up, err := h.Upstream("up").Client(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := up.Call(ctx, mcp.MethodToolsCall, params, client.CallOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
