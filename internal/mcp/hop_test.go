package mcp_test

import (
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
	} {
		got, err := mcp.WithoutHopMeta([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("WithoutHopMeta(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
