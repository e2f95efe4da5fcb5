package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// BenchmarkStreamableCall is a tools/call over loopback to an upstream
// that answers on an event stream and ends it a moment later (flushes the
// answer, then returns, as the Go SDK's server does), or with the answer
// (one write): the client's whole cost per call, the upstream's included.
func BenchmarkStreamableCall(b *testing.B) {
	for _, tc := range []struct {
		name  string
		flush bool
	}{{"end-after-answer", true}, {"end-with-answer", false}} {
		b.Run(tc.name, func(b *testing.B) {
			ts := legacyUpstream(b, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", id)
				if tc.flush {
					w.(http.Flusher).Flush()
				}
			})
			tr := client.DefaultHTTPTransport()
			defer tr.CloseIdleConnections()
			ctx := context.Background()
			c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL, Client: &http.Client{Transport: tr}}), client.Options{Name: "b"})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			args := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Call(ctx, mcp.MethodToolsCall, args, client.CallOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := tr.Stats()
			b.ReportMetric(float64(st.Opened), "conns")
		})
	}
}
