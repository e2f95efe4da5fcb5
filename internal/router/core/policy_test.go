package core_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router"
)

// TestPolicyOnTheRequestPath: lists are filtered per principal, a hidden
// tool answers like an unknown one and never reaches the upstream, deny
// wins over allow, and a rate limit answers with a retry hint.
func TestPolicyOnTheRequestPath(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
auth:
  api_keys:
    - {name: eng-key, key: eng-secret-0123456789, principal: alice, groups: [eng]}
    - {name: ops-key, key: ops-secret-0123456789, principal: bob, groups: [ops]}
policy:
  default: deny
  rules:
    - match: {groups: [eng]}
      allow: ["alpha__*"]
      deny: ["alpha__slow"]
    - match: {groups: [ops]}
      allow: ["alpha__echo"]
  rate_limits:
    principal: {rate: 2/m, burst: 2}
`, alpha))
	as := func(key string) *gatewaytest.RawClient {
		c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {key}}}
		c.Initialize("2025-11-25")
		return c
	}
	eng, ops := as("eng-secret-0123456789"), as("ops-secret-0123456789")

	engTools := gatewaytest.ToolNames(t, eng)
	if slices.Contains(engTools, "alpha__slow") || !slices.Contains(engTools, "alpha__echo") || !slices.Contains(engTools, "alpha__t06") {
		t.Errorf("eng sees %v: want every alpha tool but alpha__slow (deny wins)", engTools)
	}
	if got := gatewaytest.ToolNames(t, ops); !slices.Equal(got, []string{"alpha__echo"}) {
		t.Errorf("ops sees %v, want only alpha__echo", got)
	}

	// A hidden tool looks absent, exactly like one that does not exist.
	hiddenErr := gatewaytest.ErrorOf(t, ops.Post(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"alpha__t00","arguments":{}}}`))
	if hiddenErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(hiddenErr.Message, `unknown tool "alpha__t00"`) {
		t.Errorf("hidden tool: %+v", hiddenErr)
	}

	// Two calls fit the burst; the third is refused with a retry hint.
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`
	for i := range 2 {
		if m := ops.Post(call).Last(t); m.Error != nil {
			t.Fatalf("call %d: %v", i, m.Error)
		}
	}
	limited := gatewaytest.ErrorOf(t, ops.Post(call))
	var data struct {
		RetryAfterSeconds int `json:"retryAfterSeconds"`
	}
	if limited.Code != router.CodeRateLimited || json.Unmarshal(limited.Data, &data) != nil || data.RetryAfterSeconds < 1 {
		t.Errorf("over the limit: %+v", limited)
	}
	// Buckets are per principal: eng is unaffected.
	if m := eng.Post(call).Last(t); m.Error != nil {
		t.Errorf("eng after ops was limited: %v", m.Error)
	}
}

// TestPinningEnforced: with pinning in enforce mode, only tools whose
// definition is in the lock are listed and callable.
func TestPinningEnforced(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	// Approve the upstream's own echo definition, exactly as it lists it.
	_, probe := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  alpha: {url: %s}\nroutes:\n  - {path: /mcp, prefix: false}\n", alpha))
	pc := &gatewaytest.RawClient{T: t, URL: probe + "/mcp"}
	pc.Initialize("2025-11-25")
	listed := pc.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Last(t)
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(listed.Result, &res); err != nil {
		t.Fatal(err)
	}
	lock := policy.NewLock()
	for _, tl := range res.Tools {
		if strings.Contains(string(tl), `"name":"echo"`) {
			arr, _ := json.Marshal([]json.RawMessage{tl})
			if err := lock.AddTools("alpha", arr); err != nil {
				t.Fatal(err)
			}
		}
	}
	lockFile := filepath.Join(t.TempDir(), "mcpgw.lock.json")
	if err := os.WriteFile(lockFile, lock.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}

	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
policy:
  default: allow
  pinning: {mode: enforce, lock_file: %q}
`, alpha, lockFile))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
	c.Initialize("2025-11-25")
	if got := gatewaytest.ToolNames(t, c); !slices.Equal(got, []string{"alpha__echo"}) {
		t.Errorf("listed %v, want only the approved alpha__echo", got)
	}
	if e := gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__t00","arguments":{}}}`)); e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unapproved tool call: %+v", e)
	}
	if m := c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"ok"}}}`).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "alpha:ok") {
		t.Errorf("approved tool call: %s", m.Result)
	}
}

// TestPolicyConditionOnArguments: a CEL condition on the call's arguments
// refuses some calls of a tool the principal may see and use otherwise,
// and the tool stays listed.
func TestPolicyConditionOnArguments(t *testing.T) {
	t.Parallel()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base := gatewaytest.StartGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
auth:
  api_keys:
    - {name: ops-key, key: ops-secret-0123456789, principal: bob, groups: [ops]}
policy:
  default: deny
  rules:
    - match: {groups: [ops]}
      allow: ["alpha__echo"]
    - match: {groups: [ops]}
      deny: ["alpha__echo"]
      when: 'has(arguments.text) && arguments.text.startsWith("rm ")'
`, alpha))
	c := &gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: http.Header{"X-Api-Key": {"ops-secret-0123456789"}}}
	c.Initialize("2025-11-25")
	if got := gatewaytest.ToolNames(t, c); !slices.Equal(got, []string{"alpha__echo"}) {
		t.Errorf("listed %v, want alpha__echo (a conditional deny does not hide it)", got)
	}
	ok := c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hello"}}}`).Last(t)
	if ok.Error != nil || !strings.Contains(string(ok.Result), "alpha:hello") {
		t.Errorf("allowed arguments: %s %v", ok.Result, ok.Error)
	}
	e := gatewaytest.ErrorOf(t, c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"rm -rf /"}}}`))
	if !strings.Contains(e.Message, "forbidden") {
		t.Errorf("refused arguments: %+v", e)
	}
}
