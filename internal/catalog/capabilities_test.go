package catalog

import (
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// What one upstream's declared capabilities (nil: never ready) contribute
// to its route's offer.
func TestCapabilityOffer(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps json.RawMessage
		want capabilityOffer
	}{
		{"not known yet: the lists it may bring", nil, capabilityOffer{tools: true, prompts: true, resources: true}},
		{"nothing", json.RawMessage(`{}`), capabilityOffer{}},
		{"tools only", json.RawMessage(`{"tools":{}}`), capabilityOffer{tools: true}},
		{"subscribe false is no subscribe", json.RawMessage(`{"resources":{"subscribe":false,"listChanged":true}}`), capabilityOffer{resources: true}},
		{"everything", json.RawMessage(`{"tools":{},"prompts":{},"resources":{"subscribe":true},"completions":{},"logging":{}}`),
			capabilityOffer{tools: true, prompts: true, resources: true, subscribe: true, completions: true, logging: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := offer(tc.caps); got != tc.want {
				t.Errorf("offer(%s) = %+v, want %+v", tc.caps, got, tc.want)
			}
		})
	}
}

func TestCapabilityGap(t *testing.T) {
	caps := json.RawMessage(`{"resources":{"listChanged":true},"completions":{}}`)
	for _, tc := range []struct {
		method, want string
	}{
		{mcp.MethodResourcesSubscribe, `upstream "fs" does not support resource subscriptions (its capabilities have no resources.subscribe)`},
		{mcp.MethodResourcesUnsubscribe, `upstream "fs" does not support resource subscriptions (its capabilities have no resources.subscribe)`},
		{mcp.MethodCompletionComplete, ""},
		{mcp.MethodToolsCall, ""},
	} {
		err := capabilityGap("fs", tc.method, caps)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused with %q", tc.method, err.Message)
		case tc.want != "" && (err == nil || err.Message != tc.want || string(err.Data) != `{"capability":"resources.subscribe","upstream":"fs"}`):
			t.Errorf("%s: %+v, want %q", tc.method, err, tc.want)
		}
	}
}
