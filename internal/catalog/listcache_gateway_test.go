package catalog_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/test/faulty"
)

// TestListCacheFollowsListChanged: the catalog answers warm listings from
// its cache, and an upstream that changes its tools and says so
// (notifications/tools/list_changed) has the change in the next listing.
func TestListCacheFollowsListChanged(t *testing.T) {
	t.Parallel()
	fs := faulty.NewServer(faulty.Options{})
	ts := httptest.NewServer(fs.HTTP())
	t.Cleanup(ts.Close)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  f: {url: %s}\nroutes:\n  - path: /mcp\n", ts.URL))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	if names := gatewaytest.ToolNames(t, c); !slices.Contains(names, "f__echo") || slices.Contains(names, "f__gen_1") {
		t.Fatalf("before any change: %v", names)
	}
	gatewaytest.ToolNames(t, c) // warm

	change := func(id int) {
		t.Helper()
		b, _ := jsonrpc.Encode(jsonrpc.NewRequest(jsonrpc.IntID(int64(id)), "tools/call", faulty.Fault{Kind: faulty.ListChanged}.CallParams("f__", "")))
		if m := c.Post(string(b)).Last(t); m.Error != nil {
			t.Fatalf("list_changed call: %v", m.Error)
		}
	}
	// await polls the listing: the notification reaches the gateway on
	// the upstream's GET stream, not with the call's answer.
	await := func(what string, ok func([]string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			names := gatewaytest.ToolNames(t, c)
			if ok(names) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still listed %v", what, names)
			}
			time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
		}
	}
	change(10) // generation 1: gen_1 comes
	await("gen_1 added", func(n []string) bool { return slices.Contains(n, "f__gen_1") })
	change(11) // generation 2: it goes
	await("gen_1 removed", func(n []string) bool { return !slices.Contains(n, "f__gen_1") })
	if g := fs.Generation(); g != 2 {
		t.Errorf("upstream generation %d, want 2", g)
	}
}
