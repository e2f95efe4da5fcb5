package core_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/router"
)

// TestTaskIDCaseVariantRefused: an upstream that decodes params with Go's
// encoding/json (case-insensitive member names, the last one wins) and
// hands out guessable task ids. Bob sends his own sealed id as taskId and
// Alice's upstream id as TaskId: the gateway refuses the request before
// anything reaches the upstream, on tasks/get, tasks/result and
// tasks/cancel, and Bob learns nothing of Alice's task.
func TestTaskIDCaseVariantRefused(t *testing.T) {
	up, url := newTaskUpstream(t)
	base := aliceAndBob(t, url)
	alice, _ := taskClient(t, base, "alice-secret-0123456789")
	bob, _ := taskClient(t, base, "bob-secret-0123456789")
	createTask(t, alice, map[string]any{}) // up-1 upstream
	mine := createTask(t, bob, map[string]any{"hold": true})
	before := len(up.sawTaskIDs())
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, variant := range []string{"TaskId", "taskID", "TASKID"} {
			r := bob.Post(`{"jsonrpc":"2.0","id":3,"method":"` + method + `","params":{"taskId":"` + mine + `","` + variant + `":"up-1"}}`)
			if strings.Contains(string(r.Body), "up-1") {
				t.Errorf("%s with %s: the answer names Alice's upstream task: %s", method, variant, r.Body)
			}
			m := r.Last(t)
			if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, variant) {
				t.Errorf("%s with %s: %s; want -32600 naming the case variant", method, variant, r.Body)
			}
		}
	}
	if seen := up.sawTaskIDs(); len(seen) != before {
		t.Errorf("the upstream received task requests %v from the refused ones", seen[before:])
	}
}

// TestTasksMethodsRateLimitedAndAudited: tasks/get, tasks/result and
// tasks/cancel take from the principal's and the upstream's buckets like
// the tools/call that made the task, and tasks/result and tasks/cancel are
// audited, naming the upstream the task id names.
func TestTasksMethodsRateLimitedAndAudited(t *testing.T) {
	_, url := newTaskUpstream(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	for _, bucket := range []string{"principal: {rate: 1/h, burst: 3}", "upstreams: {lab: {rate: 1/h, burst: 3}}"} {
		gw, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
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
policy:
  default: allow
  rate_limits:
    %s
audit:
  output: %s
`, url, bucket, path))
		alice, _ := taskClient(t, base, "alice-secret-0123456789")
		id := createTask(t, alice, map[string]any{"hold": true})              // 1
		resultOf(t, alice.Call("tasks/get", map[string]any{"taskId": id}))    // 2
		resultOf(t, alice.Call("tasks/cancel", map[string]any{"taskId": id})) // 3
		methods := []string{"tasks/get", "tasks/result", "tasks/cancel"}
		if strings.HasPrefix(bucket, "principal") {
			methods = append(methods, "tasks/list") // asks every upstream: the caller's bucket
		}
		for _, method := range methods {
			m := alice.Call(method, map[string]any{"taskId": id})
			if m.Error == nil || m.Error.Code != router.CodeRateLimited {
				t.Errorf("%s: %s over the limit: %+v; want %d", bucket, method, m, router.CodeRateLimited)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := gw.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		var got []string
		for _, r := range gatewaytest.AuditRecords(t, path) {
			if m, _ := r["method"].(string); strings.HasPrefix(m, "tasks/") {
				got = append(got, fmt.Sprintf("%s %v %v %v", m, r["outcome"], r["upstream"], r["name"] == id))
			}
		}
		want := []string{"tasks/cancel ok lab true", "tasks/get rate_limited lab true", "tasks/result rate_limited lab true", "tasks/cancel rate_limited lab true"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("%s: audit records of tasks methods:\n %q\nwant\n %q", bucket, got, want)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTasksResultTakesAConcurrencySlot: a tasks/result stream held open
// holds one of the upstream's max_concurrent slots; with the slot taken,
// another task request is refused, and the slot comes back when the
// caller goes away.
func TestTasksResultTakesAConcurrencySlot(t *testing.T) {
	up, url := newTaskUpstream(t)
	t.Cleanup(func() { // a held task ends, so that its tasks/result handlers do
		up.mu.Lock()
		defer up.mu.Unlock()
		for _, tk := range up.tasks {
			if tk.Status == "working" {
				up.setStatus(tk, "cancelled")
			}
		}
	})
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
policy:
  default: allow
  rate_limits:
    upstreams: {lab: {max_concurrent: 1}}
`, url))
	alice, _ := taskClient(t, base, "alice-secret-0123456789")
	id := createTask(t, alice, map[string]any{"hold": true})
	seen := len(up.sawTaskIDs())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, alice.URL, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"`+id+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", alice.Session)
	req.Header.Set("X-Api-Key", "alice-secret-0123456789")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(up.sawTaskIDs()) == seen { // the stream reached the upstream
		if time.Now().After(deadline) {
			t.Fatal("tasks/result never reached the upstream")
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	for _, method := range []string{"tasks/result", "tasks/get"} {
		// Bounded: a second tasks/result let through would wait for ever.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		r := alice.Do(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"`+method+`","params":{"taskId":"`+id+`"}}`,
			func(req *http.Request) { *req = *req.WithContext(rctx) })
		rcancel()
		m := r.Last(t)
		if m.Error == nil || m.Error.Code != router.CodeRateLimited || !strings.Contains(m.Error.Message, "concurrency") {
			t.Errorf("%s while a tasks/result holds the only slot: %+v; want refused for concurrency", method, m)
		}
	}
	// The caller gives up the stream (a disconnect alone is not a
	// cancellation in Streamable HTTP): the slot comes back.
	if r := alice.Post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); r.Status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: HTTP %d %s", r.Status, r.Body)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		m := alice.Call("tasks/get", map[string]any{"taskId": id})
		if m.Error == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot never came back: %+v", m.Error)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	// Ends the task, and with it the upstream's tasks/result handler.
	resultOf(t, alice.Call("tasks/cancel", map[string]any{"taskId": id}))
	cancel()
	<-done
}
