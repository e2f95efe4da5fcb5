package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// Issue 27 item 1: policy globs judged a resource URI as a string while
// server-everything (the TypeScript SDK's McpServer, WHATWG URL parsing)
// read it with dot-segments removed, "%2e" taken for ".", tabs dropped and
// the scheme folded: "deny .../instructions.md" under "allow
// .../document/*" was passed by ".../document/x/../instructions.md", and
// ".../document/../../dynamic/text/7" read outside the allowed prefix.
// Through the real server: every URI the gateway forwards is judged in
// the form the upstream reads, and every other form is refused with the
// form to send, whose own decision is then the upstream's reading.
func TestResourceURIsJudgedAsServerEverythingReadsThem(t *testing.T) {
	cmd := gatewaytest.ServerEverything(t)
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  ev:
    command: [%q, %q, %q]
routes:
  - path: /mcp
    upstreams: [ev]
  - path: /mcp/u
    upstreams: [ev]
    prefix: false
policy:
  default: deny
  rules:
    - allow: ["resource:ev+demo://resource/static/document/*", "resource:demo://resource/static/document/*"]
      deny: ["resource:ev+demo://resource/static/document/instructions.md", "resource:demo://resource/static/document/instructions.md"]
`, cmd[0], cmd[1], cmd[2])
	_, base := gatewaytest.StartGateway(t, yaml)
	const (
		doc    = "demo://resource/static/document/"
		denied = doc + "instructions.md"
		ok     = doc + "features.md"
		outer  = "demo://resource/dynamic/text/7" // a template's, outside the allowed prefix
	)
	type want int
	const (
		read    want = iota // served
		hidden              // answered like a URI nobody has
		failed              // allowed, and the upstream has nothing by that name
		refused             // refused, with no form the gateway can vouch for
	)
	for _, tc := range []struct {
		uri  string
		send string // the canonical form the refusal names ("" when none, or not refused)
		then want   // the decision on the URI (or, when refused, on send)
		only string // a route the case is for ("" for both)
	}{
		{uri: ok, then: read},
		{uri: denied, then: hidden},
		{uri: outer, then: hidden},
		{uri: doc + "x/../instructions.md", send: denied, then: hidden},
		{uri: doc + "./instructions.md", send: denied, then: hidden},
		{uri: doc + "%2e/instructions.md", send: denied, then: hidden},
		{uri: doc + "%2E/instructions.md", send: denied, then: hidden},
		{uri: doc + "../../dynamic/text/7", send: outer, then: hidden},
		{uri: doc + "%2e%2e/%2E%2e/dynamic/text/7", send: outer, then: hidden},
		{uri: doc + "%2e%2E/../dynamic/text/7", send: outer, then: hidden},
		{uri: "ev+" + doc + "%2e%2e/%2e%2e/dynamic/text/7", send: "ev+" + outer, then: hidden, only: "/mcp"},
		{uri: "ev+" + doc + "x/../instructions.md", send: "ev+" + denied, then: hidden, only: "/mcp"},
		{uri: "demo://resource/dynamic/text/%2e%2e/%2e%2e/static/document/instructions.md", send: denied, then: hidden},
		{uri: "DEMO://resource/static/document/features.md", send: ok, then: read},
		{uri: "demo://RESOURCE/static/document/features.md", send: ok, then: read},
		{uri: doc + "%66eatures.md", send: ok, then: read},
		{uri: "file:///etc/../etc/passwd", send: "file:///etc/passwd", then: hidden},
		{uri: doc + "instructions.md?x=1", then: failed}, // judged as sent; no such resource upstream
		{uri: doc + "%2Finstructions.md", then: refused},
		{uri: doc + "x%2F..%2Finstructions.md", then: refused},
		{uri: doc + `x\..\instructions.md`, then: refused},
		{uri: doc + "instr\tuctions.md", then: refused},
		{uri: doc + "instructions.md#x", then: refused},
		{uri: "demo://resource/static//document/instructions.md", then: refused},
		{uri: "demo:resource/static/document/../document/instructions.md", then: refused},
	} {
		for _, route := range []string{"/mcp", "/mcp/u"} {
			if tc.only != "" && tc.only != route {
				continue
			}
			t.Run(route+" "+tc.uri, func(t *testing.T) {
				c := &gatewaytest.RawClient{T: t, URL: base + route}
				c.Initialize("2025-11-25")
				for _, method := range []string{mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe} {
					m := c.Call(method, map[string]string{"uri": tc.uri})
					if tc.send != "" || tc.then == refused {
						if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "resource URI") {
							t.Fatalf("%s %q: %s; want invalid params refusing the URI", method, tc.uri, gatewaytest.Describe(m))
						}
						if tc.send == "" {
							continue
						}
						if !strings.Contains(m.Error.Message, "send "+tc.send) {
							t.Errorf("%s %q: %q; want it to name %s", method, tc.uri, m.Error.Message, tc.send)
						}
						m = c.Call(method, map[string]string{"uri": tc.send})
					}
					checkDecision(t, method, m, int(tc.then))
				}
			})
		}
	}
	// A 2026-07-28 subscriptions/listen stream's resourceSubscriptions
	// are subscribed through the same check: only the canonical, allowed
	// URI is acknowledged.
	t.Run("listen", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		subs := []string{ok, doc + "x/../features.md", doc + "%2e%2e/%2e%2e/dynamic/text/7", denied, "DEMO://resource/static/document/features.md"}
		body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":` + gatewaytest.MustJSON(t, subs) + `},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"subscriptions/listen"}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		ev, err := sse.NewReader(resp.Body, 1<<20).Next()
		if err != nil {
			t.Fatalf("no acknowledgement: %v", err)
		}
		var ack struct {
			Params struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			} `json:"params"`
		}
		if err := json.Unmarshal(ev.Data, &ack); err != nil {
			t.Fatalf("acknowledgement %s: %v", ev.Data, err)
		}
		if got := ack.Params.Notifications.ResourceSubscriptions; !slices.Equal(got, []string{ok}) {
			t.Errorf("acknowledged %q, want only %s", got, ok)
		}
	})
}

// checkDecision checks a read's (or subscription's) answer: 0 served,
// 1 hidden (resource not found, from the gateway), 2 an error of the
// upstream for an allowed URI it has nothing under.
func checkDecision(t *testing.T, method string, m *jsonrpc.Message, want int) {
	t.Helper()
	switch want {
	case 0:
		if m.Error != nil {
			t.Errorf("%s: %s; want it served", method, gatewaytest.Describe(m))
		}
		if method == mcp.MethodResourcesRead {
			var r struct{ Contents []struct{ URI, Text string } }
			if json.Unmarshal(m.Result, &r) != nil || len(r.Contents) == 0 || !strings.HasSuffix(r.Contents[0].URI, "/features.md") {
				t.Errorf("%s: %s; want features.md", method, gatewaytest.Describe(m))
			}
		}
	case 1:
		if m.Error == nil || m.Error.Code != mcp.CodeResourceNotFound {
			t.Errorf("%s: %s; want it hidden (resource not found)", method, gatewaytest.Describe(m))
		}
	case 2:
		if method == mcp.MethodResourcesRead && m.Error == nil {
			t.Errorf("%s: %s; want the upstream's error", method, gatewaytest.Describe(m))
		}
	}
}
