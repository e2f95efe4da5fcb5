package router_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// The router's own part of a reload and of stdio, through a whole gateway:
// which sessions a new generation keeps, and which route a stdio session
// is served by.

// TestReloadEndsTheSessionsOfARemovedRoute: a reload that removes a route
// and changes another keeps the sessions of the route that stays, on the
// new generation (told with tools/list_changed, listing and calling what
// the route has now), and ends those of the removed route: when a later
// reload brings the route back, their id is unknown (404).
func TestReloadEndsTheSessionsOfARemovedRoute(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	beta := gatewaytest.HTTPUpstream(t, "beta", 0)
	cfg := func(routes string) string {
		return fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q}\nroutes:\n%s", alpha, beta, routes)
	}
	const both = "  - path: /mcp\n  - path: /mcp/beta\n    upstreams: [beta]\n"
	gw, base, _ := gatewaytest.StartReloadable(t, cfg(both))

	stays, changed := gatewaytest.ListChanges(t, base+"/mcp")
	if names := gatewaytest.SDKToolNames(t, stays); !slices.Contains(names, "beta__echo") || !slices.Contains(names, "alpha__echo") {
		t.Fatalf("tools before the reload: %v", names)
	}
	gone := &gatewaytest.RawClient{T: t, URL: base + "/mcp/beta"}
	gone.Initialize("2025-11-25")
	if r := gone.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"beta__echo"`) {
		t.Fatalf("tools/list on /mcp/beta before the reload: HTTP %d %s", r.Status, r.Body)
	}
	gatewaytest.DrainSignals(changed)

	if err := gw.Reload(gatewaytest.ParseConfig(t, cfg("  - path: /mcp\n    upstreams: [alpha]\n"))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	gatewaytest.WaitSignal(t, changed, "tools/list_changed on the session whose route changed")
	if names := gatewaytest.SDKToolNames(t, stays); slices.Contains(names, "beta__echo") || !slices.Contains(names, "alpha__echo") {
		t.Errorf("tools after the reload: %v; want alpha's only", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := gatewaytest.CallText(ctx, stays, "alpha__echo", map[string]any{"text": "hi"}); err != nil || got != "alpha:hi" {
		t.Errorf("alpha__echo on the session that stays: %q, %v", got, err)
	}
	if r := gone.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); r.Status != http.StatusNotFound {
		t.Errorf("the removed route: HTTP %d %s; want 404", r.Status, r.Body)
	}

	if err := gw.Reload(gatewaytest.ParseConfig(t, cfg(both))); err != nil {
		t.Fatalf("reload bringing /mcp/beta back: %v", err)
	}
	if r := gone.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`); r.Status != http.StatusNotFound {
		t.Errorf("a session the route's removal ended, after the route came back: HTTP %d %s; want 404", r.Status, r.Body)
	}
}

// TestReloadRotatesTheSessionKeyRing: a reload rereads sessions.key_file
// and the router seals new session ids with the new ring's first key: a
// replica holding only that key recreates a session opened after the
// rotation from its id, and refuses (404) one sealed before it. The session
// opened before the rotation goes on where it lives.
func TestReloadRotatesTheSessionKeyRing(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	keyFile := filepath.Join(t.TempDir(), "keys")
	const oldKey, newKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "HxwdHhscGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE="
	ring := func(keys ...string) {
		if err := os.WriteFile(keyFile, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf("sessions: {key_file: %q}\nupstreams:\n  alpha: {url: %q}\n", keyFile, alpha)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	ring(oldKey)
	gw, base, _ := gatewaytest.StartReloadable(t, yaml)
	before := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	before.Initialize("2025-11-25")

	ring(newKey, oldKey)
	if err := gw.Reload(gatewaytest.ParseConfig(t, yaml)); err != nil {
		t.Fatalf("reload rotating the ring: %v", err)
	}
	if r := before.Post(list); r.Status != http.StatusOK {
		t.Errorf("the session opened before the rotation: HTTP %d %s; want it to go on", r.Status, r.Body)
	}
	after := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	after.Initialize("2025-11-25")

	// A replica whose ring holds only the new key.
	ring(newKey)
	_, other, _ := gatewaytest.StartReloadable(t, yaml)
	at := func(c *gatewaytest.RawClient) *gatewaytest.RawResponse {
		return (&gatewaytest.RawClient{T: t, URL: other + "/mcp", Session: c.Session}).Post(list)
	}
	if r := at(after); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"alpha__echo"`) {
		t.Errorf("a session opened after the rotation, at a replica with the new key: HTTP %d %s; want it recreated", r.Status, r.Body)
	}
	if r := at(before); r.Status != http.StatusNotFound {
		t.Errorf("a session sealed with the old key, at a replica without it: HTTP %d %s; want 404", r.Status, r.Body)
	}
}

// TestStdioServesTheNamedRoute: a stdio session is served by the route it
// names (its own view: alpha's tools unprefixed), by the first route when
// it names none, and a route that is not configured is refused, naming
// the routes that are.
func TestStdioServesTheNamedRoute(t *testing.T) {
	t.Parallel()
	yaml := gatewaytest.StdioYAML(t)
	tools := func(route string) []string {
		in, out, _ := gatewaytest.StdioGateway(t, yaml, route)
		raw := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
		raw.Send(
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		)
		for {
			m, line := raw.Next()
			if string(m.ID) != "1" {
				continue
			}
			if m.Error != nil {
				t.Fatalf("tools/list on route %q: %s", route, line)
			}
			var names []string
			for _, part := range strings.Split(string(m.Result), `"name":"`)[1:] {
				names = append(names, part[:strings.IndexByte(part, '"')])
			}
			return names
		}
	}
	if got := tools("/mcp/alpha"); !slices.Contains(got, "echo") || slices.Contains(got, "alpha__echo") {
		t.Errorf("route /mcp/alpha lists %v; want alpha's tools unprefixed", got)
	}
	if got := tools(""); !slices.Contains(got, "alpha__echo") {
		t.Errorf("no route named: lists %v; want the first route's (/mcp, prefixed)", got)
	}

	_, _, done := gatewaytest.StdioGateway(t, yaml, "/nope")
	err := testwait.Recv(t, done, "ServeStdio's refusal of an unknown route")
	if err == nil || !strings.Contains(err.Error(), `no route "/nope"`) || !strings.Contains(err.Error(), "configured routes: /mcp, /mcp/alpha") {
		t.Errorf("unknown route: %v; want it refused, naming the configured routes", err)
	}
}
