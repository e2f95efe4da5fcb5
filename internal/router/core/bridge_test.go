package core

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// FuzzBridgeResume: a requestState is untrusted input. Whatever a client
// sends, resume never panics, and it resumes the parked call only with a
// state this bridge minted for it (for its request and its owner).
func FuzzBridgeResume(f *testing.F) {
	b := newBridge(nil, nil, "")
	p := &parkedCall{method: "tools/call", name: "up__x", owner: "key:alice", ctx: context.Background(), pending: map[string]*inputNeed{}}
	if err := b.park(p, Limits{MaxParked: 1, MaxParkedPerPrincipal: 1}); err != nil {
		f.Fatal(err)
	}
	minted := map[string]bool{}
	for range 3 {
		s := b.state(p)
		minted[s] = true
		f.Add(s, "up__x", "key:alice")
		f.Add(s, "up__y", "key:alice")
		f.Add(s, "up__x", "key:bob")
		f.Add(s[:len(s)-1], "up__x", "key:alice")
	}
	f.Add("mcpgw1.", "up__x", "key:alice")
	f.Add("mcpgw1.e30.e30", "up__x", "key:alice")
	f.Add("mcpgw1..", "", "")
	f.Fuzz(func(t *testing.T, state, name, owner string) {
		params, _ := json.Marshal(map[string]string{"name": name})
		got, _, err := b.resume(state, &jsonrpc.Message{Method: "tools/call", Params: params}, owner)
		if err != nil {
			if got != nil || err.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("refusal %v with call %v", err, got)
			}
			return
		}
		if got != p || !minted[state] || name != "up__x" || owner != "key:alice" {
			t.Fatalf("resumed %v with state %q for %q by %q", got, state, name, owner)
		}
		p.mu.Lock()
		p.driven = false // as drive leaves it
		p.mu.Unlock()
	})
}
