package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// headerUpstream is a 2026-07-28 HTTP server with one tool whose
// parameters carry x-mcp-header annotations and one whose annotation is
// invalid; it records the Mcp-Param-* headers of every tools/call.
type headerUpstream struct {
	mu    sync.Mutex
	calls []string // "tool: Header=value ..." in header-name order
}

func (u *headerUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil {
		http.Error(w, "", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	var res string
	switch m.Method {
	case "server/discover":
		res = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"h","version":"1"}}`
	case "tools/list":
		res = `{"resultType":"complete","tools":[
			{"name":"search","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"note":{"type":"string","x-mcp-header":"Note"},"q":{"type":"string"}}}},
			{"name":"broken","inputSchema":{"type":"object","properties":{"score":{"type":"number","x-mcp-header":"Score"}}}}]}`
	case "tools/call":
		var hs []string
		for k, v := range r.Header {
			if strings.HasPrefix(k, "Mcp-Param-") {
				hs = append(hs, k+"="+strings.Join(v, ","))
			}
		}
		slices.Sort(hs)
		u.mu.Lock()
		u.calls = append(u.calls, m.Params.Name+": "+strings.Join(hs, " "))
		u.mu.Unlock()
		res = `{"resultType":"complete","content":[]}`
	default:
		res = `{}`
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
}

// TestParamHeadersMirroredByTheGateway: to a 2026-07-28 upstream the
// gateway itself mirrors x-mcp-header arguments into Mcp-Param-* headers
// (SEP-2243) for any caller, sends no others (not even a caller's), and
// leaves a tool with an invalid annotation out of the list and refuses to
// call it (the conformance suite's http-custom-headers and
// http-invalid-tool-headers scenarios).
func TestParamHeadersMirroredByTheGateway(t *testing.T) {
	up := &headerUpstream{}
	ts := httptest.NewServer(up)
	defer ts.Close()
	cfg, err := config.Parse("t.yaml", []byte("upstreams:\n  web:\n    url: "+ts.URL+"\n    protocol: \"2026\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(cfg, host.Options{Logger: zaptest.NewLogger(t)})
	h.Start()
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	v := catalog.NewView(h, []string{"web"}, false)

	list, jerr := v.List(ctx, catalog.Tools, nil)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if !strings.Contains(string(list), `"search"`) || strings.Contains(string(list), `"broken"`) {
		t.Errorf("tools/list = %s; want search listed and broken left out", list)
	}

	for _, tc := range []struct {
		name, args string
		caller     http.Header // what a 2026-07-28 caller's own headers were
		want       string      // the call as the upstream saw it, or the refusal
	}{
		{name: "search", args: `{"region":"eu","n":3,"note":" padded ","q":"x"}`,
			want: "search: Mcp-Param-N=3 Mcp-Param-Note==?base64?IHBhZGRlZCA=?= Mcp-Param-Region=eu"},
		{name: "search", args: `{"region":"eu","n":null}`, caller: http.Header{"Mcp-Param-Bogus": {"1"}, "Mcp-Param-N": {"9"}},
			want: "search: Mcp-Param-Region=eu"},
		{name: "broken", args: `{"score":1.5}`, want: `refused: tool "broken" of upstream "web" cannot be called: its inputSchema has an invalid x-mcp-header annotation`},
	} {
		cctx := client.WithHeaders(ctx, tc.caller)
		params := json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":%s}`, tc.name, tc.args))
		before := len(up.recorded())
		resp, jerr := v.Forward(cctx, "tools/call", params, client.CallOptions{})
		got := ""
		switch {
		case jerr != nil:
			if jerr.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s: error code %d, want %d", tc.name, jerr.Code, jsonrpc.CodeInvalidParams)
			}
			got = "refused: " + jerr.Message
		case resp.Error != nil:
			got = "upstream error: " + resp.Error.Message
		default:
			if calls := up.recorded(); len(calls) == before+1 {
				got = calls[before]
			}
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("call %s %s:\n got %q\nwant %q", tc.name, tc.args, got, tc.want)
		}
	}
}

func (u *headerUpstream) recorded() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}
