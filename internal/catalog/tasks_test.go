package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

func key(b byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return k
}

// TestTaskTokens: a token opens to what was sealed, the same claims always
// give the same token (clients match tasks by id), other claims another
// one, and a token opens only with a ring holding its key.
func TestTaskTokens(t *testing.T) {
	old, cur := key(1), key(2)
	ring := newTasks([][]byte{old}, 0, nil)
	alice := TaskOwner{Route: "/mcp", Principal: "apikey\x00alice"}
	c := claims("up", "upstream-task-1", formUtility, alice, false)
	tok := ring.seal(c)
	if !strings.HasPrefix(tok, taskTokenPrefix) || strings.Contains(tok, "upstream-task-1") {
		t.Fatalf("token %q: want an opaque %s… token", tok, taskTokenPrefix)
	}
	if again := ring.seal(c); again != tok {
		t.Errorf("sealing the same claims twice gave %q and %q", tok, again)
	}
	if got, ok := ring.open(tok); !ok || got != c {
		t.Errorf("open = %+v, %v; want %+v", got, ok, c)
	}
	other := claims("up", "upstream-task-2", formUtility, alice, false)
	if ring.seal(other) == tok {
		t.Error("two tasks got one token")
	}
	rotated := newTasks([][]byte{cur, old}, 0, nil)
	if got, ok := rotated.open(tok); !ok || got != c {
		t.Errorf("a ring that still holds the old key must open its tokens: %+v, %v", got, ok)
	}
	// Rekeyed in place (a reload): the old token still opens, new ones are
	// sealed with the new first key, which a ring of it alone opens.
	live := newTasks([][]byte{old}, 0, nil)
	live.setKeys([][]byte{cur, old})
	if got, ok := live.open(tok); !ok || got != c {
		t.Errorf("after setKeys the old token: %+v, %v", got, ok)
	}
	if got, ok := newTasks([][]byte{cur}, 0, nil).open(live.seal(other)); !ok || got != other {
		t.Errorf("a token sealed after setKeys does not open with the new key alone: %+v, %v", got, ok)
	}
	for name, bad := range map[string]string{
		"foreign ring":   newTasks([][]byte{cur}, 0, nil).seal(c),
		"altered":        tok[:len(tok)-2] + "AA",
		"truncated":      tok[:len(taskTokenPrefix)+4],
		"no prefix":      strings.TrimPrefix(tok, taskTokenPrefix),
		"upstream id":    "upstream-task-1",
		"not base64":     taskTokenPrefix + "!!!",
		"empty":          "",
		"random process": newTasks(nil, 0, nil).seal(c),
	} {
		if _, ok := ring.open(bad); ok {
			t.Errorf("%s: token %q opened", name, bad)
		}
	}
}

// TestTaskOwnership: only the principal a task was handed to, on its
// route (and for a stateful upstream, in its session), owns it.
func TestTaskOwnership(t *testing.T) {
	alice := TaskOwner{Route: "/mcp", Principal: "apikey\x00alice", Session: "s1"}
	for _, tc := range []struct {
		name     string
		stateful bool
		caller   TaskOwner
		want     bool
	}{
		{"same principal, same route", false, alice, true},
		{"same principal, another session", false, TaskOwner{Route: "/mcp", Principal: alice.Principal, Session: "s2"}, true},
		{"same principal, 2026 request", false, TaskOwner{Route: "/mcp", Principal: alice.Principal}, true},
		{"another principal", false, TaskOwner{Route: "/mcp", Principal: "apikey\x00bob", Session: "s1"}, false},
		{"anonymous", false, TaskOwner{Route: "/mcp", Session: "s1"}, false},
		{"another route", false, TaskOwner{Route: "/other", Principal: alice.Principal, Session: "s1"}, false},
		{"stateful, same session", true, alice, true},
		{"stateful, another session", true, TaskOwner{Route: "/mcp", Principal: alice.Principal, Session: "s2"}, false},
	} {
		c := claims("up", "t1", formUtility, alice, tc.stateful)
		if got := c.ownedBy(tc.caller); got != tc.want {
			t.Errorf("%s: ownedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
	anon := claims("up", "t1", formExtension, TaskOwner{Route: "/mcp"}, false)
	if !anon.ownedBy(TaskOwner{Route: "/mcp"}) || anon.ownedBy(alice) {
		t.Error("with authentication off, a 2026 caller's task belongs to the (one) anonymous principal only")
	}
	// With authentication off every caller is the anonymous principal: a
	// session's task is that session's alone (issue 27.8b).
	anonSession := claims("up", "t1", formUtility, TaskOwner{Route: "/mcp", Session: "s1"}, false)
	if !anonSession.ownedBy(TaskOwner{Route: "/mcp", Session: "s1"}) {
		t.Error("an anonymous session does not own its own task")
	}
	for _, other := range []TaskOwner{{Route: "/mcp", Session: "s2"}, {Route: "/mcp"}} {
		if anonSession.ownedBy(other) {
			t.Errorf("an anonymous session's task is owned by %+v", other)
		}
	}
}

// TestTaskIndexBounded: the index holds at most max tasks (reservations
// included), refuses beyond, and frees the slots of expired tasks.
func TestTaskIndexBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	ix := newTasks(nil, 2, nil)
	ix.now = func() time.Time { return now }
	owner := TaskOwner{Route: "/mcp", Session: "s"}
	first, second := ix.reserve(), ix.reserve()
	if !first || !second {
		t.Fatal("two slots of two refused")
	}
	if ix.reserve() {
		t.Fatal("a third slot was granted with max 2")
	}
	ix.record(taskKey{"up", "a"}, &taskEntry{owner: owner, expires: now.Add(time.Minute)})
	ix.release()
	ix.release() // the second call created no task
	if !ix.reserve() {
		t.Fatal("a released slot was not given again")
	}
	if ix.reserve() {
		t.Fatal("a slot beyond max (one task + one reservation) was granted")
	}
	if ix.entry(taskKey{"up", "a"}) == nil {
		t.Fatal("a live task is missing from the index")
	}
	now = now.Add(2 * time.Minute)
	if ix.entry(taskKey{"up", "a"}) != nil {
		t.Error("an expired task is still listed")
	}
	if !ix.reserve() {
		t.Error("an expired task's slot was not freed")
	}
}

func TestTaskTTL(t *testing.T) {
	for _, tc := range []struct {
		task string
		want time.Duration
	}{
		{`{"taskId":"a","ttl":60000}`, time.Minute},
		{`{"taskId":"a","ttl":null}`, maxTaskTTL},
		{`{"taskId":"a"}`, defaultTaskTTL},
		{`{"taskId":"a","ttl":999999999999}`, maxTaskTTL},
		{`{"taskId":"a","ttl":"soon"}`, maxTaskTTL},
	} {
		if got := ttlOf(json.RawMessage(tc.task)); got != tc.want {
			t.Errorf("ttlOf(%s) = %s, want %s", tc.task, got, tc.want)
		}
	}
}

// TestTaskTranslation: what an upstream sends during a task's calls names
// the task by the caller's token; a client's answer gets the upstream's id
// back; every other byte is left alone.
func TestTaskTranslation(t *testing.T) {
	tc := &taskCall{t: newTasks(nil, 0, nil), upstream: "up", owner: TaskOwner{Route: "/mcp", Principal: "p"}, form: formUtility}
	tok := tc.token("u-1")
	for _, c := range []struct{ method, in, want string }{
		{mcp.NotificationTasksStatus, `{"taskId":"u-1","status":"working", "x":[1, 2]}`, `{"taskId":"` + tok + `","status":"working", "x":[1, 2]}`},
		{mcp.MethodElicitationCreate, `{"message":"m","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"u-1"},"k":1}}`,
			`{"message":"m","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + tok + `"},"k":1}}`},
		{mcp.NotificationProgress, `{"progressToken":1,"progress":2}`, `{"progressToken":1,"progress":2}`},
	} {
		if got := string(tc.outgoing(c.method, json.RawMessage(c.in))); got != c.want {
			t.Errorf("outgoing(%s, %s) = %s, want %s", c.method, c.in, got, c.want)
		}
	}
	answer := `{"action":"accept","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + tok + `"}}}`
	if got, want := string(tc.incoming(json.RawMessage(answer))), `{"action":"accept","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"u-1"}}}`; got != want {
		t.Errorf("incoming = %s, want %s", got, want)
	}
	// Another caller's token in an answer is not translated.
	foreign := &taskCall{t: tc.t, upstream: "up", owner: TaskOwner{Route: "/mcp", Principal: "q"}, form: formUtility}
	if got := string(foreign.incoming(json.RawMessage(answer))); got != answer {
		t.Errorf("another caller's token was translated: %s", got)
	}
}

// TestForwardTaskRefusals: a task request that is not the caller's, or not
// of its revision, is answered by the gateway and reaches no upstream
// (the view has no running upstream: a call would fail differently).
func TestForwardTaskRefusals(t *testing.T) {
	cfg := &config.Config{Upstreams: map[string]*config.Upstream{"up": {URL: "http://127.0.0.1:1/mcp"}}}
	h := host.New(cfg, host.Options{})
	defer h.Close()
	v := NewView(h, nil, false)
	alice := TaskOwner{Route: "/mcp", Principal: "apikey\x00alice", Session: "s1"}
	bob := TaskOwner{Route: "/mcp", Principal: "apikey\x00bob", Session: "s2"}
	legacyTok := tasksOf(h).seal(claims("up", "u-1", formUtility, alice, false))
	modernTok := tasksOf(h).seal(claims("up", "u-2", formExtension, alice, false))
	withExt := json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	for _, tc := range []struct {
		name   string
		owner  TaskOwner
		caps   json.RawMessage
		modern bool
		method string
		token  string
		code   int
		says   string
	}{
		{"another principal's task", bob, nil, false, mcp.MethodTasksGet, legacyTok, jsonrpc.CodeInvalidParams, "task not found"},
		{"another principal's result", bob, nil, false, mcp.MethodTasksResult, legacyTok, jsonrpc.CodeInvalidParams, "task not found"},
		{"another principal's cancel", bob, nil, false, mcp.MethodTasksCancel, legacyTok, jsonrpc.CodeInvalidParams, "task not found"},
		{"another principal, 2026", bob, withExt, true, mcp.MethodTasksGet, modernTok, jsonrpc.CodeInvalidParams, "task not found"},
		{"unknown id", alice, nil, false, mcp.MethodTasksGet, "u-1", jsonrpc.CodeInvalidParams, "task not found"},
		{"another route", TaskOwner{Route: "/x", Principal: alice.Principal}, nil, false, mcp.MethodTasksGet, legacyTok, jsonrpc.CodeInvalidParams, "task not found"},
		{"2026 task from a legacy client", alice, nil, false, mcp.MethodTasksGet, modernTok, jsonrpc.CodeInvalidParams, "another protocol revision"},
		{"2026 without the extension", alice, json.RawMessage(`{}`), true, mcp.MethodTasksGet, modernTok, mcp.CodeMissingRequiredClientCapability, mcp.ExtensionTasks},
		{"tasks/result in 2026", alice, withExt, true, mcp.MethodTasksResult, modernTok, jsonrpc.CodeMethodNotFound, "inlines the result"},
		{"tasks/update before 2026", alice, nil, false, mcp.MethodTasksUpdate, legacyTok, jsonrpc.CodeMethodNotFound, "tasks/result stream"},
	} {
		ctx := host.WithCaller(context.Background(), &host.Caller{Capabilities: tc.caps, Route: tc.owner.Route, Principal: tc.owner.Principal, Session: tc.owner.Session})
		params, _ := json.Marshal(map[string]string{"taskId": tc.token})
		resp, err := v.Forward(ctx, tc.method, params, client.CallOptions{PassInputRequired: tc.modern})
		if resp != nil || err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.says) {
			t.Errorf("%s: %v, %+v; want error %d mentioning %q", tc.name, resp, err, tc.code, tc.says)
		}
	}
}

// TestForwardTaskMapsBackOnlyTheTaskAskedFor: an upstream that answers
// about another task than the one the caller's token names (as one that
// read a TaskId case variant would) gets its answer dropped: the caller
// never sees another task, nor its raw upstream id.
func TestForwardTaskMapsBackOnlyTheTaskAskedFor(t *testing.T) {
	up := &fakeUpstream{tools: items("name", "t", 1)}
	h := fakeHost(t, map[string]*fakeUpstream{"up": up})
	v := NewView(h, []string{"up"}, false)
	bob := TaskOwner{Route: "/mcp", Principal: "apikey\x00bob", Session: "s2"}
	tok := tasksOf(h).seal(claims("up", "bob-1", formUtility, bob, false))
	ctx := host.WithCaller(context.Background(), &host.Caller{Route: bob.Route, Principal: bob.Principal, Session: bob.Session})
	for _, tc := range []struct{ name, method, answer string }{
		{"another task's state", mcp.MethodTasksGet, `{"taskId":"alice-1","status":"working"}`},
		{"another task's cancel", mcp.MethodTasksCancel, `{"taskId":"alice-1","status":"cancelled"}`},
		{"another task's result", mcp.MethodTasksResult, `{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"alice-1"}}}`},
	} {
		up.handle = func(string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(tc.answer), nil
		}
		params, _ := json.Marshal(map[string]string{"taskId": tok})
		resp, err := v.Forward(ctx, tc.method, params, client.CallOptions{})
		if err == nil || resp != nil {
			t.Errorf("%s: %v, %v; want the answer refused", tc.name, resp, err)
			continue
		}
		if strings.Contains(err.Message, "alice-1") {
			t.Errorf("%s: error %q names the other task", tc.name, err.Message)
		}
	}
	// The task asked for is mapped back as before.
	up.handle = func(string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return json.RawMessage(`{"taskId":"bob-1","status":"working"}`), nil
	}
	params, _ := json.Marshal(map[string]string{"taskId": tok})
	resp, err := v.Forward(ctx, mcp.MethodTasksGet, params, client.CallOptions{})
	if err != nil || resp == nil || string(resp.Result) != `{"taskId":"`+tok+`","status":"working"}` {
		t.Fatalf("own task: %v, %v", resp, err)
	}
}
