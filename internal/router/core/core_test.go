package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// The core's unit tests: a real MCP server (the official SDK's) as the
// upstream, reached over memhttp, so Handle, the call pump and the bridge
// run exactly as in the gateway but with no network and no child process.

// upstreamServer is the test upstream: echo, progress and sample tools.
// Unless stateless, it speaks only the session revisions, so that its
// sampling is a server→client request.
func upstreamServer(stateless bool) *sdk.Server {
	var versions []string
	if !stateless {
		for _, v := range sdk.SupportedProtocolVersions() {
			if v < "2026-07-28" {
				versions = append(versions, v)
			}
		}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "1"}, &sdk.ServerOptions{SupportedProtocolVersions: versions})
	type textIn struct {
		Text string `json:"text"`
	}
	text := func(format string, a ...any) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, a...)}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return text("echo:%s", in.Text), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "progress"}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		for i := range 3 {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3})
		}
		return text("progressed"), nil, nil
	})
	type slowIn struct {
		MS int `json:"ms"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "slow"}, func(ctx context.Context, _ *sdk.CallToolRequest, in slowIn) (*sdk.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond): // the behaviour under test: a tool that takes ms
		case <-ctx.Done():
		}
		return text("slept"), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "sample"}, func(ctx context.Context, req *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 8, Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Text}}}})
		if err != nil {
			return text("sampling failed: %v", err), nil, nil
		}
		return text("sampled:%s", res.Content.(*sdk.TextContent).Text), nil, nil
	})
	return s
}

// fixture is a core over one upstream "up" on route /mcp.
type fixture struct {
	core *Core
	rte  *Route
	gen  *Generation
}

// noStored is a Stored with no sessions: the tests' sessions are their own.
type noStored struct{}

func (noStored) All() []*Session        { return nil }
func (noStored) Lookup(string) *Session { return nil }
func (noStored) Remove(string)          {}

// opts adjust the core's options (a tracer, say). A stateless fixture's
// upstream speaks 2026-07-28.
func newFixture(t *testing.T, stateless bool, opts ...func(*Options)) *fixture {
	t.Helper()
	return newFixtureWith(t, upstreamServer(stateless), stateless, opts...)
}

// newFixtureWith is newFixture over the upstream server srv.
func newFixtureWith(t *testing.T, srv *sdk.Server, stateless bool, opts ...func(*Options)) *fixture {
	t.Helper()
	cfg, err := config.Parse("core_test.yaml", []byte("upstreams:\n  up: {url: http://up.test/mcp, timeout: 10s}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var hopts *sdk.StreamableHTTPOptions
	if stateless {
		hopts = &sdk.StreamableHTTPOptions{Stateless: true} // the SDK speaks 2026-07-28 only so
	}
	h := host.New(cfg, host.Options{
		Logger:     zaptest.NewLogger(t).Named("host"),
		HTTPClient: memhttp.Client(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, hopts)),
	})
	h.Start()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	f := &fixture{gen: &Generation{ByPath: map[string]*Route{}, MaxBody: 1 << 20, Limits: LimitsOf(&config.Config{})}}
	f.rte = &Route{Path: "/mcp", View: catalog.NewView(h, nil, true), Gen: f.gen}
	f.gen.Routes, f.gen.ByPath["/mcp"] = []*Route{f.rte}, f.rte
	o := Options{Logger: zaptest.NewLogger(t), Current: func() *Generation { return f.gen }, Sessions: noStored{}}
	for _, opt := range opts {
		opt(&o)
	}
	f.core = New(h, o)
	t.Cleanup(func() { f.core.Close(func() {}) })
	return f
}

// session is a stored-session caller of revision 2025-11-25 with caps.
func (f *fixture) session(caps string) *Session {
	return NewSession("s1", f.rte, mcp.Version20251125, json.RawMessage(caps), nil, &auth.Principal{Subject: "alice", Issuer: "https://idp"})
}

// stateless is a 2026-07-28 caller's request session with caps.
func (f *fixture) stateless(t *testing.T, caps string, p *auth.Principal) *Session {
	s := NewRequestSession(auth.WithPrincipal(context.Background(), p), f.rte, mcp.Version20260728, json.RawMessage(caps), nil, p.Key(), "", false)
	t.Cleanup(s.End)
	return s
}

func request(method, params string) *jsonrpc.Message {
	return jsonrpc.NewRequest(jsonrpc.IntID(1), method, json.RawMessage(params))
}

// text is the first text content of a tools/call result.
func text(t *testing.T, resp *jsonrpc.Message) string {
	t.Helper()
	if resp.Error != nil {
		return "error " + fmt.Sprint(resp.Error.Code) + ": " + resp.Error.Message
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", resp.Result, err)
	}
	return r.Content[0].Text
}

func TestHandle(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	for _, tc := range []struct {
		name, method, params string
		want                 string // a substring of the answer's text or error
	}{
		{"ping", mcp.MethodPing, `{}`, ""},
		{"routed call, name translated", mcp.MethodToolsCall, `{"name":"up__echo","arguments":{"text":"hi"}}`, "echo:hi"},
		{"unknown tool", mcp.MethodToolsCall, `{"name":"up__nope","arguments":{}}`, "error -32602"},
		{"unknown upstream", mcp.MethodToolsCall, `{"name":"down__echo","arguments":{}}`, "error -32602"},
		{"no such method", "tools/frobnicate", `{}`, "error -32601"},
		{"setLevel needs a level", mcp.MethodLoggingSetLevel, `{}`, "error -32602"},
		{"setLevel knows the levels", mcp.MethodLoggingSetLevel, `{"level":"loud"}`, "unknown level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.core.Handle(ctx, f.session(`{}`), request(tc.method, tc.params), nil, nil)
			if string(resp.ID) != "1" {
				t.Fatalf("answer id %s, want the request's", resp.ID)
			}
			if tc.want == "" {
				if resp.Error != nil {
					t.Fatalf("error %v", resp.Error)
				}
				return
			}
			got := ""
			if resp.Error != nil || tc.method == mcp.MethodToolsCall {
				got = text(t, resp)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("answer %q, want it to contain %q", got, tc.want)
			}
		})
	}

	t.Run("list is merged and prefixed", func(t *testing.T) {
		resp := f.core.Handle(ctx, f.session(`{}`), request(mcp.MethodToolsList, `{}`), nil, nil)
		var r struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if resp.Error != nil || json.Unmarshal(resp.Result, &r) != nil {
			t.Fatalf("tools/list: %v %s", resp.Error, resp.Result)
		}
		var names []string
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"up__echo", "up__progress", "up__sample", "up__slow"}) {
			t.Errorf("tools %v", names)
		}
	})
}

// Handle applies the verdict the transport already asked for (one policy
// decision per call), and decides itself only without one.
func TestHandleUsesTheVerdict(t *testing.T) {
	f := newFixture(t, false)
	deny, err := policy.Compile(&config.Policy{Default: config.PolicyDeny})
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := policy.Compile(&config.Policy{Default: config.PolicyAllow})
	ctx := context.Background()
	msg := request(mcp.MethodToolsCall, `{"name":"up__echo","arguments":{"text":"x"}}`)

	f.gen.Policy = deny
	v := f.core.Decide(ctx, f.rte, msg)
	f.gen.Policy = allow // the policy changes; the verdict already given stands
	if got := text(t, f.core.Handle(ctx, f.session(`{}`), msg, v, nil)); !strings.HasPrefix(got, "error -32602") {
		t.Errorf("with a denying verdict: %q, want the call refused", got)
	}
	if got := text(t, f.core.Handle(ctx, f.session(`{}`), msg, nil, nil)); got != "echo:x" {
		t.Errorf("without a verdict: %q, want Handle to decide (allow)", got)
	}
	other := &Route{Path: "/mcp", View: f.rte.View, Gen: &Generation{Policy: allow}}
	stale := f.core.Decide(ctx, other, msg) // made for another generation: not used
	f.gen.Policy = deny
	if got := text(t, f.core.Handle(ctx, f.session(`{}`), msg, stale, nil)); !strings.Contains(got, "unknown tool") {
		t.Errorf("with another generation's verdict: %q, want a fresh (denying) decision", got)
	}
}

// A stateless caller of a session-revision upstream: the upstream's
// sampling request parks the call and becomes input_required; the retry
// with inputResponses resumes it; only its owner may.
func TestBridgedCall(t *testing.T) {
	f := newFixture(t, false)
	alice := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	msg := request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"2+2?"}}`)
	call := f.core.StartBridged(f.stateless(t, `{"sampling":{}}`, alice), msg, nil, nil)
	out := call.Next(nil, nil, func([]byte) {})
	call.Release()
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if out.InputRequired == nil || json.Unmarshal(out.InputRequired, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || !IsBridgeState(ir.RequestState) {
		t.Fatalf("first round %+v, want input_required with one request and our requestState", out)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	retry := func(p *auth.Principal, responses string) (*Call, *jsonrpc.Error) {
		params := fmt.Sprintf(`{"name":"up__sample","arguments":{"text":"2+2?"},"requestState":%q,"inputResponses":%s}`, ir.RequestState, responses)
		c, home, err := f.core.Resume(f.stateless(t, `{"sampling":{}}`, p), request(mcp.MethodToolsCall, params))
		if home != "" {
			t.Fatalf("home %q: no other replica here", home)
		}
		return c, err
	}
	if _, err := retry(&auth.Principal{Subject: "mallory", Issuer: "https://idp"}, `{}`); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another principal's retry: %v, want -32602", err)
	}
	again, err := retry(alice, `{}`) // answers nothing: asked again at once
	if err != nil {
		t.Fatal(err)
	}
	if out := again.Next(nil, nil, func([]byte) {}); out.InputRequired == nil {
		t.Errorf("a retry without the answer: %+v, want input_required again", out)
	}
	again.Release()
	resumed, err := retry(alice, fmt.Sprintf(`{%q:{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}}`, key))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Release()
	if out := resumed.Next(nil, nil, func([]byte) {}); out.Resp == nil || text(t, out.Resp) != "sampled:four" {
		t.Errorf("resumed: %+v, want the call's answer", out)
	}
}

// A stateless caller that lacks the capability the upstream's request
// needs is told so (-32021), not left waiting.
func TestBridgedCallMissingCapability(t *testing.T) {
	f := newFixture(t, false)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	call := f.core.StartBridged(f.stateless(t, `{}`, p), request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"?"}}`), nil, nil)
	defer call.Release()
	out := call.Next(nil, nil, func([]byte) {})
	if out.Err == nil || out.Err.Code != mcp.CodeMissingRequiredClientCapability || !strings.Contains(string(out.Err.Data), "sampling") {
		t.Errorf("outcome %+v, want -32021 naming sampling", out)
	}
}

// Stop ends a bridged call (a stateless client closing its stream cancels
// the request).
func TestBridgedCallStop(t *testing.T) {
	f := newFixture(t, false)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	call := f.core.StartBridged(f.stateless(t, `{"sampling":{}}`, p), request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"?"}}`), nil, nil)
	defer call.Release()
	stop := make(chan struct{})
	close(stop)
	if out := call.Next(stop, nil, func([]byte) {}); !out.Stopped {
		t.Errorf("outcome %+v, want Stopped", out)
	}
	if err := call.park.ctx.Err(); err == nil {
		t.Error("the stopped call's context is still live")
	}
}

// A stateless caller's routed request runs unbridged only when its
// upstream speaks a stateless revision, and then it answers as a plain
// call, parking nothing. It goes by the verdict's reading of the target.
func TestUnbridged(t *testing.T) {
	alice := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	ctx := auth.WithPrincipal(context.Background(), alice)
	call := request(mcp.MethodToolsCall, `{"name":"up__echo","arguments":{"text":"hi"}}`)
	modern := newFixture(t, true)
	sess := modern.stateless(t, `{}`, alice)
	unbridged := func(f *fixture, msg *jsonrpc.Message) bool {
		return f.core.Unbridged(ctx, f.core.Decide(ctx, f.rte, msg))
	}
	if !unbridged(modern, call) {
		t.Fatal("a call of a 2026-07-28 upstream is bridged")
	}
	if unbridged(modern, request(mcp.MethodTasksGet, `{"taskId":"x"}`)) {
		t.Error("a task request is unbridged: which upstream it goes to is not known at once")
	}
	if unbridged(modern, request(mcp.MethodToolsCall, `{"name":"nowhere__echo","arguments":{}}`)) {
		t.Error("a call of no known upstream is unbridged")
	}
	if modern.core.Unbridged(ctx, nil) {
		t.Error("a request without a verdict is unbridged")
	}
	resp := modern.core.Serve(context.Background(), sess, call, nil, EmitFunc(func([]byte) {}), 0)
	if text(t, resp) != "echo:hi" || len(modern.core.bridge.parked) != 0 {
		t.Errorf("answer %s, %d parked; want echo:hi and nothing parked", resp.Result, len(modern.core.bridge.parked))
	}
	legacy := newFixture(t, false)
	if unbridged(legacy, call) {
		t.Error("a call of a session-revision upstream, which may ask for input mid-call, is unbridged")
	}
}
