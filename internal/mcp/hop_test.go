package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

func TestWithoutHopMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"a":1,"_meta":{}}`, `{"a":1,"_meta":{}}`}, // none to remove: untouched
		{`{"a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, `{"a":1}`},
		{`{"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"b":[ 1, 2 ]}`, `{"_meta":{"progressToken":7},"b":[ 1, 2 ]}`},
		{`{"_meta":{"io.modelcontextprotocol/a":1,"x.io/keep":{"io.modelcontextprotocol/inner":1}}}`, `{"_meta":{"x.io/keep":{"io.modelcontextprotocol/inner":1}}}`},
		{`{"_meta":{"io.modelcontextprotocol/a":1,"io.modelcontextprotocol/a":2}}`, `{}`},
		// The same keys spelled with escapes are the same keys.
		{`{"a":1,"_meta":{"io.modelcontextprotocol\/protocolVersion":"x","k":2}}`, `{"a":1,"_meta":{"k":2}}`},
		{`{"a":1,"_meta":{"io.modelcontextprotocol\u002fclientCapabilities":{}}}`, `{"a":1}`},
		{`{"_meta":{"\u0069o.modelcontextprotocol/serverInfo":{},"k\n":1}}`, `{"_meta":{"k\n":1}}`},
		// Task metadata is payload, not hop.
		{`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"},"io.modelcontextprotocol/serverInfo":{}}}`, `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}`},
		{`{"_meta":{"io.modelcontextprotocol/model-immediate-response":"soon"}}`, `{"_meta":{"io.modelcontextprotocol/model-immediate-response":"soon"}}`},
	} {
		got, err := mcp.WithoutHopMeta([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("WithoutHopMeta(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// FuzzWithoutHopMeta: for any JSON object, the result is valid JSON, its
// _meta holds no hop key, and every other member is untouched.
func FuzzWithoutHopMeta(f *testing.F) {
	f.Add(`{"a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"k":2}}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/a":1}}`)
	f.Add(`{"_meta":"io.modelcontextprotocol/"}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol\/a":1,"b\"":2}}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/a":1,"io.modelcontextprotocol/a":2},"_meta":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &obj) != nil {
			return
		}
		out, err := mcp.WithoutHopMeta([]byte(in))
		if err != nil {
			return // malformed _meta: refused, not mangled
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s -> invalid JSON %s: %v", in, out, err)
		}
		for k, v := range obj {
			if k != "_meta" && string(got[k]) != string(v) {
				t.Fatalf("%s -> %s: member %q changed", in, out, k)
			}
		}
		var meta map[string]json.RawMessage
		if json.Unmarshal(got["_meta"], &meta) == nil {
			for k := range meta {
				if mcp.IsHopKey(k) {
					t.Fatalf("%s -> %s: hop key %q kept", in, out, k)
				}
			}
		}
	})
}
