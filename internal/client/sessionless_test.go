package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// TestSessionless: an initialized Streamable HTTP connection is
// sessionless when the upstream's initialize answer carries no
// Mcp-Session-Id (the Go SDK's Stateless mode), and not when it does.
func TestSessionless(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session string
		want    bool
	}{{"no session", "", true}, {"a session", "s1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				w.Header().Set("Content-Type", "application/json")
				switch m.Method {
				case mcp.MethodServerDiscover:
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
				case mcp.MethodInitialize:
					if tc.session != "" {
						w.Header().Set("Mcp-Session-Id", tc.session)
					}
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
			if got := c.Sessionless(); got != tc.want {
				t.Errorf("Sessionless() = %v, want %v", got, tc.want)
			}
		})
	}
}
