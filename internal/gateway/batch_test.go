package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// A 2025-03-26 session may POST a JSON-RPC batch, as that revision's
// transport requires: each message handled as if sent alone (its own
// parse and duplicate-member check), the requests' answers returned
// together in a JSON array, 202 for notifications and responses only; a
// batch is bounded by sessions.max_requests_per_session, and refused on
// sessions of other revisions.
func TestBatch20250326(t *testing.T) {
	alpha := httpUpstream(t, "alpha", 0)
	_, base := startGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
sessions:
  max_requests_per_session: 6
`, alpha))
	c := &rawClient{t: t, url: base + "/mcp"}
	c.initialize("2025-03-26")

	r := c.post(`[
		{"jsonrpc":"2.0","id":1,"method":"ping"},
		{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
		{"jsonrpc":"2.0","id":"two","method":"tools/list"},
		{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"},
		{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}},
		{"jsonrpc":"2.0","id":1,"method":"ping"}
	]`)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("batch: HTTP %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(r.body, &answers); err != nil {
		t.Fatalf("batch answer is not a JSON array: %v\n%s", err, r.body)
	}
	want := []struct {
		id  string
		err bool
	}{{"1", false}, {`"two"`, false}, {"3", true}, {"4", true}, {"1", true}}
	if len(answers) != len(want) {
		t.Fatalf("%d answers, want %d: %s", len(answers), len(want), r.body)
	}
	for i, a := range answers {
		m, err := jsonrpc.Parse(a)
		if err != nil || string(m.ID) != want[i].id || (m.Error != nil) != want[i].err {
			t.Errorf("answer %d = %s (%v); want id %s, error %v", i, a, err, want[i].id, want[i].err)
		}
	}
	if !strings.Contains(string(answers[1]), `"alpha__`) {
		t.Errorf("tools/list in a batch: %s", answers[1])
	}

	if r := c.post(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`); r.status != http.StatusAccepted {
		t.Errorf("notifications only: HTTP %d %s; want 202", r.status, r.body)
	}
	seven := strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},`, 7), ",")
	if r := c.post("[" + seven + "]"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "sessions.max_requests_per_session") {
		t.Errorf("over the bound: HTTP %d %s", r.status, r.body)
	}

	c2 := &rawClient{t: t, url: base + "/mcp"}
	c2.initialize("2025-06-18")
	if r := c2.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "batches are accepted only on sessions of protocol revision 2025-03-26") {
		t.Errorf("2025-06-18 session: HTTP %d %s", r.status, r.body)
	}
}
