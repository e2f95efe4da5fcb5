package edge_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// corsPage is a web app that speaks MCP to the gateway with fetch, as a
// browser-based host does, and writes what it saw into the page.
const corsPage = `<!doctype html><html><body><pre id="out">pending</pre><script>
const url = %q;
async function rpc(body, sid) {
  const h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
  if (sid) { h["Mcp-Session-Id"] = sid; h["Mcp-Protocol-Version"] = "2025-11-25"; }
  const r = await fetch(url, {method: "POST", headers: h, body: JSON.stringify(body)});
  let text = await r.text();
  const data = text.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5));
  if (data.length) text = data[data.length - 1];
  return {status: r.status, sid: r.headers.get("Mcp-Session-Id"), msg: text ? JSON.parse(text) : null};
}
(async () => {
  const out = [];
  try {
    const init = await rpc({jsonrpc: "2.0", id: 1, method: "initialize", params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "page", version: "1"}}});
    out.push("initialize " + init.status + " " + (init.sid ? "with-session" : "no-session"));
    const n = await rpc({jsonrpc: "2.0", method: "notifications/initialized"}, init.sid);
    out.push("initialized " + n.status);
    const list = await rpc({jsonrpc: "2.0", id: 2, method: "tools/list"}, init.sid);
    out.push("tools " + list.msg.result.tools.map(t => t.name).join(","));
    const call = await rpc({jsonrpc: "2.0", id: 3, method: "tools/call", params: {name: "alpha__t00", arguments: {}}}, init.sid);
    out.push("call " + call.msg.result.content[0].text);
  } catch (e) {
    out.push("failed: " + e);
  }
  document.getElementById("out").textContent = out.join("\n");
})();
</script></body></html>`

// A page on an allowed origin completes a session with fetch in a real
// browser (the preflight answered, the session id readable); a page on any
// other origin is refused by the browser itself, since the gateway gives
// it no CORS headers.
func TestCORSInChromium(t *testing.T) {
	bin := gatewaytest.Chromium(t)
	up := gatewaytest.HTTPUpstream(t, "alpha", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := "http://" + ln.Addr().String() + "/mcp"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, corsPage, mcpURL)
	}))
	t.Cleanup(page.Close)
	_, port, _ := net.SplitHostPort(page.Listener.Addr().String())
	allowed := "http://127.0.0.1:" + port
	other := "http://localhost:" + port // the same server, another origin
	// A listen address that is not loopback (the test listener is): on a
	// loopback listener every loopback page is a local app and allowed.
	yaml := fmt.Sprintf("listen: 0.0.0.0:8080\nauth: {insecure_no_auth: true}\nallowed_origins: [%q]\nupstreams:\n  alpha: {url: %q}\nroutes: [{path: /mcp}]\n", allowed, up)
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})

	dom := func(pageURL string) string {
		out := string(gatewaytest.RunChromium(t, bin, "--virtual-time-budget=15000", "--dump-dom", pageURL))
		i, j := strings.Index(out, `<pre id="out">`), strings.Index(out, "</pre>")
		if i < 0 || j < i {
			t.Fatalf("no result in the page:\n%s", out)
		}
		return out[i+len(`<pre id="out">`) : j]
	}
	got := dom(allowed + "/")
	if !strings.HasPrefix(got, "initialize 200 with-session\ninitialized 202\ntools ") || !strings.Contains(got, ",alpha__t00,") || !strings.HasSuffix(got, "\ncall alpha/t00") {
		t.Errorf("allowed origin: the page saw\n%s\nwant a session, its tools and the call's answer", got)
	}
	if got := dom(other + "/"); !strings.HasPrefix(got, "failed: TypeError") {
		t.Errorf("another origin: the page saw\n%s\nwant fetch refused by the browser", got)
	}
}
