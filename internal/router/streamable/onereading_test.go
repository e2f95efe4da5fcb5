package streamable_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// One reading of a request (issue 13, findings 1-3): what the policy and
// the audit judge is what the upstream runs. A request that names a
// member twice, or spells a member the gateway reads in another case, is
// refused with -32600 before policy, on every transport, and the upstream
// never sees it.

// readingUpstream is an official-SDK upstream named "ci" whose tools,
// prompts and resources are harmless or dangerous by name. It records
// what it ran, and the body of every tools/call, prompts/get and
// resources/read that reached it.
type readingUpstream struct {
	url    string
	mu     sync.Mutex
	ran    []string
	bodies []string
}

func (u *readingUpstream) record(what string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ran = append(u.ran, what)
}

// reached returns what the upstream ran and the routed requests it received.
func (u *readingUpstream) reached() (ran, bodies []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.ran), slices.Clone(u.bodies)
}

func newReadingUpstream(t *testing.T) *readingUpstream {
	t.Helper()
	u := &readingUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "ci", Version: "1"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		u.record("tool echo " + in.Text)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo:" + in.Text}}}, nil, nil
	})
	for _, name := range []string{"add", "safe_tool", "delete_everything"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, textIn) (*mcp.CallToolResult, any, error) {
			u.record("tool " + name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil, nil
		})
	}
	type repoIn struct {
		Repo string `json:"repo"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "repo_tool"}, func(_ context.Context, _ *mcp.CallToolRequest, in repoIn) (*mcp.CallToolResult, any, error) {
		u.record("tool repo_tool " + in.Repo)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran on " + in.Repo}}}, nil, nil
	})
	for _, name := range []string{"greet", "secret"} {
		s.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			u.record("prompt " + name)
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name}}}}, nil
		})
	}
	for _, uri := range []string{"mem://public", "mem://secret"} {
		s.AddResource(&mcp.Resource{URI: uri, Name: strings.TrimPrefix(uri, "mem://")}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			u.record("resource " + uri)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "content of " + uri}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			for _, m := range []string{"tools/call", "prompts/get", "resources/read"} {
				if bytes.Contains(body, []byte(`"method":"`+m+`"`)) {
					u.mu.Lock()
					u.bodies = append(u.bodies, string(body))
					u.mu.Unlock()
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

// readingYAML serves the upstream on /mcp without prefixes (findings 1
// and 2) and on /mcp/p with them (finding 3), behind a policy that allows
// the harmless names and repo_tool on acme/ repositories only.
func readingYAML(u *readingUpstream, listen bool) string {
	l := ""
	if listen {
		l = "listen: 127.0.0.1:0\n"
	}
	return l + fmt.Sprintf(`upstreams:
  ci: {url: %s}
routes:
  - path: /mcp
    upstreams: [ci]
    prefix: false
  - path: /mcp/p
    upstreams: [ci]
policy:
  default: deny
  rules:
    - allow: ["echo", "ci__echo", "safe_tool", "ci__safe_tool", "prompt:greet", "resource:mem://public"]
    - allow: ["repo_tool", "ci__repo_tool"]
      when: 'has(arguments.repo) && arguments.repo.startsWith("acme/")'
`, u.url)
}

// refusedUnseen checks that m is the -32600 refusal naming want, and that
// nothing reached the upstream since it had ran and bodies.
func refusedUnseen(t *testing.T, u *readingUpstream, m *jsonrpc.Message, id, want string, before int) {
	t.Helper()
	if m == nil || m.Error == nil {
		t.Fatalf("answer %s, want the -32600 refusal", gatewaytest.Describe(m))
	}
	if m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, want) {
		t.Errorf("error %d %q, want -32600 saying %q", m.Error.Code, m.Error.Message, want)
	}
	if string(m.ID) != id {
		t.Errorf("answered id %s, want %s (the request's)", m.ID, id)
	}
	ran, bodies := u.reached()
	if len(bodies) != before {
		t.Errorf("the upstream received %q and ran %q; the refused request must not reach it", bodies[before:], ran)
	}
}

// reachedAfter runs a call the policy allows and checks that it reached
// the upstream: the recorder sees what gets through.
func reachedAfter(t *testing.T, u *readingUpstream, m *jsonrpc.Message, want string) {
	t.Helper()
	if m == nil || m.Error != nil || !strings.Contains(string(m.Result), want) {
		t.Fatalf("allowed call: %s, want a result with %q", gatewaytest.Describe(m), want)
	}
}

// Finding 1: a duplicate target on a prefix: false route was judged as
// the first and run as the last. Tables over tools, prompts, resources
// and completions, on a Streamable HTTP session.
func TestOneReadingDuplicateTarget(t *testing.T) {
	u := newReadingUpstream(t)
	_, base := gatewaytest.StartGateway(t, readingYAML(u, true))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	reachedAfter(t, u, c.Post(gatewaytest.CallBody(1, `{"name":"echo","arguments":{"text":"hi"}}`)).Last(t), "echo:hi")
	tests := []struct{ name, body, want string }{
		{"tools/call name", gatewaytest.CallBody(2, `{"name":"echo","name":"add","arguments":{"text":"x"}}`), `duplicate member "name" in params`},
		{"tools/call escaped name", gatewaytest.CallBody(2, `{"name":"echo","n\u0061me":"add","arguments":{"text":"x"}}`), `duplicate member "name" in params`},
		{"prompts/get name", `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"greet","name":"secret"}}`, `duplicate member "name" in params`},
		{"resources/read uri", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mem://public","uri":"mem://secret"}}`, `duplicate member "uri" in params`},
		{"completion ref", `{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet","name":"secret"},"argument":{"name":"a","value":"v"}}}`, `duplicate member "name" in params.ref`},
		{"duplicate params", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"},"params":{"name":"add"}}`, `duplicate member "params" in the message`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, before := u.reached()
			r := c.Post(tt.body)
			if r.Status != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", r.Status)
			}
			refusedUnseen(t, u, r.Last(t), "2", tt.want, len(before))
		})
	}
	if ran, _ := u.reached(); !slices.Equal(ran, []string{"tool echo hi"}) {
		t.Errorf("the upstream ran %q, want only the allowed echo", ran)
	}
}

// Finding 2: duplicate arguments passed a CEL condition on the first and
// ran with the second.
func TestOneReadingDuplicateArguments(t *testing.T) {
	u := newReadingUpstream(t)
	_, base := gatewaytest.StartGateway(t, readingYAML(u, true))
	for _, route := range []struct{ path, tool string }{{"/mcp", "repo_tool"}, {"/mcp/p", "ci__repo_tool"}} {
		t.Run(route.path, func(t *testing.T) {
			c := &gatewaytest.RawClient{T: t, URL: base + route.path}
			c.Initialize("2025-06-18")
			reachedAfter(t, u, c.Post(gatewaytest.CallBody(1, `{"name":"`+route.tool+`","arguments":{"repo":"acme/x"}}`)).Last(t), "ran on acme/x")
			if e := gatewaytest.ErrorOf(t, c.Post(gatewaytest.CallBody(2, `{"name":"`+route.tool+`","arguments":{"repo":"evil/x"}}`))); !strings.Contains(e.Message, "forbidden") {
				t.Fatalf("the condition itself: %+v", e)
			}
			for _, body := range []string{
				gatewaytest.CallBody(3, `{"name":"`+route.tool+`","arguments":{"repo":"acme/x"},"arguments":{"repo":"evil/x"}}`),
				gatewaytest.CallBody(3, `{"name":"`+route.tool+`","arguments":{"repo":"acme/x","repo":"evil/x"}}`),
				gatewaytest.CallBody(3, `{"name":"`+route.tool+`","arguments":{"repo":"acme/x","re\u0070o":"evil/x"}}`),
			} {
				_, before := u.reached()
				m := c.Post(body).Last(t)
				want := `duplicate member "arguments" in params`
				if !strings.Contains(body, `},"arguments"`) {
					want = `duplicate member "repo" in params.arguments`
				}
				refusedUnseen(t, u, m, "3", want, len(before))
			}
		})
	}
	ran, _ := u.reached()
	for _, r := range ran {
		if strings.Contains(r, "evil") {
			t.Errorf("the upstream ran %q", r)
		}
	}
}

// Finding 3: on a prefixed route the gateway rewrote name and forwarded
// NAME, which an upstream decoding params with encoding/json (it matches
// struct fields case-insensitively, the last one winning) runs. This SDK
// upstream happens to match names exactly; what the test proves is that
// the request never reaches it, whatever its decoder.
func TestOneReadingCaseVariant(t *testing.T) {
	u := newReadingUpstream(t)
	_, base := gatewaytest.StartGateway(t, readingYAML(u, true))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp/p"}
	c.Initialize("2025-11-25")
	reachedAfter(t, u, c.Post(gatewaytest.CallBody(1, `{"name":"ci__safe_tool","arguments":{"text":"x"}}`)).Last(t), "ran safe_tool")
	tests := []struct{ name, params, want string }{
		{"NAME", `{"name":"ci__safe_tool","NAME":"delete_everything","arguments":{"text":"x"}}`, `member "NAME" in params is a case variant of "name"`},
		{"Name before name", `{"Name":"delete_everything","name":"ci__safe_tool"}`, `member "Name" in params is a case variant of "name"`},
		{"Arguments", `{"name":"ci__repo_tool","arguments":{"repo":"acme/x"},"Arguments":{"repo":"evil/x"}}`, `member "Arguments" in params is a case variant of "arguments"`},
		{"Kelvin sign in _meta", `{"name":"ci__safe_tool","_meta":{"progressTo\u212aen":"p"}}`, `member "progressTo\u212aen" in params._meta is a case variant of "progressToken"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, before := u.reached()
			refusedUnseen(t, u, c.Post(gatewaytest.CallBody(2, tt.params)).Last(t), "2", tt.want, len(before))
		})
	}
	if ran, _ := u.reached(); slices.Contains(ran, "tool delete_everything") {
		t.Errorf("the upstream ran delete_everything: %q", ran)
	}
}

// The 2026-07-28 stateless case: the Mcp-Name header matched the first
// of two names and the upstream ran the second. After the duplicate check
// the header is compared with the one name there is.
func TestOneReadingStatelessHeader(t *testing.T) {
	u := newReadingUpstream(t)
	_, base := gatewaytest.StartGateway(t, readingYAML(u, true))
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(name, params string) *gatewaytest.RawResponse {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {name},
		}}
		return c.Post(gatewaytest.CallBody(4, params))
	}
	reachedAfter(t, u, post("echo", `{"name":"echo","arguments":{"text":"hi"},`+meta+`}`).Last(t), "echo:hi")
	for _, tt := range []struct{ header, params, want string }{
		{"echo", `{"name":"echo","name":"add","arguments":{"text":"x"},` + meta + `}`, `duplicate member "name" in params`},
		{"add", `{"name":"echo","name":"add","arguments":{"text":"x"},` + meta + `}`, `duplicate member "name" in params`},
		{"echo", `{"name":"echo","NAME":"add",` + meta + `}`, `member "NAME" in params is a case variant of "name"`},
		{"echo", `{"name":"echo",` + meta + `,"_meta":{}}`, `duplicate member "_meta" in params`},
	} {
		_, before := u.reached()
		r := post(tt.header, tt.params)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", tt.params, r.Status)
		}
		refusedUnseen(t, u, r.Last(t), "4", tt.want, len(before))
	}
	// Mcp-Method is compared with the one method there is, too.
	_, before := u.reached()
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}, "Mcp-Name": {"add"},
	}}
	r := c.Post(`{"jsonrpc":"2.0","id":4,"method":"tools/list","method":"tools/call","params":{"name":"add",` + meta + `}}`)
	refusedUnseen(t, u, r.Last(t), "4", `duplicate member "method" in the message`, len(before))
	if ran, _ := u.reached(); !slices.Equal(ran, []string{"tool echo hi"}) {
		t.Errorf("the upstream ran %q, want only the allowed echo", ran)
	}
}

// The same refusal on the legacy HTTP+SSE transport (POST <path>/message)
// and on stdio: every transport parses at one place.
func TestOneReadingEveryTransport(t *testing.T) {
	attack := gatewaytest.CallBody(2, `{"name":"echo","name":"add","arguments":{"text":"x"}}`)
	variant := gatewaytest.CallBody(3, `{"name":"echo","NAME":"add","arguments":{"text":"x"}}`)
	initialize := func(version string) string {
		return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	}
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

	t.Run("legacy SSE", func(t *testing.T) {
		u := newReadingUpstream(t)
		_, base := gatewaytest.StartGateway(t, readingYAML(u, true))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		endpoint, events, body := gatewaytest.LegacyStream(t, ctx, base+"/mcp/sse")
		defer body.Close()
		msgURL := base + endpoint
		if st, _ := gatewaytest.LegacyPost(t, msgURL, initialize("2024-11-05"), nil); st != http.StatusAccepted {
			t.Fatalf("initialize: HTTP %d", st)
		}
		if m := gatewaytest.NextMessage(t, events); m.Error != nil {
			t.Fatalf("initialize: %v", m.Error)
		}
		gatewaytest.LegacyPost(t, msgURL, initialized, nil)
		gatewaytest.LegacyPost(t, msgURL, gatewaytest.CallBody(1, `{"name":"echo","arguments":{"text":"hi"}}`), nil)
		reachedAfter(t, u, gatewaytest.NextMessage(t, events), "echo:hi")
		for _, tt := range []struct{ body, id, want string }{
			{attack, "2", `duplicate member "name" in params`},
			{variant, "3", `member "NAME" in params is a case variant of "name"`},
		} {
			_, before := u.reached()
			st, m := gatewaytest.LegacyPost(t, msgURL, tt.body, nil)
			if st != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", st)
			}
			refusedUnseen(t, u, m, tt.id, tt.want, len(before))
		}
	})

	t.Run("stdio", func(t *testing.T) {
		u := newReadingUpstream(t)
		in, out, _ := gatewaytest.StdioGateway(t, readingYAML(u, false), "/mcp")
		s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
		s.Send(initialize("2025-06-18"))
		if m, _ := s.Next(); m.Error != nil {
			t.Fatalf("initialize: %v", m.Error)
		}
		s.Send(initialized, gatewaytest.CallBody(1, `{"name":"echo","arguments":{"text":"hi"}}`))
		m, _ := s.Next()
		reachedAfter(t, u, m, "echo:hi")
		for _, tt := range []struct{ body, id, want string }{
			{attack, "2", `duplicate member "name" in params`},
			{variant, "3", `member "NAME" in params is a case variant of "name"`},
		} {
			_, before := u.reached()
			s.Send(tt.body)
			m, _ := s.Next()
			refusedUnseen(t, u, m, tt.id, tt.want, len(before))
		}
	})
}

// An upstream answer that names a member twice is refused too (jsonrpc's
// Parse reads upstream messages as well): the call fails at once with an
// error naming the member, instead of being dropped and left to time out.
func TestOneReadingUpstreamAnswer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if r.Method != http.MethodPost || err != nil || m.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var res string
		switch m.Method {
		case "initialize":
			res = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"dup","version":"1"}}`
		case "tools/list":
			res = `{"tools":[{"name":"flip","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			// The audit reads the first isError, a client the last.
			res = `{"content":[{"type":"text","text":"done"}],"isError":false,"isError":true}`
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
	}))
	t.Cleanup(ts.Close)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  dup:\n    url: %s\n    timeout: 3s\n", ts.URL))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	e := gatewaytest.ErrorOf(t, c.Post(gatewaytest.CallBody(1, `{"name":"dup__flip","arguments":{}}`)))
	if e.Code != jsonrpc.CodeInternalError || !strings.Contains(e.Message, `refused the upstream's answer`) || !strings.Contains(e.Message, `duplicate member "isError" in result`) {
		t.Errorf("error %d %q, want -32603 naming the duplicate isError (not a timeout)", e.Code, e.Message)
	}
}
