package mcp

import (
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// TestReadParams: one reading gives what the readers below the edge used
// to read from the bytes themselves, the same way.
func TestReadParams(t *testing.T) {
	params := json.RawMessage(`{"name":"up__echo","arguments":{"a":1},"task":{},"requestState":"st","cursor":"c",` +
		`"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}},` +
		`"io.modelcontextprotocol/logLevel":"info","io.modelcontextprotocol/clientInfo":{"name":"c"}}}`)
	p := ReadParams(MethodToolsCall, params)
	if !p.HasTarget || p.Target.Kind != KindTool || !p.NameOK || p.Name != "up__echo" {
		t.Errorf("target %+v %q %v", p.Target, p.Name, p.NameOK)
	}
	args, _ := rawjson.Get(params, "arguments")
	if string(p.Arguments) != string(args) || p.Task == nil || p.State != "st" || string(p.Cursor) != `"c"` {
		t.Errorf("members: %s %s %q %s", p.Arguments, p.Task, p.State, p.Cursor)
	}
	if string(p.ProgressToken) != "7" || !p.HopKeys || !p.Stateless() || p.Version != "2026-07-28" || !p.VersionOK ||
		string(p.Capabilities) != `{"x":{}}` || p.LogLevel != "info" || string(p.ClientInfo) != `{"name":"c"}` {
		t.Errorf("_meta: %+v", p)
	}
	// A name spelled with escapes reads as it decodes; a non-string is no name.
	if p := ReadParams(MethodToolsCall, json.RawMessage(`{"n\u0061me":"a\u0062"}`)); !p.NameOK || p.Name != "ab" {
		t.Errorf("escaped: %q %v", p.Name, p.NameOK)
	}
	if p := ReadParams(MethodToolsCall, json.RawMessage(`{"name":7}`)); p.NameOK {
		t.Errorf("a number read as a name: %q", p.Name)
	}
	// A method without a target reads no member "" as one.
	if p := ReadParams(MethodToolsList, json.RawMessage(`{"":"x","cursor":"c"}`)); p.HasTarget || p.NameOK || string(p.Cursor) != `"c"` {
		t.Errorf("no target: %+v", p)
	}
	// completion/complete's target is behind its ref.
	if p := ReadParams(MethodCompletionComplete, json.RawMessage(`{"ref":{"type":"ref/prompt","name":"up__p"}}`)); !p.HasTarget || p.Target.Kind != KindPrompt || p.Name != "up__p" {
		t.Errorf("completion: %+v", p)
	}
	// No hop keys, no progress token: nothing to edit in _meta.
	if p := ReadParams(MethodToolsCall, json.RawMessage(`{"name":"x","_meta":{"progressToken":null,"k":1}}`)); p.HopKeys || p.ProgressToken != nil || p.Stateless() {
		t.Errorf("plain _meta: %+v", p)
	}
}
