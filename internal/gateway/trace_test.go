package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTraceContextPropagates: a client's W3C trace context reaches the
// upstream, as headers and in params._meta (the MCP convention, the only
// way to a stdio server), for JSON and streamed calls; a caller's own
// _meta.traceparent is left as it is.
func TestTraceContextPropagates(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.SDKServer("alpha", 0)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	type seen struct{ header, meta string }
	var mu sync.Mutex
	var calls []seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				mt, _ := m.Params.Meta["traceparent"].(string)
				mu.Lock()
				calls = append(calls, seen{r.Header.Get("Traceparent"), mt})
				mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha: {url: %s}\n", ts.URL))

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Traceparent": {tp}}}
	c.Initialize("2025-11-25")
	// JSON answer, then a streamed one.
	c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"a"}}}`,
		func(r *http.Request) { r.Header.Set("Accept", "application/json") })
	c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"b"}}}`)
	// The caller's own traceparent in _meta wins.
	const own = "00-11111111111111111111111111111111-2222222222222222-01"
	c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"c"},"_meta":{"traceparent":"` + own + `"}}}`)

	mu.Lock()
	defer mu.Unlock()
	want := []seen{{tp, tp}, {tp, tp}, {tp, own}}
	if len(calls) != len(want) {
		t.Fatalf("upstream saw %d calls: %+v", len(calls), calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d: upstream saw %+v, want %+v", i, calls[i], want[i])
		}
	}
}
