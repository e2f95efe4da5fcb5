package streamable

import (
	"context"
	"encoding/json"
	"io"
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
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// echoUpstream is a 2025-11-25 Streamable HTTP server with one tool, echo,
// answering from canned bytes.
func echoUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil || msg.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		res := `{}`
		switch msg.Method {
		case mcp.MethodInitialize:
			w.Header().Set(mcp.HeaderSessionID, "canned")
			res = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"canned","version":"1"}}`
		case mcp.MethodToolsList:
			res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case mcp.MethodToolsCall:
			res = `{"content":[{"type":"text","text":"echo:hi"}]}`
		}
		out, _ := jsonrpc.Encode(jsonrpc.NewResult(msg.ID, json.RawMessage(res)))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// TestStatelessCallReadsParamsOnce counts how often a 2026-07-28
// tools/call's params are read after the parse, from the transport's
// first look at it to the upstream's answer: at most three times (issue
// 28: read once, hand the view down). Run with -tags rawjsoncount.
func TestStatelessCallReadsParamsOnce(t *testing.T) {
	if !rawjson.CountingEnabled {
		t.Skip("counts reads only when built with -tags rawjsoncount")
	}
	cfg, err := config.Parse("t.yaml", []byte("upstreams:\n  up: {url: http://up.test/mcp, timeout: 10s, protocol: legacy}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(cfg, host.Options{Logger: zap.NewNop(), HTTPClient: memhttp.Client(echoUpstream())})
	h.Start()
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	gen := &core.Generation{ByPath: map[string]*core.Route{}, MaxBody: 1 << 20, Limits: core.LimitsOf(&config.Config{})}
	rte := &core.Route{Path: "/mcp", View: catalog.NewView(h, nil, true), Gen: gen}
	gen.Routes, gen.ByPath["/mcp"] = []*core.Route{rte}, rte
	c := core.New(h, core.Options{Logger: zap.NewNop(), Current: func() *core.Generation { return gen }})
	defer c.Close(func() {})
	tr := New(c, sessions.NewStore(sessions.StoreOptions{}), time.Hour)

	call := func() (*httptest.ResponseRecorder, *rawjson.Counter, int) {
		msg, perr := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"hi"},` +
			`"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		if perr != nil {
			t.Fatal(perr)
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header = http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__echo"}, "Accept": {"application/json, text/event-stream"}}
		w := httptest.NewRecorder()
		n := rawjson.Watch(msg.Params)
		defer n.Stop()
		p := mcp.ReadParams(msg.Method, msg.Params) // Post's one reading, right after the parse
		viewed := n.Reads()
		if !isStateless(r, msg, p) {
			t.Fatal("not taken for a stateless request")
		}
		tr.stateless(w, r, rte, msg, p)
		return w, n, viewed
	}
	call() // the first call lists the upstream's tools
	w, n, viewed := call()
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "echo:hi") {
		t.Fatalf("call: %d %s", w.Code, w.Body)
	}
	reads := n.Reads() - viewed
	t.Logf("a stateless tools/call read its params %d times after the parse and its view (%d for the view)", reads, viewed)
	if reads > 3 {
		t.Errorf("a stateless tools/call read its params %d times after the parse, want at most 3: %q", reads, n.Sites())
	}
}
