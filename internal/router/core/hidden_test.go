package core_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	mcpc "github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// slyUpstream lists a few tools and prompts but runs any tool, and
// answers any prompt, by whatever name it is called: what an upstream
// with unlisted tools (or one that lies in its list) looks like.
type slyUpstream struct {
	url      string
	failList bool // tools/list and prompts/list answer an error
	mu       sync.Mutex
	ran      []string // names of the tools/call and prompts/get it saw
}

// slyTools is what slyUpstream lists, as it sends it.
const slyTools = `[{"name":"safe","inputSchema":{"type":"object"}},{"name":"secret","inputSchema":{"type":"object"}}]`

func newSlyUpstream(t *testing.T, failList bool) *slyUpstream {
	u := &slyUpstream{failList: failList}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch m.Method {
		case "initialize":
			caps := map[string]any{"tools": map[string]any{}, "prompts": map[string]any{}}
			if !u.failList {
				caps["resources"] = map[string]any{}
			}
			writeRPC(w, m.ID, map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "sly", "version": "1"}, "capabilities": caps}, nil)
		case "resources/list":
			writeRPC(w, m.ID, map[string]any{"resources": []any{map[string]any{"uri": "file:///public.md", "name": "public"}, map[string]any{"uri": "file:///secret.md", "name": "secret"}}}, nil)
		case "resources/read":
			if m.Params.URI != "file:///public.md" && m.Params.URI != "file:///secret.md" {
				u.mu.Lock()
				u.ran = append(u.ran, m.Params.URI)
				u.mu.Unlock()
				writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: mcpc.CodeResourceNotFound, Message: "no such file: " + m.Params.URI, Data: json.RawMessage(`{"uri":"` + m.Params.URI + `"}`)})
				return
			}
			writeRPC(w, m.ID, map[string]any{"contents": []any{map[string]any{"uri": m.Params.URI, "text": "x"}}}, nil)
		case "tools/list", "prompts/list":
			if u.failList {
				writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "list broken"})
				return
			}
			if m.Method == "tools/list" {
				writeRPC(w, m.ID, map[string]any{"tools": json.RawMessage(slyTools)}, nil)
				return
			}
			writeRPC(w, m.ID, map[string]any{"prompts": []any{map[string]any{"name": "greet"}, map[string]any{"name": "private"}}}, nil)
		case "tools/call", "prompts/get":
			u.mu.Lock()
			u.ran = append(u.ran, m.Params.Name)
			u.mu.Unlock()
			if m.Method == "prompts/get" {
				writeRPC(w, m.ID, map[string]any{"messages": []any{}}, nil)
				return
			}
			writeRPC(w, m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + m.Params.Name}}}, nil)
		default:
			writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + m.Method})
		}
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *slyUpstream) sawRun() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.ran)
}

// sameAnswer reports whether two refusals are the same but for the name
// each was asked about.
func sameAnswer(a *jsonrpc.Error, nameA string, b *jsonrpc.Error, nameB string) bool {
	norm := func(msg, name string) string { // each request has its own id
		return requestIDs.ReplaceAllString(strings.ReplaceAll(msg, name, "NAME"), "request id ID")
	}
	return a.Code == b.Code && norm(a.Message, nameA) == norm(b.Message, nameB)
}

var requestIDs = regexp.MustCompile(`request id [A-Za-z0-9_-]+`)

// TestPinningEnforcedRefusesUnlistedTools: in enforce mode a tool runs
// only with an approved definition, so a tool the upstream never lists —
// which has none — is refused, not forwarded, whatever its name (issue
// 27.3); it is answered exactly like a listed tool the lock does not
// approve.
func TestPinningEnforcedRefusesUnlistedTools(t *testing.T) {
	t.Parallel()
	up := newSlyUpstream(t, false)
	lock, err := policy.BuildLock(map[string]json.RawMessage{"sly": json.RawMessage(`[{"name":"safe","inputSchema":{"type":"object"}}]`)})
	if err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(t.TempDir(), "tools.lock.json")
	if err := os.WriteFile(lockFile, lock.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  sly: {url: %s}
policy:
  default: allow
  pinning: {mode: enforce, lock_file: %q}
`, up.url, lockFile))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	if got := gatewaytest.ToolNames(t, c); !slices.Equal(got, []string{"sly__safe"}) {
		t.Errorf("listed %v, want only the approved sly__safe", got)
	}
	call := func(name string) *gatewaytest.RawResponse {
		return c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`)
	}
	exfil := gatewaytest.ErrorOf(t, call("sly__exfil"))
	if exfil.Code != jsonrpc.CodeInvalidParams || !strings.Contains(exfil.Message, `unknown tool "sly__exfil"`) {
		t.Errorf("unlisted tool: %+v; want unknown tool", exfil)
	}
	if secret := gatewaytest.ErrorOf(t, call("sly__secret")); !sameAnswer(exfil, "sly__exfil", secret, "sly__secret") {
		t.Errorf("an unlisted and an unapproved tool are answered differently:\n%+v\n%+v", exfil, secret)
	}
	if m := call("sly__safe").Last(t); m.Error != nil || !strings.Contains(string(m.Result), "ran safe") {
		t.Errorf("approved tool: %s %v", m.Result, m.Error)
	}
	if ran := up.sawRun(); !slices.Equal(ran, []string{"safe"}) {
		t.Errorf("the upstream ran %v; only safe may reach it", ran)
	}
}

// TestHiddenAndUnlistedAnswerAlike: a tool or prompt the policy hides and
// one the upstream does not list get the same answer from the gateway,
// and neither reaches the upstream, so a caller cannot tell which names
// are hidden (issue 27.8a). When what the upstream lists cannot be known,
// every name gets the same refusal, saying why (fail closed).
func TestHiddenAndUnlistedAnswerAlike(t *testing.T) {
	t.Parallel()
	up := newSlyUpstream(t, false)
	broken := newSlyUpstream(t, true)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  sly: {url: %s}
  broken: {url: %s}
policy:
  default: allow
  rules:
    - deny: ["sly__secret", "sly__private", "broken__secret", "sly+file:///secret.md"]
`, up.url, broken.url))
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
		c.Initialize(version)
		ask := func(method, name string) *jsonrpc.Error {
			return gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"name":"`+name+`","arguments":{}}}`))
		}
		hidden, madeUp := ask("tools/call", "sly__secret"), ask("tools/call", "sly__madeup")
		if hidden.Code != jsonrpc.CodeInvalidParams || !sameAnswer(hidden, "sly__secret", madeUp, "sly__madeup") {
			t.Errorf("%s: hidden tool %+v, made-up tool %+v; want the same unknown-tool answer", version, hidden, madeUp)
		}
		hiddenP, madeUpP := ask("prompts/get", "sly__private"), ask("prompts/get", "sly__nope")
		if hiddenP.Code != jsonrpc.CodeInvalidParams || !sameAnswer(hiddenP, "sly__private", madeUpP, "sly__nope") {
			t.Errorf("%s: hidden prompt %+v, made-up prompt %+v; want the same unknown-prompt answer", version, hiddenP, madeUpP)
		}
		// A URI no list shows is read (templates may match it), but the
		// upstream's not-found is answered in the gateway's words.
		read := func(uri string) *jsonrpc.Error {
			return gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+`"}}`))
		}
		hiddenR, madeUpR := read("file:///secret.md"), read("file:///nope.md")
		if hiddenR.Code != mcpc.CodeResourceNotFound || !sameAnswer(hiddenR, "file:///secret.md", madeUpR, "file:///nope.md") || len(madeUpR.Data) != 0 {
			t.Errorf("%s: hidden resource %+v, made-up resource %+v; want the same resource-not-found answer", version, hiddenR, madeUpR)
		}
		// Its lists fail: nothing can be judged, every name is refused alike.
		hiddenB, visibleB := ask("tools/call", "broken__secret"), ask("tools/call", "broken__safe")
		if hiddenB.Code != mcpc.CodeUpstreamUnavailable || !strings.Contains(hiddenB.Message, "could not list") || !sameAnswer(hiddenB, "broken__secret", visibleB, "broken__safe") {
			t.Errorf("%s: with the upstream's list failing: hidden %+v, visible %+v; want the same refusal saying the list failed", version, hiddenB, visibleB)
		}
	}
	if ran := append(up.sawRun(), broken.sawRun()...); !slices.Equal(ran, []string{"file:///nope.md", "file:///nope.md"}) {
		t.Errorf("the upstreams were asked for %v; want nothing forwarded but the unlisted URI's reads", ran)
	}
}

// TestStatefulHiddenAndUnlistedPromptsAlike: on a stateful upstream each
// session's own connection says what it lists, and a hidden and an
// unlisted prompt or tool are answered alike there too.
func TestStatefulHiddenAndUnlistedPromptsAlike(t *testing.T) {
	t.Parallel()
	up := newSlyUpstream(t, false)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  sly: {url: %s, stateful: true}
policy:
  default: allow
  rules:
    - deny: ["sly__secret", "sly__private"]
`, up.url))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	ask := func(method, name string) *jsonrpc.Error {
		return gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"name":"`+name+`","arguments":{}}}`))
	}
	if hidden, madeUp := ask("prompts/get", "sly__private"), ask("prompts/get", "sly__nope"); hidden.Code != jsonrpc.CodeInvalidParams || !sameAnswer(hidden, "sly__private", madeUp, "sly__nope") {
		t.Errorf("hidden prompt %+v, made-up prompt %+v; want the same unknown-prompt answer", hidden, madeUp)
	}
	if hidden, madeUp := ask("tools/call", "sly__secret"), ask("tools/call", "sly__madeup"); hidden.Code != jsonrpc.CodeInvalidParams || !sameAnswer(hidden, "sly__secret", madeUp, "sly__madeup") {
		t.Errorf("hidden tool %+v, made-up tool %+v; want the same unknown-tool answer", hidden, madeUp)
	}
	if m := c.Post(`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"sly__greet"}}`).Last(t); m.Error != nil {
		t.Errorf("a listed prompt: %v", m.Error)
	}
	if ran := up.sawRun(); !slices.Equal(ran, []string{"greet"}) {
		t.Errorf("the upstream was asked for %v; want only greet", ran)
	}
}
