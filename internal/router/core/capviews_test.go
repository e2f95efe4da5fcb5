package core_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// TestExactCapabilities: with exact_capabilities an upstream that
// initializes sees each caller's own sampling and elicitation capabilities
// (one connection per distinct set); without it, every caller looks like
// the gateway, which declares all it can relay.
func TestExactCapabilities(t *testing.T) {
	t.Parallel()
	callers := []struct{ caps, want string }{
		{`{}`, "sampling=false elicitation=false"},
		{`{"sampling":{}}`, "sampling=true elicitation=false"},
		{`{"elicitation":{}}`, "sampling=false elicitation=true"},
		{`{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{}}`, "sampling=true elicitation=true"},
		{`{}`, "sampling=false elicitation=false"}, // same set again: same connection
	}
	call := func(t *testing.T, base, caps string) string {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__caps"},
		}}
		m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__caps","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`).Last(t)
		if m.Error != nil {
			t.Fatalf("caps %s: %v", caps, m.Error)
		}
		return string(m.Result)
	}

	t.Run("exact", func(t *testing.T) {
		up := gatewaytest.FidHTTPUpstream(t, "up", 0, "exact_capabilities: true") // legacy revisions only
		gw, base := gatewaytest.FidGatewayGW(t, "", up)
		for _, c := range callers {
			if got := call(t, base, c.caps); !strings.Contains(got, c.want) {
				t.Errorf("caller declaring %s: upstream saw %s, want %q", c.caps, got, c.want)
			}
		}
		// Three sets differ from the gateway's own; the full one shares.
		if n := gw.Host().Upstream("up").Views(); n != 3 {
			t.Errorf("upstream holds %d capability connections, want 3", n)
		}
		// A legacy session is a caller too.
		inbox := &gatewaytest.FidInbox{}
		s := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("L", inbox))
		if got, _, err := gatewaytest.FidCall(t.Context(), s, "up__caps", nil); err != nil || got != "sampling=true elicitation=false" {
			t.Errorf("legacy session with a sampling handler: upstream saw %q (%v)", got, err)
		}
	})

	t.Run("shared", func(t *testing.T) {
		up := gatewaytest.FidHTTPUpstream(t, "up", 0)
		base := gatewaytest.FidGateway(t, "", up)
		for _, c := range callers {
			if got := call(t, base, c.caps); !strings.Contains(got, "sampling=true elicitation=true") {
				t.Errorf("caller declaring %s: upstream saw %s, want the gateway's full set", c.caps, got)
			}
		}
	})
}
