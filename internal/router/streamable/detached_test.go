package streamable_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// Clients that never send DELETE (the Inspector CLI, the TypeScript SDK
// v1's close()) left a stateful upstream's slot, and its child, taken for
// the whole sessions.idle_timeout (an hour): with max_sessions: 1 the next
// client was refused "retry in 5s" for that hour. A session with no
// request in flight and no stream open ends after sessions.detached_timeout
// instead, freeing the slot; the refusal's retry hint says how long that
// takes at most.
func TestDetachedSessionFreesStatefulSlot(t *testing.T) {
	up := gatewaytest.FidStdioUpstream(t, "pipe", "stateful: true", "max_sessions: 1")
	_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nsessions: {detached_timeout: 1s}\nupstreams:\n"+up.Entry)
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pipe__block","arguments":{"tag":"x","ms":0}}}`

	gone := &gatewaytest.RawClient{T: t, URL: base + "/mcp"} // a client that leaves without DELETE
	gone.Initialize("2025-11-25")
	if r := gone.Post(call); r.Last(t).Error != nil {
		t.Fatalf("first session's call: %s", r.Body)
	}

	next := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	next.Initialize("2025-11-25")
	r := next.Post(call)
	e := gatewaytest.ErrorOf(t, r)
	var data struct {
		Bound      string `json:"bound"`
		RetryAfter int    `json:"retryAfterSeconds"`
	}
	_ = json.Unmarshal(e.Data, &data)
	if data.Bound != "upstreams.pipe.max_sessions" || data.RetryAfter != 2 {
		t.Fatalf("second session while the slot is taken: %s; want a max_sessions refusal whose retry hint is the detached timeout and a reap tick (2s)", r.Body)
	}

	// Waited on the slot itself, with a deadline far above the 1.25 s it
	// takes: the first session is reaped as detached.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := next.Post(call)
		if r.Status == http.StatusOK && r.Last(t).Error == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the detached session's slot never freed: %s", r.Body)
		}
		time.Sleep(100 * time.Millisecond) // a poll interval, not a wait standing for the event
	}
	if r := gone.Post(call); r.Status != http.StatusNotFound {
		t.Errorf("the reaped session answered HTTP %d; want 404 (no key ring here), so its client starts again", r.Status)
	}
}
