package client

import (
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// TestViewMetaAsReadAgain: the one edit made from the edge's view of the
// params gives the bytes that reading them again did (WithoutHopMeta, then
// the progress token replaced), whitespace and order kept.
func TestViewMetaAsReadAgain(t *testing.T) {
	for _, params := range []string{
		`{"name":"x"}`,
		`{"name":"x","_meta":{}}`,
		`{"name":"x","_meta":{"progressToken":7}}`,
		`{"name":"x","_meta":{"progressToken":null}}`,
		`{"name":"x", "_meta": { "a":1, "progressToken" : "t" , "b":[1,2] } ,"z":0}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7,"io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"name":"x","_meta":{ "io.modelcontextprotocol/protocolVersion":"2026-07-28" , "progressToken":7 }}`,
		`{"name":"x","_meta":{"progressToken":7, "io.modelcontextprotocol/protocolVersion":"2026-07-28","a":1, "io.modelcontextprotocol/logLevel":"info"}}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"},"io.modelcontextprotocol/clientInfo":{}}}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol\/logLevel":"info","a":1}}`,
		`{"_meta":{"io.modelcontextprotocol/a":1,"io.modelcontextprotocol/b":2,"k":3,"io.modelcontextprotocol/c":4}}`,
	} {
		id := jsonrpc.IntID(9)
		want, err := mcp.WithoutHopMeta(json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		var wantTok json.RawMessage
		if _, ok := progressToken(want); ok {
			wantTok = clientToken(id)
			if want, err = setProgressToken(want, wantTok); err != nil {
				t.Fatal(err)
			}
		}
		mv := mcp.ReadParams(mcp.MethodToolsCall, json.RawMessage(params)).ForwardView()
		got, tok, err := viewMeta(json.RawMessage(params), &mv, id)
		if err != nil || string(got) != string(want) || string(tok) != string(wantTok) {
			t.Errorf("%s:\n got %s %s %v\nwant %s %s", params, got, tok, err, want, wantTok)
		}
	}
}
