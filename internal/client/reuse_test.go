package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
)

// TestStatelessStreamConnectionReused: a 2026-07-28 upstream that answers
// on an SSE stream and ends it a moment later. The caller's context ends
// as soon as it has the answer (as a downstream request's does); that must
// not close the connection under the stream's reader, or every call opens
// a new one.
func TestStatelessStreamConnectionReused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tail  time.Duration // how long the stream stays open after the answer
		calls int
	}{
		{"stream ends at once", 0, 20},
		{"stream ends a little later", 20 * time.Millisecond, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				switch m.Method {
				case "server/discover":
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
				case "tools/call":
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[]}}\n\n", m.ID)
					w.(http.Flusher).Flush()
					time.Sleep(tc.tail) // the behaviour under test: a stream that ends after its answer
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			ts.Start()
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.Modern() {
				t.Fatal("the upstream should be spoken to at 2026-07-28")
			}
			for i := range tc.calls {
				cctx, ccancel := context.WithCancel(ctx)
				resp, err := c.Call(cctx, "tools/call", json.RawMessage(`{"name":"x"}`), client.CallOptions{})
				ccancel() // the caller is done the moment it has the answer
				if err != nil || resp.Error != nil {
					t.Fatalf("call %d: %v %v", i, err, resp)
				}
				// The stream's end reaches the reader; a reader still finishing
				// when the next call starts costs one more connection, which
				// the bound below allows.
				time.Sleep(tc.tail + 10*time.Millisecond)
			}
			// Closing the stream under its reader opens a connection per
			// call; on a loaded machine a reader can now and then still be
			// finishing when the next call starts (one more connection), so
			// the bound is half the calls, not one.
			if n := conns.Load(); n > int64(tc.calls/2) {
				t.Fatalf("%d calls opened %d connections, want them reused (at most %d)", tc.calls, n, tc.calls/2)
			}
		})
	}
}
