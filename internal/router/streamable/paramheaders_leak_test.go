package streamable_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// paramUpstream is a 2026-07-28 HTTP server with one prompt and one tool
// without x-mcp-header annotations; it records the Mcp-Param-* headers of
// every routed request.
type paramUpstream struct {
	mu   sync.Mutex
	seen []string // "method: Header=value ..."
}

func (u *paramUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var res string
	switch m.Method {
	case "server/discover":
		res = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{}},"serverInfo":{"name":"p","version":"1"}}`
	case "tools/list":
		res = `{"resultType":"complete","tools":[{"name":"plain","inputSchema":{"type":"object"}}]}`
	case "prompts/list":
		res = `{"resultType":"complete","prompts":[{"name":"greet"}]}`
	case "tools/call", "prompts/get":
		var hs []string
		for k, v := range r.Header {
			if strings.HasPrefix(k, "Mcp-Param-") {
				hs = append(hs, k+"="+strings.Join(v, ","))
			}
		}
		slices.Sort(hs)
		u.mu.Lock()
		u.seen = append(u.seen, m.Method+": "+strings.Join(hs, " "))
		u.mu.Unlock()
		res = `{"resultType":"complete","content":[],"messages":[]}`
	default:
		res = `{"resultType":"complete"}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
}

// TestCallerParamHeadersNotForwarded: a 2026-07-28 caller's own
// Mcp-Param-* headers reach no upstream where the gateway has nothing to
// check them against (a prompt, a tool without x-mcp-header
// annotations): an upstream gets only what the gateway mirrors itself.
func TestCallerParamHeadersNotForwarded(t *testing.T) {
	up := &paramUpstream{}
	ts := httptest.NewServer(up)
	defer ts.Close()
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  web: {url: %s, protocol: "2026"}
`, ts.URL))
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct{ method, name, params string }{
		{"prompts/get", "web__greet", `{"name":"web__greet",` + meta + `}`},
		{"tools/call", "web__plain", `{"name":"web__plain","arguments":{},` + meta + `}`},
	} {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {tc.method}, "Mcp-Name": {tc.name},
			"Mcp-Param-Tenant": {"other-tenant"},
		}}
		if m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":` + tc.params + `}`).Last(t); m.Error != nil {
			t.Fatalf("%s: %v", tc.method, m.Error)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if want := []string{"prompts/get: ", "tools/call: "}; !slices.Equal(up.seen, want) {
		t.Errorf("the upstream saw %q; want %q (no caller's Mcp-Param-* header)", up.seen, want)
	}
}
