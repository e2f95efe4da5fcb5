package router_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// This test came from internal/gateway/hidden_test.go (whose other tests
// are beside router/core now): it runs on peruser_test.go's per-user
// environment, so it lives beside that.

// TestPerUserPinningEnforced: a per-user upstream's tools are judged
// against the definitions the caller's own connection lists (the gateway
// has no connection of its own to it): with an empty lock nothing is
// listed and nothing runs; with the tool approved, it is listed and runs
// (issue 27.3).
func TestPerUserPinningEnforced(t *testing.T) {
	t.Parallel()
	lockFile := filepath.Join(t.TempDir(), "tools.lock.json")
	if err := os.WriteFile(lockFile, policy.NewLock().Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	withMode := func(mode string) func(string) string {
		return func(cfg string) string {
			return strings.Replace(cfg, "policy: {default: allow}", fmt.Sprintf("policy: {default: allow, pinning: {mode: %s, lock_file: %q}}", mode, lockFile), 1)
		}
	}
	e := newPerUserEnvWith(t, withMode("enforce"))
	alice := e.client("alice", `{"elicitation":{"url":{}}}`)
	// No credential yet: the link to get one, as without pinning.
	el := elicitationOf(t, alice.Post(callWhoami))
	if status, page := e.consent(el.URL, "alice"); status != http.StatusOK {
		t.Fatalf("alice's consent: %d %s", status, page)
	}
	tools := func() []json.RawMessage {
		m := alice.Post(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`).Last(t)
		var res struct{ Tools []json.RawMessage }
		if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
			t.Fatalf("tools/list: %s %v", m.Result, m.Error)
		}
		return res.Tools
	}
	if got := tools(); len(got) != 0 {
		t.Errorf("with an empty lock, tools/list shows %s", got)
	}
	if e := gatewaytest.ErrorOf(t, alice.Post(callWhoami)); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, `unknown tool "gh__whoami"`) {
		t.Errorf("with an empty lock, whoami: %+v; want unknown tool", e)
	}

	// Approve whoami as alice's connection lists it (warn mode shows it).
	e.stop()
	e.cfg = withMode("warn")(newPerUserCfgBase(e.cfg))
	e.start(nil)
	alice = e.client("alice", `{"elicitation":{"url":{}}}`)
	listed := tools()
	if len(listed) != 1 {
		t.Fatalf("warn mode lists %s, want whoami", listed)
	}
	var def map[string]any
	if err := json.Unmarshal(listed[0], &def); err != nil {
		t.Fatal(err)
	}
	def["name"] = "whoami"
	raw, _ := json.Marshal([]any{def})
	lock, err := policy.BuildLock(map[string]json.RawMessage{puName: raw})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockFile, lock.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.cfg = withMode("enforce")(newPerUserCfgBase(e.cfg))
	e.start(nil)
	alice = e.client("alice", `{"elicitation":{"url":{}}}`)
	if got := tools(); len(got) != 1 || !strings.Contains(string(got[0]), `"gh__whoami"`) {
		t.Errorf("with whoami approved, tools/list shows %s", got)
	}
	if got := whoamiRaw(t, alice); got != "alice" {
		t.Errorf("with whoami approved, whoami = %q, want alice", got)
	}
}

// newPerUserCfgBase takes the pinning section out of a per-user config
// again.
func newPerUserCfgBase(cfg string) string {
	i := strings.Index(cfg, "policy: {default: allow, pinning:")
	if i < 0 {
		return cfg
	}
	j := strings.Index(cfg[i:], "\n")
	return cfg[:i] + "policy: {default: allow}" + cfg[i+j:]
}
