package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
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
			ts := legacyUpstreamSession(t, tc.session, nil)
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
