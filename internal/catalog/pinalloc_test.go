package catalog

import (
	"context"
	"testing"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// A tools/call that names its tool in the explicit form, as clients send
// what the list showed them, is pinned without building that name again
// to compare it (issue 28: one string per call); a bare name is still
// rewritten to the explicit one.
func TestPinParamsExplicitNameAllocs(t *testing.T) {
	h := fakeHost(t, map[string]*fakeUpstream{"demo": {tools: []string{`{"name":"echo"}`}}, "other": {tools: []string{`{"name":"add"}`}}})
	v := NewView(h, nil, true)
	ctx := context.Background()
	explicit := mcp.ReadParams(mcp.MethodToolsCall, []byte(`{"name":"demo__echo","arguments":{}}`))
	pinned, tgt, jerr := v.PinParams(ctx, mcp.MethodToolsCall, explicit, nil)
	if jerr != nil || pinned != nil || tgt.Upstream != "demo" || tgt.Internal != "echo" || tgt.External != "demo__echo" || tgt.Canonical != "demo__echo" {
		t.Fatalf("demo__echo pinned %s to %+v %v; want demo's echo, unchanged", pinned, tgt, jerr)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = v.PinParams(ctx, mcp.MethodToolsCall, explicit, nil) }); n != 0 {
		t.Errorf("pinning an explicit tool name costs %v allocations, want 0", n)
	}
	bare := mcp.ReadParams(mcp.MethodToolsCall, []byte(`{"name":"echo","arguments":{}}`))
	pinned, tgt, jerr = v.PinParams(ctx, mcp.MethodToolsCall, bare, nil)
	if jerr != nil || string(pinned) != `{"name":"demo__echo","arguments":{}}` || tgt.External != "demo__echo" {
		t.Errorf("echo pinned %s to %+v %v; want the params naming demo__echo", pinned, tgt, jerr)
	}
}
