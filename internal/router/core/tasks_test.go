package core_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// taskUpstream is a 2025-11-25 server with the tasks utility, written at
// the wire level (the Go SDK has no tasks): one tool, research, that runs
// only as a task; with ambiguous:true it asks the client by elicitation on
// its tasks/result stream before it completes; with hold:true it runs until
// cancelled. It lists every task it holds (two per page), whoever asked, as
// a server shared by the gateway's callers sees one client; status changes
// go out as notifications/tasks/status on the GET stream.
type taskUpstream struct {
	mu      sync.Mutex
	tasks   map[string]*upTask
	order   []string
	seq     int
	answers map[string]chan json.RawMessage // elicitation id -> the client's answer
	events  chan []byte                     // the GET stream's
	seen    []string                        // every taskId params the upstream received
}

type upTask struct {
	ID, Status string
	Created    time.Time
	ambiguous  bool
	hold       bool
	asked      bool // the elicitation was sent on a tasks/result stream
	answer     chan json.RawMessage
	result     json.RawMessage
	changed    chan struct{} // closed and replaced at each change
}

func newTaskUpstream(t *testing.T) (*taskUpstream, string) {
	u := &taskUpstream{tasks: map[string]*upTask{}, answers: map[string]chan json.RawMessage{}, events: make(chan []byte, 64)}
	ts := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(ts.Close)
	return u, ts.URL + "/mcp"
}

func (u *taskUpstream) taskJSON(tk *upTask) map[string]any {
	return map[string]any{"taskId": tk.ID, "status": tk.Status, "createdAt": tk.Created.Format(time.RFC3339Nano),
		"lastUpdatedAt": time.Now().UTC().Format(time.RFC3339Nano), "ttl": 60000, "pollInterval": 50}
}

// setStatus changes a task's status (u.mu held) and announces it.
func (u *taskUpstream) setStatus(tk *upTask, status string) {
	tk.Status = status
	close(tk.changed)
	tk.changed = make(chan struct{})
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": u.taskJSON(tk)})
	select {
	case u.events <- b:
	default:
	}
}

func (u *taskUpstream) run(tk *upTask) {
	time.Sleep(50 * time.Millisecond) // the behaviour under test: a task that takes a while
	text := "done"
	if tk.ambiguous {
		u.mu.Lock()
		u.setStatus(tk, "input_required")
		u.mu.Unlock()
		ans := <-tk.answer
		var e struct {
			Content struct {
				Interpretation string `json:"interpretation"`
			} `json:"content"`
		}
		_ = json.Unmarshal(ans, &e)
		text = "done: " + e.Content.Interpretation
		u.mu.Lock()
		if tk.Status == "input_required" {
			u.setStatus(tk, "working")
		}
		u.mu.Unlock()
	}
	if tk.hold {
		return // until cancelled
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if tk.Status == "cancelled" {
		return
	}
	tk.result, _ = json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	u.setStatus(tk, "completed")
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *jsonrpc.Error) {
	m := map[string]any{"jsonrpc": "2.0", "id": id}
	if e != nil {
		m["error"] = e
	} else {
		m["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (u *taskUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case b := <-u.events:
				fmt.Fprintf(w, "data: %s\n\n", b)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var p struct {
		TaskID    string          `json:"taskId"`
		Name      string          `json:"name"`
		Cursor    string          `json:"cursor"`
		Task      json.RawMessage `json:"task"`
		Arguments struct {
			Ambiguous bool `json:"ambiguous"`
			Hold      bool `json:"hold"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if m.Method == "" { // the client's answer to an elicitation
		u.mu.Lock()
		ch := u.answers[string(m.ID)]
		u.mu.Unlock()
		if ch != nil {
			ch <- m.Result
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	u.mu.Lock()
	if p.TaskID != "" {
		u.seen = append(u.seen, p.TaskID)
	}
	tk := u.tasks[p.TaskID]
	u.mu.Unlock()
	notFound := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found: " + p.TaskID}
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "upstream-session")
		writeRPC(w, m.ID, map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "tasks-up", "version": "1"},
			"capabilities": map[string]any{"tools": map[string]any{}, "tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}}}, nil)
	case "tools/list":
		writeRPC(w, m.ID, map[string]any{"tools": []any{map[string]any{"name": "research", "inputSchema": map[string]any{"type": "object"}, "execution": map[string]any{"taskSupport": "required"}}}}, nil)
	case "tools/call":
		if p.Task == nil {
			writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "research runs only as a task"})
			return
		}
		u.mu.Lock()
		u.seq++
		tk := &upTask{ID: "up-" + strconv.Itoa(u.seq), Status: "working", Created: time.Now().UTC(), ambiguous: p.Arguments.Ambiguous, hold: p.Arguments.Hold,
			answer: make(chan json.RawMessage, 1), changed: make(chan struct{})}
		u.tasks[tk.ID] = tk
		u.order = append(u.order, tk.ID)
		created := u.taskJSON(tk)
		u.mu.Unlock()
		go u.run(tk)
		writeRPC(w, m.ID, map[string]any{"task": created}, nil)
	case "tasks/get":
		if tk == nil {
			writeRPC(w, m.ID, nil, notFound)
			return
		}
		u.mu.Lock()
		res := u.taskJSON(tk)
		u.mu.Unlock()
		writeRPC(w, m.ID, res, nil)
	case "tasks/cancel":
		u.mu.Lock()
		defer u.mu.Unlock()
		switch {
		case tk == nil:
			writeRPC(w, m.ID, nil, notFound)
		case tk.Status == "completed" || tk.Status == "cancelled" || tk.Status == "failed":
			writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Cannot cancel task %s: already in terminal status %q", tk.ID, tk.Status)})
		default:
			u.setStatus(tk, "cancelled")
			writeRPC(w, m.ID, u.taskJSON(tk), nil)
		}
	case "tasks/list":
		u.mu.Lock()
		start, _ := strconv.Atoi(p.Cursor)
		end := min(start+2, len(u.order))
		var page []any
		for _, id := range u.order[start:end] {
			page = append(page, u.taskJSON(u.tasks[id]))
		}
		u.mu.Unlock()
		res := map[string]any{"tasks": page}
		if end < len(u.order) {
			res["nextCursor"] = strconv.Itoa(end)
		}
		writeRPC(w, m.ID, res, nil)
	case "tasks/result":
		if tk == nil {
			writeRPC(w, m.ID, nil, notFound)
			return
		}
		u.taskResult(w, m.ID, tk)
	default:
		writeRPC(w, m.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + m.Method})
	}
}

// taskResult blocks until the task ends, asking on this stream for the
// input it needs, then answers with its result (related-task in _meta).
func (u *taskUpstream) taskResult(w http.ResponseWriter, id json.RawMessage, tk *upTask) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	for {
		u.mu.Lock()
		status, changed := tk.Status, tk.changed
		ask := status == "input_required" && !tk.asked
		if ask {
			tk.asked = true
		}
		u.mu.Unlock()
		switch {
		case ask:
			eid := json.RawMessage(`"elicit-` + tk.ID + `"`)
			ch := make(chan json.RawMessage, 1)
			u.mu.Lock()
			u.answers[string(eid)] = ch
			u.mu.Unlock()
			send(map[string]any{"jsonrpc": "2.0", "id": eid, "method": "elicitation/create", "params": map[string]any{
				"message": "Which interpretation?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"interpretation": map[string]any{"type": "string"}}},
				"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": tk.ID}},
			}})
			go func() { tk.answer <- <-ch }()
			continue
		case status == "completed":
			var res map[string]any
			u.mu.Lock()
			_ = json.Unmarshal(tk.result, &res)
			u.mu.Unlock()
			res["_meta"] = map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": tk.ID}}
			send(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
			return
		case status == "cancelled":
			send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": "task cancelled"}})
			return
		}
		<-changed
	}
}

func (u *taskUpstream) sawTaskIDs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// taskClient is a raw legacy session of one principal (key: its API key,
// "" when authentication is off); it returns the initialize result too.
func taskClient(t *testing.T, base, key string) (*gatewaytest.RawClient, *jsonrpc.Message) {
	t.Helper()
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{}}
	if key != "" {
		c.Header.Set("X-Api-Key", key)
	}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"tasks":{"list":{},"cancel":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d %s", r.Status, r.Body)
	}
	c.Session = r.Header.Get("Mcp-Session-Id")
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c, r.Last(t)
}

func resultOf(t *testing.T, m *jsonrpc.Message) map[string]any {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("want a result, got error %d %s", m.Error.Code, m.Error.Message)
	}
	var v map[string]any
	if err := json.Unmarshal(m.Result, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// createTask calls research as a task and returns the task id handed out.
func createTask(t *testing.T, c *gatewaytest.RawClient, args map[string]any) string {
	t.Helper()
	res := resultOf(t, c.Call("tools/call", map[string]any{"name": "research", "arguments": args, "task": map[string]any{"ttl": 60000}}))
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if !strings.HasPrefix(id, "mcpgw-task1.") {
		t.Fatalf("CreateTaskResult %v: want a task id the gateway handed out", res)
	}
	return id
}

func listed(t *testing.T, c *gatewaytest.RawClient) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; pages < 20; pages++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res := resultOf(t, c.Call("tasks/list", params))
		tasks, _ := res["tasks"].([]any)
		for _, tk := range tasks {
			ids = append(ids, tk.(map[string]any)["taskId"].(string))
		}
		if cursor, _ = res["nextCursor"].(string); cursor == "" {
			return ids
		}
	}
	t.Fatal("tasks/list did not end")
	return nil
}

// readStream reads a session's GET stream into a channel of messages.
func readStream(t *testing.T, c *gatewaytest.RawClient) <-chan *jsonrpc.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	for k, v := range c.Header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	out := make(chan *jsonrpc.Message, 64)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if m, err := jsonrpc.Parse([]byte(data)); err == nil {
					out <- m
				}
			}
		}
	}()
	return out
}

// streamResult sends tasks/result and answers, on the way, the
// elicitation the task asks for with interpretation; it returns the
// requests seen and the final answer.
func streamResult(t *testing.T, c *gatewaytest.RawClient, taskID, interpretation string) ([]*jsonrpc.Message, *jsonrpc.Message) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.URL, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"`+taskID+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	for k, v := range c.Header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var asked []*jsonrpc.Message
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(data))
		if err != nil {
			t.Fatalf("stream event %q: %v", data, err)
		}
		switch m.Kind() {
		case jsonrpc.KindRequest:
			asked = append(asked, m)
			ans := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"interpretation":"` + interpretation + `"}}}`
			if r := c.Post(ans); r.Status != http.StatusAccepted {
				t.Fatalf("answer: HTTP %d %s", r.Status, r.Body)
			}
		case jsonrpc.KindResponse:
			return asked, m
		}
	}
	t.Fatalf("tasks/result stream ended without an answer (%v)", sc.Err())
	return nil, nil
}

// aliceAndBob starts a gateway whose one unprefixed route serves the task
// upstream at url to two principals, alice and bob (API keys
// alice-secret-0123456789 and bob-secret-0123456789), and returns its base
// URL.
func aliceAndBob(t *testing.T, url string) string {
	t.Helper()
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  lab: {url: %s}
routes:
  - path: /mcp
    upstreams: [lab]
    prefix: false
auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
policy:
  default: allow
`, url))
	return base
}

// TestTasksThroughGateway: a 2025-11-25 task's whole life through the
// gateway — created, polled, its result fetched (with the elicitation it
// asks for streamed on tasks/result), listed, cancelled — under an id the
// gateway hands out, while the upstream sees only its own ids; status
// notifications reach only the creator's session; a second principal
// cannot see, fetch or cancel the first one's tasks.
func TestTasksThroughGateway(t *testing.T) {
	up, url := newTaskUpstream(t)
	base := aliceAndBob(t, url)
	alice, init := taskClient(t, base, "alice-secret-0123456789")
	bob, _ := taskClient(t, base, "bob-secret-0123456789")

	// The route offers what the upstream offers.
	caps, _ := resultOf(t, init)["capabilities"].(map[string]any)
	if got := gatewaytest.MustJSON(t, caps["tasks"]); got != `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}` {
		t.Errorf("tasks capability %s; want list, cancel and requests.tools.call", got)
	}
	aliceEvents, bobEvents := readStream(t, alice), readStream(t, bob)

	// Create and fetch, with the elicitation on the result stream.
	plain := createTask(t, alice, map[string]any{})
	got := resultOf(t, alice.Call("tasks/get", map[string]any{"taskId": plain}))
	if got["taskId"] != plain {
		t.Errorf("tasks/get names the task %v, want the id handed out", got["taskId"])
	}
	_, final := streamResult(t, alice, plain, "")
	res := resultOf(t, final)
	if meta, _ := res["_meta"].(map[string]any); gatewaytest.MustJSON(t, meta["io.modelcontextprotocol/related-task"]) != gatewaytest.MustJSON(t, map[string]any{"taskId": plain}) {
		t.Errorf("tasks/result _meta %v: related-task must name the id handed out", res["_meta"])
	}
	ambiguous := createTask(t, alice, map[string]any{"ambiguous": true})
	deadline := time.Now().Add(5 * time.Second)
	for resultOf(t, alice.Call("tasks/get", map[string]any{"taskId": ambiguous}))["status"] != "input_required" {
		if time.Now().After(deadline) {
			t.Fatal("the task never asked for input")
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
	asked, final := streamResult(t, alice, ambiguous, "historical")
	if len(asked) != 1 || asked[0].Method != "elicitation/create" || !strings.Contains(string(asked[0].Params), `"taskId":"`+ambiguous+`"`) {
		t.Fatalf("requests on the tasks/result stream: %v; want one elicitation/create naming the task by its id here", asked)
	}
	if text := gatewaytest.MustJSON(t, resultOf(t, final)["content"]); !strings.Contains(text, "done: historical") {
		t.Errorf("result %s does not carry the client's answer", text)
	}

	// Cancel: the answer names the task as the caller does, also in errors.
	held := createTask(t, alice, map[string]any{"hold": true})
	if c := resultOf(t, alice.Call("tasks/cancel", map[string]any{"taskId": held})); c["status"] != "cancelled" || c["taskId"] != held {
		t.Errorf("tasks/cancel = %v", c)
	}
	again := alice.Call("tasks/cancel", map[string]any{"taskId": held})
	if again.Error == nil || again.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(again.Error.Message, held) || strings.Contains(again.Error.Message, "up-") {
		t.Errorf("cancelling a cancelled task: %+v; want the upstream's -32602 naming the id handed out", again.Error)
	}

	// Bob: his own task; none of Alice's, whatever he tries.
	bobs := createTask(t, bob, map[string]any{})
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		m := bob.Call(method, map[string]any{"taskId": plain})
		if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "task not found") {
			t.Errorf("bob's %s of alice's task: %+v; want the unknown-task error", method, m)
		}
	}
	unknown := bob.Call("tasks/get", map[string]any{"taskId": "mcpgw-task1.bm90LWEtdGFzaw"})
	if forged := bob.Call("tasks/get", map[string]any{"taskId": plain}); unknown.Error == nil || forged.Error == nil ||
		strings.ReplaceAll(unknown.Error.Message, "mcpgw-task1.bm90LWEtdGFzaw", "ID") != strings.ReplaceAll(forged.Error.Message, plain, "ID") {
		t.Errorf("another principal's task must look unknown: %+v vs %+v", forged.Error, unknown.Error)
	}
	if ids := listed(t, bob); !slices.Equal(ids, []string{bobs}) {
		t.Errorf("bob lists %v; want only his task %s", ids, bobs)
	}
	if ids := listed(t, alice); !slices.Equal(ids, []string{plain, ambiguous, held}) {
		t.Errorf("alice lists %v; want her three tasks in order (the upstream pages two at a time, bob's among them)", ids)
	}

	// The upstream saw only its own ids, never one the gateway handed out.
	for _, id := range up.sawTaskIDs() {
		if !strings.HasPrefix(id, "up-") {
			t.Errorf("the upstream received task id %q", id)
		}
	}
	// Status notifications: alice's under her ids; bob sees his only.
	mine := map[string]bool{plain: true, ambiguous: true, held: true}
	// Until alice's first, then a short window for strays: a negative
	// check, which a window cut short by load only makes less searching.
	timeout := time.After(testwait.Long)
	seenAlice := 0
collect:
	for {
		select {
		case m := <-aliceEvents:
			if m.Method == "notifications/tasks/status" {
				var p struct{ TaskID string }
				_ = json.Unmarshal(m.Params, &p)
				if !mine[p.TaskID] {
					t.Errorf("alice got a status notification for %q", p.TaskID)
				}
				seenAlice++
				if seenAlice == 1 {
					timeout = time.After(200 * time.Millisecond) // the window for strays
				}
			}
		case m := <-bobEvents:
			if m.Method == "notifications/tasks/status" && !strings.Contains(string(m.Params), bobs) {
				t.Errorf("bob got another's status notification: %s", m.Params)
			}
		case <-timeout:
			break collect
		}
	}
	if seenAlice == 0 {
		t.Error("alice's session got no status notification")
	}
}

// TestTasksIndexFull: with sessions.max_tasks reached, a task-augmented
// call is refused before it reaches the upstream, with the key to raise.
func TestTasksIndexFull(t *testing.T) {
	up, url := newTaskUpstream(t)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  lab: {url: %s}
routes:
  - {path: /mcp, upstreams: [lab], prefix: false}
sessions: {max_tasks: 1}
`, url))
	c, _ := taskClient(t, base, "")
	createTask(t, c, map[string]any{})
	m := c.Call("tools/call", map[string]any{"name": "research", "arguments": map[string]any{}, "task": map[string]any{}})
	if m.Error == nil || !strings.Contains(m.Error.Message, "sessions.max_tasks") {
		t.Fatalf("second task: %+v; want a refusal naming sessions.max_tasks", m)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.seq != 1 {
		t.Errorf("the upstream created %d tasks; the refused call must not reach it", up.seq)
	}
}

// TestAnonymousTasksStayInTheirSession: with authentication off every
// client is the same anonymous principal, so a task is bound to the
// session that created it: another session neither lists it nor uses it
// (issue 27.8b).
func TestAnonymousTasksStayInTheirSession(t *testing.T) {
	_, url := newTaskUpstream(t)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  lab: {url: %s}
routes:
  - {path: /mcp, upstreams: [lab], prefix: false}
`, url))
	one, _ := taskClient(t, base, "")
	two, _ := taskClient(t, base, "")
	id := createTask(t, one, map[string]any{"hold": true})
	if got := listed(t, one); !slices.Equal(got, []string{id}) {
		t.Errorf("the creating session lists %v, want [%s]", got, id)
	}
	if got := listed(t, two); len(got) != 0 {
		t.Errorf("another anonymous session lists %v, want nothing", got)
	}
	if m := two.Call("tasks/get", map[string]any{"taskId": id}); m.Error == nil || !strings.Contains(m.Error.Message, "task not found") {
		t.Errorf("tasks/get from another anonymous session: %+v; want task not found", m)
	}
	if m := resultOf(t, one.Call("tasks/get", map[string]any{"taskId": id})); m["taskId"] != id {
		t.Errorf("tasks/get from the creating session: %v", m)
	}
}

// TestTasksListMergedAcrossUpstreams: on a prefixed route with two task
// upstreams, tasks/list merges both (each paged by its upstream), and each
// task id reaches the upstream that made it.
func TestTasksListMergedAcrossUpstreams(t *testing.T) {
	upA, urlA := newTaskUpstream(t)
	upB, urlB := newTaskUpstream(t)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  a: {url: %s}
  b: {url: %s}
routes:
  - path: /mcp
`, urlA, urlB))
	c, _ := taskClient(t, base, "")
	var want []string
	for _, up := range []string{"a", "a", "a", "b", "b"} {
		res := resultOf(t, c.Call("tools/call", map[string]any{"name": up + "__research", "arguments": map[string]any{"hold": true}, "task": map[string]any{}}))
		want = append(want, res["task"].(map[string]any)["taskId"].(string))
	}
	if got := listed(t, c); !slices.Equal(got, want) {
		t.Errorf("tasks/list = %v; want a's three then b's two: %v", got, want)
	}
	if m := resultOf(t, c.Call("tasks/cancel", map[string]any{"taskId": want[4]})); m["status"] != "cancelled" {
		t.Errorf("cancel of b's task: %v", m)
	}
	if a, b := upA.sawTaskIDs(), upB.sawTaskIDs(); len(a) != 0 || !slices.Equal(b, []string{"up-2"}) {
		t.Errorf("task requests reached a %v, b %v; want only b's up-2", a, b)
	}
}

// TestTaskIDsServeAcrossReplicas: with a shared sessions.key_file, a task
// id one replica handed out is served by another (it is a sealed token,
// not a lookup), still only to its principal; without the shared ring it
// is an unknown task there.
func TestTaskIDsServeAcrossReplicas(t *testing.T) {
	_, url := newTaskUpstream(t)
	keys := filepath.Join(t.TempDir(), "session-keys")
	if err := os.WriteFile(keys, []byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := func(sessions string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  lab: {url: %s}
routes:
  - {path: /mcp, upstreams: [lab], prefix: false}
auth:
  api_keys:
    - {name: a, key: alice-secret-0123456789, principal: alice}
    - {name: b, key: bob-secret-0123456789, principal: bob}
policy: {default: allow}
%s`, url, sessions)
	}
	shared := fmt.Sprintf("sessions: {key_file: %q}\n", keys)
	_, replicaA := gatewaytest.StartGateway(t, cfg(shared))
	_, replicaB := gatewaytest.StartGateway(t, cfg(shared))
	_, loner := gatewaytest.StartGateway(t, cfg(""))

	onA, _ := taskClient(t, replicaA, "alice-secret-0123456789")
	id := createTask(t, onA, map[string]any{})
	onB, _ := taskClient(t, replicaB, "alice-secret-0123456789")
	if got := resultOf(t, onB.Call("tasks/get", map[string]any{"taskId": id})); got["taskId"] != id {
		t.Errorf("replica B's tasks/get of A's task: %v", got)
	}
	for name, c := range map[string]*gatewaytest.RawClient{
		"bob on replica B":                    first(taskClient(t, replicaB, "bob-secret-0123456789")),
		"alice on a replica without the ring": first(taskClient(t, loner, "alice-secret-0123456789")),
	} {
		if m := c.Call("tasks/get", map[string]any{"taskId": id}); m.Error == nil || !strings.Contains(m.Error.Message, "task not found") {
			t.Errorf("%s: %+v; want the unknown-task error", name, m)
		}
	}
}

func first[A, B any](a A, _ B) A { return a }
