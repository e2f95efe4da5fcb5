package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
)

// A url upstream configured with the wrong transport fails with a hint
// naming the other one: a legacy HTTP+SSE endpoint (GET only) dialled as
// Streamable HTTP, and a Streamable HTTP endpoint dialled as legacy SSE.
func TestWrongTransportHint(t *testing.T) {
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: endpoint\ndata: /messages?s=1\n\n"))
	}))
	defer legacy.Close()
	srv := sdk.NewServer(&sdk.Implementation{Name: "s", Version: "1"}, nil)
	streamable := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer streamable.Close()

	for _, tc := range []struct {
		name string
		tr   client.Transport
		want string
	}{
		{"sse endpoint as streamable", client.NewStreamable(client.HTTPConfig{URL: legacy.URL}), "set transport: sse"},
		{"streamable endpoint as sse", client.NewLegacySSE(client.HTTPConfig{URL: streamable.URL}), "remove transport: sse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Connect(ctx, tc.tr, client.Options{Name: "t"})
			if err == nil {
				c.Close()
				t.Fatal("connected; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want a hint containing %q", err, tc.want)
			}
		})
	}
}
