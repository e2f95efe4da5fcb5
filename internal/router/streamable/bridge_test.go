package streamable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestBridgeLegacyUpstreamTo2026Clients: a legacy upstream's sampling
// request in the middle of a call reaches a 2026-07-28 client as an
// input_required result; the client's retry answers it and the call
// completes — for two clients at once, each with its own answer.
func TestBridgeLegacyUpstreamTo2026Clients(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidHTTPUpstream(t, "up", 2) // legacy revisions only
	base := gatewaytest.FidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
	a := gatewaytest.Connect2026(t, base+"/mcp", gatewaytest.FidSampler("A", inA))
	b := gatewaytest.Connect2026(t, base+"/mcp", gatewaytest.FidSampler("B", inB))
	gatewaytest.FidRun(false,
		func() {
			gatewaytest.FidExpect(ctx, t, "A", a, "up__sample", map[string]any{"tag": "A", "barrier": true}, "tag=A answer=answer-from-A")
		},
		func() {
			gatewaytest.FidExpect(ctx, t, "B", b, "up__sample", map[string]any{"tag": "B", "barrier": true}, "tag=B answer=answer-from-B")
		})
	if got := inA.Get(); !slices.Equal(got, []string{"question from A"}) {
		t.Errorf("A's handler saw %q, want only its own question", got)
	}
	if got := inB.Get(); !slices.Equal(got, []string{"question from B"}) {
		t.Errorf("B's handler saw %q, want only its own question", got)
	}
}

// TestBridgeRequestStateIsAuthenticated: a forged, altered or misapplied
// requestState is refused with -32602 and reaches no upstream.
func TestBridgeRequestStateIsAuthenticated(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	base := gatewaytest.FidGateway(t, "", up)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	post := func(name, extra string) *gatewaytest.RawResponse {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {name},
		}}
		return c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{"tag":"X"},` + meta + extra + `}}`)
	}

	first := post("up__sample", "")
	res := first.Last(t)
	if res.Error != nil {
		t.Fatalf("first round: %v", res.Error)
	}
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(res.Result, &ir); err != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("first round: want input_required with one request, got %s", res.Result)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	answer := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"forty-two"}}}`

	// A character in the middle, changed for certain (the last ones may
	// carry only padding bits, or already be "AA").
	mid := len(ir.RequestState) / 2
	swap := byte('A')
	if ir.RequestState[mid] == 'A' {
		swap = 'B'
	}
	tampered := ir.RequestState[:mid] + string(swap) + ir.RequestState[mid+1:]
	for name, tc := range map[string]struct{ tool, state string }{
		"altered signature": {"up__sample", tampered},
		"not ours":          {"up__sample", "mcpgw1.e30.e30"},
		"other tool":        {"up__echo", ir.RequestState},
	} {
		r := post(tc.tool, answer+`,"requestState":"`+tc.state+`"`)
		if r.Status != http.StatusBadRequest || gatewaytest.ErrorOf(t, r).Code != jsonrpc.CodeInvalidParams || !strings.Contains(gatewaytest.ErrorOf(t, r).Message, "requestState") {
			t.Errorf("%s: HTTP %d %s", name, r.Status, r.Body)
		}
	}
	// The genuine state still completes the parked call, exactly once.
	r := post("up__sample", answer+`,"requestState":"`+ir.RequestState+`"`)
	if m := r.Last(t); m.Error != nil || !strings.Contains(string(m.Result), "answer=forty-two") {
		t.Fatalf("genuine retry: %s", r.Body)
	}
	if again := post("up__sample", answer+`,"requestState":"`+ir.RequestState+`"`); again.Status != http.StatusBadRequest {
		t.Errorf("replayed state: HTTP %d %s", again.Status, again.Body)
	}
}

// TestStatelessResultsNameTheGateway: a 2026-07-28 client's server is the
// gateway, so an upstream's serverInfo in a result's per-hop _meta is
// replaced by the gateway's.
func TestStatelessResultsNameTheGateway(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidModernStdioUpstream(t, "up")
	base := gatewaytest.FidGateway(t, "", up)
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}}
	m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`).Last(t)
	if m.Error != nil {
		t.Fatal(m.Error)
	}
	var res struct {
		Meta map[string]struct {
			Name string `json:"name"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Meta["io.modelcontextprotocol/serverInfo"].Name; got != "mcpgw" {
		t.Errorf("serverInfo in the result names %q, want the gateway", got)
	}
}

// TestBridgeMissingClientCapability: a legacy upstream that asks a
// 2026-07-28 caller for sampling the caller did not declare ends the call
// with MissingRequiredClientCapability (-32021, HTTP 400) naming what is
// missing — what the upstream would answer if it spoke 2026-07-28 itself —
// and no input_required is returned.
func TestBridgeMissingClientCapability(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)
	base := gatewaytest.FidGateway(t, "", up)
	for name, tc := range map[string]struct{ tool, caps, want string }{
		"sampling":    {"up__sample", `{}`, `{"sampling":{}}`},
		"elicitation": {"up__elicit", `{"sampling":{}}`, `{"elicitation":{}}`},
	} {
		t.Run(name, func(t *testing.T) {
			c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
				"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tc.tool},
			}}
			r := c.Post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":{"tag":"X"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + tc.caps + `}}}`)
			e := gatewaytest.ErrorOf(t, r)
			if r.Status != http.StatusBadRequest || e.Code != -32021 {
				t.Fatalf("HTTP %d %s; want 400 with -32021", r.Status, r.Body)
			}
			var data struct {
				Required json.RawMessage `json:"requiredCapabilities"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil || string(data.Required) != tc.want {
				t.Errorf("error data %s; want requiredCapabilities %s", e.Data, tc.want)
			}
			if string(r.Msgs[len(r.Msgs)-1].ID) != "7" {
				t.Errorf("error id %s, want the request's 7", r.Msgs[len(r.Msgs)-1].ID)
			}
		})
	}
}

// TestBridgeParkedCallLeavesStdioUsable: on a shared stdio upstream a
// server→client request is relayed only when it can be told whose it is.
// A bridged call parked on a 2026 client's retry is blocked in its own
// request, so it must not make every other caller's sampling ambiguous
// while it waits (as an abandoned one would, until it expires).
func TestBridgeParkedCallLeavesStdioUsable(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidStdioUpstream(t, "pipe")
	base := gatewaytest.FidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	post := func(extra string) *jsonrpc.Message {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"pipe__sample"},
		}}
		return c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pipe__sample","arguments":{"tag":"P"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}` + extra + `}}`).Last(t)
	}
	first := post("")
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round: %s %v", first.Result, first.Error)
	}

	inB := &gatewaytest.FidInbox{}
	b := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("B", inB))
	gatewaytest.FidExpect(ctx, t, "B", b, "pipe__sample", map[string]any{"tag": "B"}, "tag=B answer=answer-from-B")
	if got := inB.Get(); !slices.Equal(got, []string{"question from B"}) {
		t.Errorf("B's handler saw %q, want only its own question", got)
	}

	var key string
	for k := range ir.InputRequests {
		key = k
	}
	done := post(`,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"late"}}},"requestState":"` + ir.RequestState + `"`)
	if done.Error != nil || !strings.Contains(string(done.Result), "tag=P answer=late") {
		t.Errorf("parked call after the other: %s %v", done.Result, done.Error)
	}
}
