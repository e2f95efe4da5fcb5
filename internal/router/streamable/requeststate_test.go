package streamable_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// stateUpstream is a 2026-07-28 server whose one tool asks for input
// once: its first answer is input_required with requestState "st-1", and
// a retry carrying that state completes.
type stateUpstream struct {
	mu     sync.Mutex
	states []string // the requestState of every tools/call
}

func (u *stateUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			RequestState string `json:"requestState"`
		} `json:"params"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var res string
	switch m.Method {
	case "server/discover":
		res = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`
	case "tools/list":
		res = `{"resultType":"complete","tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`
	case "tools/call":
		u.mu.Lock()
		u.states = append(u.states, m.Params.RequestState)
		u.mu.Unlock()
		if m.Params.RequestState == "st-1" {
			res = `{"resultType":"complete","content":[{"type":"text","text":"done"}]}`
		} else {
			res = `{"resultType":"input_required","inputRequests":{"e1":{"method":"elicitation/create","params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"st-1"}`
		}
	default:
		res = `{"resultType":"complete"}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
}

// TestUpstreamRequestStateBoundToCaller: a stateless upstream's
// requestState reaches the caller sealed to it; another principal's retry
// with it (or with the upstream's raw state) is refused before the
// upstream, and the caller's own retry gets the upstream its state back.
func TestUpstreamRequestStateBoundToCaller(t *testing.T) {
	up := &stateUpstream{}
	ts := httptest.NewServer(up)
	defer ts.Close()
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  st: {url: %s, protocol: "2026"}
auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
policy:
  default: allow
`, ts.URL))
	call := func(key, extra string) *gatewaytest.RawResponse {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"st__ask"}, "X-Api-Key": {key},
		}}
		return c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"st__ask","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}` + extra + `}}`)
	}
	first := call("alice-secret-0123456789", "").Last(t)
	var ir struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || ir.ResultType != "input_required" {
		t.Fatalf("first call: %+v %s", first.Error, first.Result)
	}
	if ir.RequestState == "st-1" || ir.RequestState == "" {
		t.Fatalf("requestState %q: want the upstream's sealed for the caller", ir.RequestState)
	}
	answers := `,"inputResponses":{"e1":{"action":"accept","content":{}}}`
	for _, state := range []string{ir.RequestState, "st-1"} {
		r := call("bob-secret-0123456789", `,"requestState":"`+state+`"`+answers)
		if m := r.Last(t); m.Error == nil || m.Error.Code != -32602 || strings.Contains(string(r.Body), "done") {
			t.Errorf("bob retrying with %q: %s; want refused (-32602)", state, r.Body)
		}
	}
	if m := call("alice-secret-0123456789", `,"requestState":"`+ir.RequestState+`"`+answers).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "done") {
		t.Errorf("alice's retry: %+v %s; want the call completed", m.Error, m.Result)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if got := strings.Join(up.states, ","); got != ",st-1" {
		t.Errorf("the upstream saw requestStates %q; want the first call's none and alice's retry's st-1", got)
	}
}
