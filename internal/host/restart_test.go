package host_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// Hosts such as Claude Code never initialize again after a 404 on their
// session id, so a gateway restarted without sessions.key_file must still
// serve the sessions it issued: it keeps a key ring of its own in its
// state directory. Without a state directory (the old behaviour) the same
// session is refused after the restart, which the control case checks.
func TestRestartKeepsSessionsWithoutKeyFile(t *testing.T) {
	up := gatewaytest.HTTPUpstream(t, "alpha", 0)
	yaml := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\nroutes: [{path: /mcp}]\n", up)
	for _, tc := range []struct {
		name     string
		stateDir string
		kept     bool
	}{
		{"state directory", t.TempDir(), true},
		{"none (control)", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			start := func(ln net.Listener) *gateway.Gateway {
				gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, StateDir: tc.stateDir})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := gw.Host().WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				return gw
			}
			stop := func(gw *gateway.Gateway) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := gw.Shutdown(ctx); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}
			gw := start(ln)
			c := &gatewaytest.RawClient{T: t, URL: "http://" + addr + "/mcp"}
			c.Initialize("2025-11-25")
			const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__t00"}}`
			if r := c.Post(call); r.Status != http.StatusOK || r.Last(t).Error != nil {
				t.Fatalf("call before the restart: HTTP %d %s", r.Status, r.Body)
			}
			stop(gw)

			ln, err = net.Listen("tcp", addr) // the same address, as a restarted process binds
			if err != nil {
				t.Fatal(err)
			}
			gw = start(ln)
			defer stop(gw)
			r := c.Post(call)
			switch {
			case tc.kept && (r.Status != http.StatusOK || r.Last(t).Error != nil):
				t.Fatalf("the session opened before the restart was refused after it: HTTP %d %s", r.Status, r.Body)
			case tc.kept && !strings.Contains(string(r.Last(t).Result), "alpha/t00"):
				t.Fatalf("answer after the restart: %s", r.Last(t).Result)
			case !tc.kept && r.Status != http.StatusNotFound:
				t.Fatalf("without a key ring: HTTP %d after the restart, want 404; the control no longer tells the cases apart", r.Status)
			}
		})
	}
}
