package serial_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// The Go SDK's client pings over Streamable HTTP at 2026-07-28 without
// _meta (the version only in its header), as its own server accepts; the
// gateway answers it too rather than refuse the missing _meta. A ping
// that names 2026-07-28 in its _meta is still refused as removed (the
// conformance suite checks that: sep-2575).
func TestGoSDKPingAt20260728(t *testing.T) {
	up := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\nroutes: [{path: /mcp}]\n", up))
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "2026-07-28")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping at 2026-07-28: %v", err)
	}
	raw := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	r := raw.Do("POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, func(req *http.Request) {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "ping")
	})
	if r.Status != http.StatusNotFound || gatewaytest.ErrorOf(t, r).Code != -32601 {
		t.Errorf("a ping with 2026-07-28 _meta: HTTP %d %s; want 404 and -32601", r.Status, r.Body)
	}
}
