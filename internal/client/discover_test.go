package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
)

// TestDiscoverRetriesSupportedVersion: a server that refuses the first
// server/discover with UnsupportedProtocolVersion (-32022) but lists
// 2026-07-28 in data.supported is asked again (the conformance suite's
// request-metadata scenario); one that lists only older revisions gets the
// initialize handshake instead.
func TestDiscoverRetriesSupportedVersion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supported string
		modern    bool
		methods   []string
	}{
		{name: "2026-07-28 listed", supported: `["2026-07-28"]`, modern: true, methods: []string{"server/discover", "server/discover"}},
		{name: "only older revisions", supported: `["2025-11-25"]`, modern: false, methods: []string{"server/discover", "initialize", "notifications/initialized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var methods []string
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					http.Error(w, "", http.StatusMethodNotAllowed)
					return
				}
				body, _ := io.ReadAll(r.Body)
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				mu.Lock()
				methods = append(methods, m.Method)
				first := len(methods) == 1
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch {
				case first:
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":%s,"requested":"2026-07-28"}}}`, m.ID, tc.supported)
				case m.Method == "server/discover":
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
				case m.Method == "initialize":
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Modern() != tc.modern {
				t.Errorf("Modern() = %v, want %v", c.Modern(), tc.modern)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(methods) != fmt.Sprint(tc.methods) {
				t.Errorf("requests %v, want %v", methods, tc.methods)
			}
		})
	}
}
