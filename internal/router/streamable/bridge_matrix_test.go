package streamable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// The revision matrix: a 2026-07-28 client in front of a legacy upstream,
// and a legacy (2025-11-25) client in front of an upstream the gateway
// speaks only 2026-07-28 to (protocol: "2026"), each through every feature
// a client uses — tools, resources, prompts, completion, subscriptions,
// sampling, elicitation and roots. Both ends are the official Go SDK.

func TestRevisionMatrix(t *testing.T) {
	t.Parallel()
	for _, col := range []struct {
		name           string
		clientVersion  string
		modernUpstream bool
		upstreamYAML   string
	}{
		{"2026 client, legacy upstream", "2026-07-28", false, "    exact_capabilities: true\n"},
		{"legacy client, 2026 upstream", "2025-11-25", true, `    protocol: "2026"` + "\n"},
		// protocol auto, the default: the SDK's stateless server also
		// accepts initialize, but keeps no session, so it could not push
		// on that connection; older callers are served over 2026-07-28
		// as with protocol "2026" (Upstream.ClientFor).
		{"legacy client, 2026 upstream, protocol auto", "2025-11-25", true, ""},
		// Nothing to bridge: the upstream's own input_required results
		// reach the client, and its calls run unbridged (core.Unbridged).
		{"2026 client, 2026 upstream", "2026-07-28", true, `    protocol: "2026"` + "\n"},
		{"2026 client, 2026 upstream, protocol auto", "2026-07-28", true, ""},
	} {
		t.Run(col.name, func(t *testing.T) {
			srv := gatewaytest.MatrixServer(col.modernUpstream) // one server: its updates must reach every session's subscriptions
			var opts *mcp.StreamableHTTPOptions
			if col.modernUpstream {
				opts = &mcp.StreamableHTTPOptions{Stateless: true} // how the SDK serves 2026-07-28
			}
			ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
			t.Cleanup(ts.Close)
			// The admin listener's metrics show when a listen stream ended
			// (subscriptions).
			gw, base, admin := gatewaytest.StartAdminGateway(t, "listen: 127.0.0.1:0\nadmin: {listen: \"127.0.0.1:0\"}\nupstreams:\n  up:\n    url: "+ts.URL+"\n    forward_roots: true\n"+col.upstreamYAML, gateway.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := gw.Host().Upstream("up").Client(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.Modern() != col.modernUpstream {
				t.Fatalf("the gateway speaks %s to the upstream; the matrix needs the other revision", c.ProtocolVersion())
			}

			updates := &gatewaytest.FidInbox{}
			client := mcp.NewClient(&mcp.Implementation{Name: "matrix-client", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "four"}}, nil
				},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
				},
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					updates.Add(req.Params.URI)
				},
			})
			client.AddRoots(&mcp.Root{URI: "file:///matrix/root", Name: "root"})
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}},
				&mcp.ClientSessionOptions{ProtocolVersion: col.clientVersion})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if got := cs.InitializeResult().ProtocolVersion; got != col.clientVersion {
				t.Fatalf("client negotiated %s, want %s", got, col.clientVersion)
			}

			tool := func(t *testing.T, name string, args map[string]any, want string) {
				t.Helper()
				got, isErr, err := gatewaytest.FidCall(ctx, cs, name, args)
				if err != nil || isErr || got != want {
					t.Errorf("%s: %q (isError %v, err %v), want %q", name, got, isErr, err, want)
				}
			}
			t.Run("tools", func(t *testing.T) {
				res, err := cs.ListTools(ctx, nil)
				if err != nil || len(res.Tools) != 5 {
					t.Fatalf("tools/list: %v %v", res, err)
				}
				tool(t, "up__greet", map[string]any{"who": "Ada"}, "hello Ada")
				call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__greet", Arguments: map[string]any{"who": "Ada"}})
				if err != nil {
					t.Fatal(err)
				}
				// The client's server is the gateway: an upstream's per-hop
				// identity must not reach it (2026 clients get the gateway's).
				if info, ok := call.Meta["io.modelcontextprotocol/serverInfo"].(map[string]any); ok && info["name"] != "mcpgw" {
					t.Errorf("result _meta names the upstream: %v", call.Meta)
				}
			})
			t.Run("the upstream sees the caller's own capabilities", func(t *testing.T) {
				tool(t, "up__caps", nil, "sampling=true elicitation=true")
				bare := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, nil) // declares nothing
				bs, err := bare.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}},
					&mcp.ClientSessionOptions{ProtocolVersion: col.clientVersion})
				if err != nil {
					t.Fatal(err)
				}
				defer bs.Close()
				if got, _, err := gatewaytest.FidCall(ctx, bs, "up__caps", nil); err != nil || got != "sampling=false elicitation=false" {
					t.Errorf("a client declaring nothing: upstream saw %q (%v)", got, err)
				}
			})
			t.Run("resources", func(t *testing.T) {
				list, err := cs.ListResources(ctx, nil)
				if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "mem://doc" {
					t.Fatalf("resources/list: %+v %v", list, err)
				}
				for uri, want := range map[string]string{"mem://doc": "the doc", "mem://items/7": "item 7"} {
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != want || res.Contents[0].URI != uri {
						t.Errorf("read %s: %+v %v, want %q under its gateway URI", uri, res, err, want)
					}
				}
				tpl, err := cs.ListResourceTemplates(ctx, nil)
				if err != nil || len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != "mem://items/{id}" {
					t.Errorf("resources/templates/list: %+v %v", tpl, err)
				}
				_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://nothing"})
				if err == nil {
					t.Error("reading an unknown resource succeeded")
				}
			})
			t.Run("prompts", func(t *testing.T) {
				res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__welcome", Arguments: map[string]string{"who": "Ada"}})
				if err != nil || len(res.Messages) != 1 {
					t.Fatalf("prompts/get: %+v %v", res, err)
				}
				if tc, ok := res.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "welcome Ada" {
					t.Errorf("prompts/get content %+v", res.Messages[0].Content)
				}
			})
			t.Run("completion", func(t *testing.T) {
				res, err := cs.Complete(ctx, &mcp.CompleteParams{
					Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "mem://items/{id}"},
					Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"},
				})
				if err != nil || fmt.Sprint(res.Completion.Values) != "[41 42]" {
					t.Errorf("completion/complete: %+v %v", res, err)
				}
			})
			t.Run("sampling", func(t *testing.T) { tool(t, "up__ask", map[string]any{"kind": "sampling"}, "sampled four") })
			t.Run("elicitation", func(t *testing.T) { tool(t, "up__ask", map[string]any{"kind": "elicitation"}, "elicited accept Ada") })
			t.Run("roots", func(t *testing.T) { tool(t, "up__ask", map[string]any{"kind": "roots"}, "roots file:///matrix/root") })
			t.Run("subscriptions", func(t *testing.T) {
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://doc"}); err != nil {
					t.Fatalf("subscribe: %v", err)
				}
				// Touch until the update arrives: a 2026 subscription stream
				// may still be opening when Subscribe returns.
				testwait.Until(t, "an update of mem://doc", func() bool {
					tool(t, "up__touch", map[string]any{"uri": "mem://doc"}, "touched")
					return len(updates.Get()) > 0
				})
				if got := updates.Get(); len(got) == 0 || got[0] != "mem://doc" {
					t.Fatalf("resource updates %q, want mem://doc", got)
				}
				// A second subscription marks the stream: the gateway relays
				// an upstream's updates in order, so once the marker's update
				// arrived every update touched before it has too.
				const marker = "mem://items/1"
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: marker}); err != nil {
					t.Fatalf("subscribe %s: %v", marker, err)
				}
				// The marker is touched until an update of it arrives: a
				// 2026 subscription stream may be reopening meanwhile.
				mark := func(what string) {
					t.Helper()
					before := gatewaytest.FidCount(updates.Get(), marker)
					testwait.Until(t, what, func() bool {
						tool(t, "up__touch", map[string]any{"uri": marker}, "touched")
						return gatewaytest.FidCount(updates.Get(), marker) > before
					})
				}
				if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://doc"}); err != nil {
					t.Fatalf("unsubscribe: %v", err)
				}
				// A 2026 client subscribes with a listen stream per URI
				// and unsubscribes by cancelling that stream, which ends
				// at the gateway some time after Unsubscribe returns: the
				// marker's own stream says nothing of it. Until it ends the
				// gateway rightly relays mem://doc's updates on it, so wait
				// until only the marker's stream is open (legacy sessions
				// have none).
				testwait.Until(t, "the gateway to close mem://doc's listen stream", func() bool {
					mfs, _ := gatewaytest.Scrape(t, admin)
					n, _ := gatewaytest.Sample(mfs, "mcpgw_streams_open", "kind", "listen")
					return n <= 1
				})
				mark("the marker's update after the unsubscribe")
				n := gatewaytest.FidCount(updates.Get(), "mem://doc")
				tool(t, "up__touch", map[string]any{"uri": "mem://doc"}, "touched")
				mark("the marker's update after the last touch")
				if got := gatewaytest.FidCount(updates.Get(), "mem://doc"); got != n {
					t.Errorf("%d updates of mem://doc after unsubscribe: %q", got-n, updates.Get())
				}
			})
		})
	}
}

// TestStatelessBadInputReachesNoUpstream: each malformed or forged
// 2026-07-28 request gets the spec's error from the gateway, and the
// upstream never sees a call for it (counted at the upstream's handler).
func TestStatelessBadInputReachesNoUpstream(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.MatrixServer(false)
	var calls atomic.Int64
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
				calls.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: "+ts.URL+"\n")

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	post := func(header http.Header, body string) *gatewaytest.RawResponse {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: header}
		return c.Post(body)
	}
	hdr := func(version, method, name string) http.Header {
		return http.Header{"Mcp-Protocol-Version": {version}, "Mcp-Method": {method}, "Mcp-Name": {name}}
	}
	call := func(name, extra string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + name + `","arguments":{"kind":"sampling"},` + meta + extra + `}}`
	}

	// One genuine bridged call: input_required, then a retry completes it.
	first := post(hdr("2026-07-28", "tools/call", "up__ask"), call("up__ask", "")).Last(t)
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round: %s %v", first.Result, first.Error)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	answer := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}}`
	done := post(hdr("2026-07-28", "tools/call", "up__ask"), call("up__ask", answer+`,"requestState":"`+ir.RequestState+`"`)).Last(t)
	if done.Error != nil || !strings.Contains(string(done.Result), "sampled four") {
		t.Fatalf("retry: %s %v", done.Result, done.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d tools/call for one bridged call, want 1", n)
	}

	tampered := ir.RequestState[:len(ir.RequestState)-3] + "AAA"
	for name, tc := range map[string]struct {
		header http.Header
		body   string
		code   int64
	}{
		"Mcp-Name mismatch":   {hdr("2026-07-28", "tools/call", "up__greet"), call("up__ask", ""), mcp.CodeHeaderMismatch},
		"Mcp-Method mismatch": {hdr("2026-07-28", "prompts/get", "up__ask"), call("up__ask", ""), mcp.CodeHeaderMismatch},
		"unsupported version": {hdr("2099-01-01", "tools/call", "up__ask"), strings.Replace(call("up__ask", ""), `"2026-07-28"`, `"2099-01-01"`, 1), -32022},
		"tampered requestState": {hdr("2026-07-28", "tools/call", "up__ask"),
			call("up__ask", answer+`,"requestState":"`+tampered+`"`), -32602},
		"requestState of a call that ended": {hdr("2026-07-28", "tools/call", "up__ask"),
			call("up__ask", answer+`,"requestState":"`+ir.RequestState+`"`), -32602},
		"requestState of another request": {hdr("2026-07-28", "tools/call", "up__greet"),
			call("up__greet", answer+`,"requestState":"`+ir.RequestState+`"`), -32602},
	} {
		t.Run(name, func(t *testing.T) {
			r := post(tc.header, tc.body)
			if e := gatewaytest.ErrorOf(t, r); r.Status != http.StatusBadRequest || int64(e.Code) != tc.code {
				t.Errorf("HTTP %d %s; want 400 with %d", r.Status, r.Body, tc.code)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("the upstream saw a tools/call for it (%d in all)", n)
			}
		})
	}

	// inputResponses naming no request the gateway made: ignored, and what
	// is still missing is asked again (SEP-2322), without a new upstream call.
	again := post(hdr("2026-07-28", "tools/call", "up__ask"), call("up__ask", "")).Last(t)
	if again.Error != nil || json.Unmarshal(again.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("second call: %s %v", again.Result, again.Error)
	}
	for k := range ir.InputRequests {
		key = k
	}
	bogus := `,"inputResponses":{"no-such-request":{"action":"accept","content":{}}},"requestState":"` + ir.RequestState + `"`
	r := post(hdr("2026-07-28", "tools/call", "up__ask"), call("up__ask", bogus)).Last(t)
	var asked struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &asked) != nil || asked.ResultType != "input_required" || asked.InputRequests[key] == nil {
		t.Errorf("retry answering an unknown request: %s %v; want input_required asking %q again", r.Result, r.Error, key)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream saw %d tools/call, want 2 (two calls, no retries reach it)", n)
	}
	// Finish it: the SDK upstream's handler would otherwise wait on its
	// sampling request past the test (httptest.Server.Close waits for it).
	if json.Unmarshal(r.Result, &ir) == nil && ir.RequestState != "" {
		answer = `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}}`
		fin := post(hdr("2026-07-28", "tools/call", "up__ask"), call("up__ask", answer+`,"requestState":"`+ir.RequestState+`"`)).Last(t)
		if fin.Error != nil || !strings.Contains(string(fin.Result), "sampled four") {
			t.Errorf("completing the second call: %s %v", fin.Result, fin.Error)
		}
	}
}

// TestUnknownResourceNamedAsTheClientNamedIt: an upstream's resource-not-
// found error names its own URI in data.uri; the caller used the gateway's
// (here the explicit form: two upstreams have resources).
func TestUnknownResourceNamedAsTheClientNamedIt(t *testing.T) {
	t.Parallel()
	var urls []string
	for range 2 {
		srv := gatewaytest.MatrixServer(false)
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: "+urls[0]+"\n  other:\n    url: "+urls[1]+"\n")
	const uri = "mem://nothing?mcpgw=up"
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"resources/read"}, "Mcp-Name": {uri}}}
	r := c.Post(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	e := gatewaytest.ErrorOf(t, r)
	var data struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil || data.URI != uri {
		t.Errorf("error %d %q data %s: want data.uri %s", e.Code, e.Message, e.Data, uri)
	}
	if strings.Contains(e.Message, "mem://nothing") && !strings.Contains(e.Message, uri) {
		t.Errorf("message names the upstream's URI: %q", e.Message)
	}
}

// TestBridgeMetrics: parked calls and bridged rounds are visible on
// /metrics, so an operator sees a bridge filling up or clients retrying
// with states that are refused.
func TestBridgeMetrics(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.MatrixServer(false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	_, base, admin := gatewaytest.StartAdminGateway(t, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nupstreams:\n  up:\n    url: "+ts.URL+"\n", gateway.Options{})
	post := func(extra string) *jsonrpc.Message {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__ask"}}}
		return c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__ask","arguments":{"kind":"sampling"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}` + extra + `}}`).Last(t)
	}
	want := func(step string, parked, asked, resumed, refused float64) {
		t.Helper()
		mfs, _ := gatewaytest.Scrape(t, admin)
		for _, c := range []struct {
			got   func() (float64, bool)
			want  float64
			which string
		}{
			{func() (float64, bool) { return gatewaytest.Sample(mfs, "mcpgw_bridge_parked_calls") }, parked, "parked"},
			{func() (float64, bool) {
				return gatewaytest.Sample(mfs, "mcpgw_bridge_rounds_total", "outcome", "asked")
			}, asked, "asked"},
			{func() (float64, bool) {
				return gatewaytest.Sample(mfs, "mcpgw_bridge_rounds_total", "outcome", "resumed")
			}, resumed, "resumed"},
			{func() (float64, bool) {
				return gatewaytest.Sample(mfs, "mcpgw_bridge_rounds_total", "outcome", "refused")
			}, refused, "refused"},
		} {
			if v, ok := c.got(); !ok || v != c.want {
				t.Errorf("%s: %s = %v (present %v), want %v", step, c.which, v, ok, c.want)
			}
		}
	}
	want("before", 0, 0, 0, 0)
	first := post("")
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if first.Error != nil || json.Unmarshal(first.Result, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round: %s %v", first.Result, first.Error)
	}
	want("parked", 1, 1, 0, 0)
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	answer := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}}`
	if m := post(answer + `,"requestState":"mcpgw1.e30.e30"`); m.Error == nil {
		t.Fatal("a forged state was accepted")
	}
	want("refused", 1, 1, 0, 1)
	if m := post(answer + `,"requestState":"` + ir.RequestState + `"`); m.Error != nil || !strings.Contains(string(m.Result), "sampled four") {
		t.Fatalf("retry: %s %v", m.Result, m.Error)
	}
	want("resumed", 0, 1, 1, 1)
}

// TestStatelessLogLevelOverLegacyUpstream: a 2026-07-28 client gets a
// legacy upstream's log messages on its request's own stream, at or above
// the level its request's _meta asks for, and none when it asks for none.
func TestStatelessLogLevelOverLegacyUpstream(t *testing.T) {
	t.Parallel()
	srv := gatewaytest.MatrixServer(false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: "+ts.URL+"\n")
	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"info", []string{"info message", "error message"}},
		{"debug", []string{"debug message", "info message", "error message"}},
		{"", nil},
	} {
		t.Run("level "+tc.level, func(t *testing.T) {
			meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
			if tc.level != "" {
				meta += `,"io.modelcontextprotocol/logLevel":"` + tc.level + `"`
			}
			c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__log"}}}
			r := c.Post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"up__log","arguments":{},"_meta":{` + meta + `}}}`)
			var got []string
			for _, m := range r.Msgs {
				if m.Method == "notifications/message" {
					var p struct {
						Data string `json:"data"`
					}
					_ = json.Unmarshal(m.Params, &p)
					got = append(got, p.Data)
				}
			}
			if last := r.Last(t); last.Error != nil || !strings.Contains(string(last.Result), "logged") {
				t.Fatalf("result: %s %v", last.Result, last.Error)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("log messages on the request's stream: %q, want %q", got, tc.want)
			}
		})
	}
}
