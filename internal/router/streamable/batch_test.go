package streamable_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// A 2025-03-26 session may POST a JSON-RPC batch, as that revision's
// transport requires: each message handled as if sent alone (its own
// parse and duplicate-member check), the requests' answers returned
// together in a JSON array, 202 for notifications and responses only; a
// batch is bounded by sessions.max_requests_per_session, and refused on
// sessions of other revisions.
func TestBatch20250326(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
sessions:
  max_requests_per_session: 6
`, alpha))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-03-26")

	r := c.Post(`[
		{"jsonrpc":"2.0","id":1,"method":"ping"},
		{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
		{"jsonrpc":"2.0","id":"two","method":"tools/list"},
		{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"},
		{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}},
		{"jsonrpc":"2.0","id":1,"method":"ping"}
	]`)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("batch: HTTP %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(r.Body, &answers); err != nil {
		t.Fatalf("batch answer is not a JSON array: %v\n%s", err, r.Body)
	}
	want := []struct {
		id  string
		err bool
	}{{"1", false}, {`"two"`, false}, {"3", true}, {"4", true}, {"1", true}}
	if len(answers) != len(want) {
		t.Fatalf("%d answers, want %d: %s", len(answers), len(want), r.Body)
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

	if r := c.Post(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`); r.Status != http.StatusAccepted {
		t.Errorf("notifications only: HTTP %d %s; want 202", r.Status, r.Body)
	}
	seven := strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},`, 7), ",")
	if r := c.Post("[" + seven + "]"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "sessions.max_requests_per_session") {
		t.Errorf("over the bound: HTTP %d %s", r.Status, r.Body)
	}

	c2 := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c2.Initialize("2025-06-18")
	if r := c2.Post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "batches are accepted only on sessions of protocol revision 2025-03-26") {
		t.Errorf("2025-06-18 session: HTTP %d %s", r.Status, r.Body)
	}
}
