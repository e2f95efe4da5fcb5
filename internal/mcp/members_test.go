package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

func request(method, params string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`)
}

// Every member the gateway reads is refused in another case, where the
// gateway reads it; the same spellings elsewhere are the payload's own.
func TestParseRefusesCaseVariantsOfWhatTheGatewayReads(t *testing.T) {
	refused := []struct {
		params, member, where string
	}{
		{`{"name":"ci__safe_tool","NAME":"delete_everything"}`, "NAME", "params"},
		{`{"Name":"x"}`, "Name", "params"},
		{`{"URI":"file:///etc/passwd"}`, "URI", "params"},
		{`{"name":"a","Arguments":{}}`, "Arguments", "params"},
		{`{"Cursor":"c"}`, "Cursor", "params"},
		{`{"_Meta":{}}`, "_Meta", "params"},
		{`{"TASK":{}}`, "TASK", "params"},
		{`{"tas\u212a":{}}`, "tas\u212a", "params"},
		{`{"Ref":{}}`, "Ref", "params"},
		{`{"ref":{"type":"ref/prompt","NAME":"x"}}`, "NAME", "params.ref"},
		{`{"ref":{"Type":"ref/resource"}}`, "Type", "params.ref"},
		{`{"ref":{"type":"ref/resource","Uri":"x"}}`, "Uri", "params.ref"},
		{`{"Level":"debug"}`, "Level", "params"},
		{`{"protocolversion":"2025-06-18"}`, "protocolversion", "params"},
		{`{"Capabilities":{}}`, "Capabilities", "params"},
		{`{"capabilities":{"Sampling":{}}}`, "Sampling", "params.capabilities"},
		{`{"capabilities":{"elicitation":{"URL":{}}}}`, "URL", "params.capabilities.elicitation"},
		{`{"ClientInfo":{}}`, "ClientInfo", "params"},
		{`{"RequestId":1}`, "RequestId", "params"},
		{`{"_meta":{"progressTo\u212aen":"p"}}`, "progressTo\u212aen", "params._meta"},
		{`{"_meta":{"ProgressToken":"p"}}`, "ProgressToken", "params._meta"},
		{`{"_meta":{"io.modelcontextprotocol/protocolversion":"2026-07-28"}}`, "io.modelcontextprotocol/protocolversion", "params._meta"},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"Roots":{}}}}`, "Roots", `params._meta["io.modelcontextprotocol/clientCapabilities"]`},
		{`{"_meta":{"Traceparent":"00-x"}}`, "Traceparent", "params._meta"},
		{`{"RequestState":"s"}`, "RequestState", "params"},
		{`{"taskId":"mcpgw-task1.mine","TaskId":"up-1"}`, "TaskId", "params"},
		{`{"taskid":"up-1"}`, "taskid", "params"},
		{`{"inputresponses":{}}`, "inputresponses", "params"},
		{`{"notifications":{"ToolsListChanged":true}}`, "ToolsListChanged", "params.notifications"},
	}
	for _, tt := range refused {
		_, err := Parse(request(MethodToolsCall, tt.params))
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidRequest {
			t.Errorf("%s: Parse = %v, want -32600", tt.params, err)
			continue
		}
		want := fmt.Sprintf("member %s in %s is a case variant", rawjson.QuoteName(tt.member), tt.where)
		if !strings.Contains(je.Message, want) {
			t.Errorf("%s: message %q, want it to say %q", tt.params, je.Message, want)
		}
	}
	accepted := []string{
		`{"name":"a","arguments":{"NAME":1,"Uri":2,"_META":{}}}`,
		`{"name":"a","arguments":{"name":"x","ref":{"NAME":1}}}`,
		`{"_meta":{"vendor/Name":1,"progressToken":1,"io.modelcontextprotocol/logLevel":"debug"}}`,
		`{"clientInfo":{"NAME":"x","Version":"1"},"capabilities":{"experimental":{"Sampling":{}}}}`,
		`{"uri":"x","name":"y","title":"t","Title":"u"}`,
	}
	for _, p := range accepted {
		if _, err := Parse(request(MethodToolsCall, p)); err != nil {
			t.Errorf("%s: Parse = %v, want accepted", p, err)
		}
	}
}

// The member each routed method names its target by, and the one the
// Mcp-Name header mirrors, are among the interpreted members: the table
// cannot fall behind TargetOf.
func TestInterpretedParamsCoverTheTargets(t *testing.T) {
	has := func(path []string) bool {
		m := InterpretedParams
		for i, k := range path {
			found := false
			for _, n := range m.Names() {
				found = found || n == k
			}
			if !found {
				return false
			}
			if i < len(path)-1 {
				m = m.Inner(k)
			}
		}
		return true
	}
	// Derived from the routing table: a routed method added without its
	// target member among the refused variants fails here. Every form of
	// params that gives a method a target is tried (completion/complete
	// has one per ref type).
	forms := []string{`{}`, `{"ref":{"type":"ref/prompt"}}`, `{"ref":{"type":"ref/resource"}}`}
	routed := RoutedMethods()
	if len(routed) < 10 {
		t.Fatalf("RoutedMethods() = %v: too few", routed)
	}
	for _, method := range routed {
		targets := map[string]bool{}
		for _, params := range forms {
			tg, ok := TargetOf(method, []byte(params))
			if !ok || targets[tg.Field()] {
				continue
			}
			targets[tg.Field()] = true
			if !has(tg.Path) {
				t.Errorf("%s %s: target %v is not in InterpretedParams", method, params, tg.Path)
			}
			// A case variant of the target is refused on that method.
			variant := strings.ToUpper(tg.Path[len(tg.Path)-1][:1]) + tg.Path[len(tg.Path)-1][1:]
			p := `{"` + variant + `":"x"}`
			if len(tg.Path) == 2 {
				p = `{"` + tg.Path[0] + `":{"type":"` + map[Kind]string{KindPrompt: "ref/prompt", KindResource: "ref/resource"}[tg.Kind] + `","` + variant + `":"x"}}`
			}
			if _, err := Parse(request(method, p)); err == nil {
				t.Errorf("%s %s: a case variant of its target is accepted", method, p)
			}
			if f := NameHeaderField(method); f != "" && (f != tg.Field() || !has([]string{f})) {
				t.Errorf("%s: Mcp-Name mirrors %q, the target is %q", method, f, tg.Field())
			}
		}
		if len(targets) == 0 {
			t.Errorf("%s is routed but TargetOf names no target for it", method)
		}
	}
	if !has([]string{"ref", "type"}) || !has([]string{"arguments"}) || !has([]string{"_meta", "progressToken"}) {
		t.Error("ref.type, arguments or _meta.progressToken missing")
	}
}

// What an upstream reads from params: a decoder that keeps the last of
// duplicate members, and one that matches member names case-insensitively.
type upstreamView struct {
	name, uri, refName, refURI, token string
	args                              []byte
}

func lastWins(params []byte) upstreamView {
	var v upstreamView
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return v
	}
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	v.name, v.uri, v.args = str(m["name"]), str(m["uri"]), bytes.TrimSpace(m["arguments"])
	var ref, meta map[string]json.RawMessage
	_ = json.Unmarshal(m["ref"], &ref)
	_ = json.Unmarshal(m["_meta"], &meta)
	v.refName, v.refURI, v.token = str(ref["name"]), str(ref["uri"]), string(bytes.TrimSpace(meta["progressToken"]))
	return v
}

func caseInsensitive(params []byte) upstreamView {
	var s struct {
		Name      string
		URI       string
		Arguments json.RawMessage
		Ref       struct{ Name, URI string }
		Meta      struct{ ProgressToken json.RawMessage } `json:"_meta"`
	}
	_ = json.Unmarshal(params, &s) // type errors still fill the other fields
	return upstreamView{name: s.Name, uri: s.URI, args: s.Arguments, refName: s.Ref.Name, refURI: s.Ref.URI, token: string(s.Meta.ProgressToken)}
}

// gatewayView is what the policy, the audit and the catalog read: the
// target through TargetOf and GetPath (router guard.go target), the
// arguments with Get (guard.go callArguments, audit.go).
func gatewayView(method string, params []byte) (target string, v upstreamView) {
	if t, ok := TargetOf(method, params); ok {
		target, _ = rawjson.GetPath(params, t.Path)
	}
	v.name, _ = rawjson.GetString(params, "name")
	v.uri, _ = rawjson.GetString(params, "uri")
	v.args, _ = rawjson.Get(params, "arguments")
	ref, _ := rawjson.Get(params, "ref")
	v.refName, _ = rawjson.GetString(ref, "name")
	v.refURI, _ = rawjson.GetString(ref, "uri")
	meta, _ := rawjson.Get(params, "_meta")
	tok, _ := rawjson.Get(meta, "progressToken")
	v.token = string(tok)
	return target, v
}

// FuzzOneReading: for any params the gateway accepts, the name, URI and
// arguments it decides on are what a last-wins decoder and a
// case-insensitive struct decoder read upstream, on every routed method.
func FuzzOneReading(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"repo":"acme/x"}}`,
		`{"name":"echo","name":"add"}`,
		`{"name":"echo","n\u0061me":"add"}`,
		`{"name":"ci__safe_tool","NAME":"delete_everything"}`,
		`{"name":"x","arguments":{"repo":"acme/x"},"arguments":{"repo":"evil/x"}}`,
		`{"name":"x","Arguments":{"repo":"evil/x"}}`,
		`{"uri":"mem://a","URI":"mem://b"}`,
		`{"ref":{"type":"ref/prompt","name":"a","Name":"b"},"argument":{"name":"n","value":"v"}}`,
		`{"ref":{"type":"ref/resource","uri":"x"},"ref":{"type":"ref/resource","uri":"y"}}`,
		`{"name":"a","_meta":{"progressToken":1,"progressTo\u212aen":2}}`,
		`{"name":"\u212a","arguments":null}`,
	} {
		for _, m := range []string{MethodToolsCall, MethodPromptsGet, MethodResourcesRead, MethodCompletionComplete} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		switch method {
		case MethodToolsCall, MethodPromptsGet, MethodResourcesRead, MethodResourcesSubscribe, MethodCompletionComplete:
		default:
			return
		}
		msg, err := Parse(request(method, string(params)))
		if err != nil {
			return // refused: nothing is judged, nothing forwarded
		}
		p := []byte(msg.Params)
		target, gw := gatewayView(method, p)
		for _, up := range []struct {
			decoder string
			view    upstreamView
		}{{"last-wins", lastWins(p)}, {"case-insensitive", caseInsensitive(p)}} {
			if gw.name != up.view.name || gw.uri != up.view.uri || gw.refName != up.view.refName || gw.refURI != up.view.refURI {
				t.Fatalf("params %s: the gateway reads name %q uri %q ref %q/%q; a %s decoder %q %q %q/%q",
					p, gw.name, gw.uri, gw.refName, gw.refURI, up.decoder, up.view.name, up.view.uri, up.view.refName, up.view.refURI)
			}
			if !bytes.Equal(gw.args, up.view.args) || gw.token != up.view.token {
				t.Fatalf("params %s: the gateway reads arguments %s token %s; a %s decoder %s %s", p, gw.args, gw.token, up.decoder, up.view.args, up.view.token)
			}
		}
		// The header check reads the target the policy judges.
		if f := NameHeaderField(method); f != "" {
			if h, _ := rawjson.GetString(p, f); h != target {
				t.Fatalf("params %s: Mcp-Name is checked against %q, the policy judges %q", p, h, target)
			}
		}
	})
}
