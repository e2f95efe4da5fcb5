package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// StatelessResult's changes are edits where the answer is written: the
// answer reads as the upstream's result with them applied, and the result
// itself is the upstream's buffer, not a copy.
func TestStatelessResultEdits(t *testing.T) {
	info := mcp.Implementation{Name: "mcpgw", Version: "t"}
	c := &Core{log: zap.NewNop(), opts: Options{ServerInfo: info}, serverInfo: mustJSON(info)}
	const gw = `{"name":"mcpgw","version":"t"}`
	for _, tc := range []struct {
		name, method, result, want string
	}{
		{"resultType added", mcp.MethodToolsCall, `{"content":[]}`, `{"content":[],"resultType":"complete"}`},
		{"empty result", mcp.MethodToolsCall, `{}`, `{"resultType":"complete"}`},
		{"spaces kept", mcp.MethodToolsCall, "{ \"a\" : 1 }\n", "{ \"a\" : 1 ,\"resultType\":\"complete\"}\n"},
		{"resultType kept", mcp.MethodToolsCall, `{"resultType":"complete","x":1}`, `{"resultType":"complete","x":1}`},
		{"input requests", mcp.MethodToolsCall, `{"inputRequests":{}}`, `{"inputRequests":{},"resultType":"input_required"}`},
		{"list cache hints", mcp.MethodToolsList, `{"tools":[]}`, `{"tools":[],"resultType":"complete","ttlMs":30000,"cacheScope":"public"}`},
		{"list hints kept", mcp.MethodToolsList, `{"tools":[],"ttlMs":5,"cacheScope":"private","resultType":"complete"}`, `{"tools":[],"ttlMs":5,"cacheScope":"private","resultType":"complete"}`},
		{"read is not cached", mcp.MethodResourcesRead, `{"contents":[]}`, `{"contents":[],"resultType":"complete","ttlMs":0,"cacheScope":"public"}`},
		{"hop serverInfo is the gateway's", mcp.MethodToolsCall, `{"_meta":{"` + mcp.MetaServerInfo + `":{"name":"up"},"k":"v"},"content":[]}`,
			`{"_meta":{"` + mcp.MetaServerInfo + `":` + gw + `,"k":"v"},"content":[],"resultType":"complete"}`},
		{"other _meta untouched", mcp.MethodToolsCall, `{"_meta":{"k":"v"}}`, `{"_meta":{"k":"v"},"resultType":"complete"}`},
		{"not an object", mcp.MethodToolsCall, `[1]`, `[1]`},
	} {
		// Made here (the result scanned), and parsed from an upstream's
		// answer (the parse's record of its members used).
		for _, made := range []string{"made", "parsed"} {
			t.Run(tc.name+"/"+made, func(t *testing.T) {
				msg := jsonrpc.NewResult(jsonrpc.IntID(3), []byte(tc.result))
				if made == "parsed" {
					var err error
					if msg, err = jsonrpc.ParseOwned([]byte(`{"jsonrpc":"2.0","id":3,"result":` + tc.result + `}`)); err != nil {
						t.Fatal(err)
					}
				}
				in := msg.Result
				resp := c.StatelessResult(tc.method, msg)
				b, _ := jsonrpc.Encode(resp)
				if want := `{"jsonrpc":"2.0","id":3,"result":` + strings.TrimRight(tc.want, "\n") + `}`; strings.ReplaceAll(string(b), "\n", "") != want {
					t.Errorf("answer %s\nwant   %s", b, want)
				}
				if string(resp.Result) != string(in) || unsafe.SliceData(resp.Result) != unsafe.SliceData(in) {
					t.Errorf("the result was copied or changed: %s", resp.Result)
				}
				resp.ApplyEdits()
				if strings.TrimRight(string(resp.Result), "\n") != strings.TrimRight(tc.want, "\n") {
					t.Errorf("applied: %s, want %s", resp.Result, tc.want)
				}
			})
		}
	}
	e := c.StatelessResult(mcp.MethodResourcesRead, jsonrpc.NewError(jsonrpc.IntID(1), &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "gone"}))
	if e.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Error.Message, "gone") {
		t.Errorf("resource not found became %+v", e.Error)
	}
}

// The shaping of a large result costs no copy of it.
func TestStatelessResultLargeNoCopy(t *testing.T) {
	c := &Core{log: zap.NewNop()}
	res := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}`)
	var got *jsonrpc.Message
	allocs := testing.AllocsPerRun(5, func() { got = c.StatelessResult(mcp.MethodToolsCall, jsonrpc.NewResult(jsonrpc.IntID(1), res)) })
	if allocs > 6 || len(got.ResultEdits) != 1 {
		t.Errorf("%v allocations, edits %v", allocs, got.ResultEdits)
	}
}

// A session revision's caller sees its own revision's shape: what only
// 2026-07-28 results carry (resultType, a list's ttlMs and cacheScope)
// is removed, every other byte kept.
func TestSessionResultShape(t *testing.T) {
	sess := NewRequestSession(context.Background(), &Route{Path: "/mcp"}, mcp.Version20251125, json.RawMessage(`{}`), nil, "", "", false)
	defer sess.End()
	for _, tc := range []struct{ in, want string }{
		{`{"tools":[{"name":"a"}],"ttlMs":5,"cacheScope":"private","resultType":"complete"}`, `{"tools":[{"name":"a"}]}`},
		{`{"ttlMs":5,"tools":[],"nextCursor":"c"}`, `{"tools":[],"nextCursor":"c"}`},
		{`{"content":[{"type":"text","text":"ttlMs"}]}`, `{"content":[{"type":"text","text":"ttlMs"}]}`},
	} {
		got := sessionResult(sess, jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(tc.in)))
		if string(got.Result) != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got.Result, tc.want)
		}
	}
}
