package host_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// The case, end to end: beside a working upstream, one that hangs
// (`command: [sleep, "1000"]`) and one slow to start. With the default
// startup_list_wait, a client's first tools/list is answered within 3s with
// the working upstream's tools (not after the hung one's 30s
// startup_timeout), and when the slow one arrives the session gets
// notifications/tools/list_changed and its tools are listed.
func TestFirstToolsListBesideHungUpstream(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(t.TempDir(), "release")
	yaml := fmt.Sprintf(`
upstreams:
  hung:
    command: [sleep, "1000"]
  late:
    command: [%[1]q]
    env: {MCPGW_TEST_STDIO_SERVER: late, MCPGW_TEST_STDIO_RELEASE: %[2]q}
  works:
    command: [%[1]q]
    env: {MCPGW_TEST_STDIO_SERVER: works}
`, exe, release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Not gatewaytest.RunGateway: that waits for every upstream's first attempt.
	gw, err := gateway.Start(gatewaytest.ParseConfig(t, yaml), gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	cs, changed := gatewaytest.ListChanges(t, "http://"+ln.Addr().String()+"/mcp")

	// One tools/list, as a host that never follows nextCursor makes it; the
	// 3s bound is the (the default wait is 2s), not a speed goal.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("first tools/list: %v", err)
	}
	t.Logf("first tools/list answered after %s", time.Since(start).Round(time.Millisecond))
	names := toolNamesOf(res)
	if !slices.ContainsFunc(names, prefixed("works")) || slices.ContainsFunc(names, prefixed("late")) || slices.ContainsFunc(names, prefixed("hung")) {
		t.Fatalf("first tools/list = %v, want works' tools only", names)
	}

	gatewaytest.DrainSignals(changed)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gatewaytest.WaitSignal(t, changed, "tools/list_changed after the slow upstream arrived")
	if names := gatewaytest.SDKToolNames(t, cs); !slices.Contains(names, "late__echo") || !slices.Contains(names, "works__echo") {
		t.Errorf("tools after list_changed = %v, want late's and works'", names)
	}
}

func toolNamesOf(res *mcp.ListToolsResult) []string {
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func prefixed(upstream string) func(string) bool {
	return func(name string) bool { return strings.HasPrefix(name, upstream+"__") }
}
