package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// TestTaskIDCaseVariantRefused: an upstream that decodes params with Go's
// encoding/json (case-insensitive member names, the last one wins) and
// hands out guessable task ids. Bob sends his own sealed id as taskId and
// Alice's upstream id as TaskId: the gateway refuses the request before
// anything reaches the upstream, on tasks/get, tasks/result and
// tasks/cancel, and Bob learns nothing of Alice's task.
func TestTaskIDCaseVariantRefused(t *testing.T) {
	up, url := newTaskUpstream(t)
	_, base := startGateway(t, fmt.Sprintf(`
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
	alice, _ := taskClient(t, base, "alice-secret-0123456789")
	bob, _ := taskClient(t, base, "bob-secret-0123456789")
	createTask(t, alice, map[string]any{}) // up-1 upstream
	mine := createTask(t, bob, map[string]any{"hold": true})
	before := len(up.sawTaskIDs())
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, variant := range []string{"TaskId", "taskID", "TASKID"} {
			r := bob.post(`{"jsonrpc":"2.0","id":3,"method":"` + method + `","params":{"taskId":"` + mine + `","` + variant + `":"up-1"}}`)
			if strings.Contains(string(r.body), "up-1") {
				t.Errorf("%s with %s: the answer names Alice's upstream task: %s", method, variant, r.body)
			}
			m := r.last(t)
			if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, variant) {
				t.Errorf("%s with %s: %s; want -32600 naming the case variant", method, variant, r.body)
			}
		}
	}
	if seen := up.sawTaskIDs(); len(seen) != before {
		t.Errorf("the upstream received task requests %v from the refused ones", seen[before:])
	}
}
