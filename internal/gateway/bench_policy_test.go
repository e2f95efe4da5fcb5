package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/policy/policytest"
)

// BenchmarkPolicyAddedHTTP is what a 1,000-rule policy with CEL
// conditions adds to one small 2026-07-28 tools/call over HTTP, in one
// process: two gateways in front of one stateless SDK upstream, the same
// API-key principal on both, one with `default: allow` and one with the
// policy (bench scenario 4's rule shape; the call is allowed by rule
// 500). Each iteration calls both, in alternating order, and the
// benchmark reports the median of the paired differences (added-µs/call)
// beside each side's median: the host's drift between iterations cancels,
// which ns/op of two separate benchmarks would not (issue 18: JWT + policy
// at most 25 µs). Unlike a microbenchmark of the decision alone, the
// policy runs here between other work, as in a server, with its caches
// cold.
func BenchmarkPolicyAddedHTTP(b *testing.B) {
	srv := gatewaytest.SDKServer("st", 0) // its echo answers "st:<text>"
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	b.Cleanup(up.Close)
	base := fmt.Sprintf("listen: 127.0.0.1:0\nauth:\n  api_keys: [{name: alice, key: k1, groups: [team500, team7]}]\nupstreams:\n  st:\n    url: %s/mcp\n", up.URL)
	_, plain := benchStartGateway(b, base+"policy: {default: allow}\n")
	_, guarded := benchStartGateway(b, base+policytest.Large{Rules: 1000, When: true, Grant: 500, GrantPrefix: "st__"}.YAML())

	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"st__echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Authorization": {"Bearer k1"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"st__echo"}}
	client := &http.Client{}
	call := func(url string) time.Duration {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = header.Clone()
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"text":"st:hello"`)) {
			b.Fatalf("HTTP %d %s %v", resp.StatusCode, got, err)
		}
		return d
	}
	for range 200 { // connections, caches, the upstream's first sessions
		call(plain)
		call(guarded)
	}
	var ps, gs, diffs []time.Duration
	n := 0
	for b.Loop() {
		var p, g time.Duration
		if n%2 == 0 {
			p, g = call(plain), call(guarded)
		} else {
			g, p = call(guarded), call(plain)
		}
		n++
		ps, gs, diffs = append(ps, p), append(gs, g), append(diffs, g-p)
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Microsecond)
	}
	b.ReportMetric(median(ps), "plain-µs/call")
	b.ReportMetric(median(gs), "guarded-µs/call")
	b.ReportMetric(median(diffs), "added-µs/call")
}
