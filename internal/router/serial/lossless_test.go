package serial_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// TestLosslessPassThrough proves invariant 1: whatever an upstream puts in a
// result (unknown fields, _meta, annotations, icons, outputSchema with $defs,
// structuredContent, odd number spellings, escapes) reaches the client byte
// for byte, apart from the rewritten name or URI.
func TestLosslessPassThrough(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("testdata/lossless")
	if err != nil {
		t.Fatal(err)
	}
	exe := gatewaytest.StdioUpstream(t)
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			up := "url: " + gatewaytest.ScriptedHTTP(t, dir)
			if transport == "stdio" {
				up = fmt.Sprintf("command: [%q]\n    env: {MCPGW_TEST_SCRIPTED_STDIO: %q}", exe, dir)
			}
			_, base := gatewaytest.StartGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  lx:\n    %s\n", up))
			c := &gatewaytest.RawClient{T: t, URL: base + "/mcp"}
			c.Initialize("2025-11-25")
			for _, tc := range []struct{ golden, request string }{
				{"tools-list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
				{"tools-call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lx__search","arguments":{"query":"q"}}}`},
				{"prompts-list", `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`},
				{"resources-list", `{"jsonrpc":"2.0","id":4,"method":"resources/list"}`},
			} {
				want, err := os.ReadFile(filepath.Join(dir, tc.golden+".downstream.json"))
				if err != nil {
					t.Fatal(err)
				}
				got := c.Post(tc.request).Last(t)
				if got.Error != nil {
					t.Fatalf("%s: %v", tc.golden, got.Error)
				}
				if !bytes.Equal(got.Result, bytes.TrimSpace(want)) {
					t.Errorf("%s: result differs from golden\n got: %s\nwant: %s", tc.golden, got.Result, want)
				}
			}
		})
	}
}
