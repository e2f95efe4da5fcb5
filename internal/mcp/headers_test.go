package mcp

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestHeaderValueCodec(t *testing.T) {
	for _, tc := range []struct {
		in, wire string
	}{
		{"us-west1", "us-west1"},
		{"two words", "two words"},
		{"", ""},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"=?base64?x?=", "=?base64?PT9iYXNlNjQ/eD89?="}, // looks like the sentinel: wrapped, so it comes back as written
	} {
		if got := EncodeHeaderValue(tc.in); got != tc.wire {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", tc.in, got, tc.wire)
		}
		if got, err := DecodeHeaderValue(tc.wire); err != nil || got != tc.in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", tc.wire, got, err, tc.in)
		}
	}
	if _, err := DecodeHeaderValue("=?base64?%%%?="); err == nil {
		t.Error("DecodeHeaderValue accepted a sentinel without base64")
	}
}

func TestIsParamHeader(t *testing.T) {
	for key, want := range map[string]bool{
		"Mcp-Param-Region": true, "mcp-param-region": true, "MCP-PARAM-X": true,
		"Mcp-Param-": false, "Mcp-Name": false, "X-Mcp-Param-Region": false,
	} {
		if got := IsParamHeader(key); got != want {
			t.Errorf("IsParamHeader(%q) = %v", key, got)
		}
	}
	if got := ParamHeader("region"); got != "Mcp-Param-Region" {
		t.Errorf("ParamHeader(region) = %q", got)
	}
}

// The mirrored Mcp-Method and Mcp-Name headers a client sets are the ones
// the server's check accepts; any disagreement is -32020.
func TestMirrorHeaders(t *testing.T) {
	params := json.RawMessage(`{"name":"wéird tool","arguments":{}}`)
	h := http.Header{}
	SetMirrorHeaders(h, MethodToolsCall, params)
	if err := CheckMirrorHeaders(h, MethodToolsCall, params); err != nil {
		t.Fatalf("own headers refused: %v (%v)", err, h)
	}
	for name, mutate := range map[string]func(http.Header){
		"method":  func(h http.Header) { h.Set(HeaderMethod, MethodPromptsGet) },
		"name":    func(h http.Header) { h.Set(HeaderName, "other") },
		"missing": func(h http.Header) { h.Del(HeaderName) },
		"bad b64": func(h http.Header) { h.Set(HeaderName, "=?base64?%%?=") },
	} {
		bad := h.Clone()
		mutate(bad)
		if err := CheckMirrorHeaders(bad, MethodToolsCall, params); err == nil || err.Code != CodeHeaderMismatch {
			t.Errorf("%s: CheckMirrorHeaders = %v, want -32020", name, err)
		}
	}
	// A method without a target mirrors only Mcp-Method.
	h = http.Header{}
	SetMirrorHeaders(h, MethodToolsList, nil)
	if h.Get(HeaderName) != "" || CheckMirrorHeaders(h, MethodToolsList, nil) != nil {
		t.Errorf("tools/list headers %v", h)
	}
}

const headerSchema = `{"type":"object","properties":{
  "region":{"type":"string","x-mcp-header":"Region"},
  "count":{"type":"integer","x-mcp-header":"Count"},
  "dry":{"type":"boolean","x-mcp-header":"Dry"},
  "opts":{"type":"object","properties":{"tenant":{"type":"string","x-mcp-header":"Tenant"}}},
  "list":{"type":"array","items":{"type":"string","x-mcp-header":"Ignored"}},
  "plain":{"type":"string"}}}`

func TestHeaderParams(t *testing.T) {
	got := HeaderParams(json.RawMessage(headerSchema))
	want := map[string]string{"Region": "region", "Count": "count", "Dry": "dry", "Tenant": "opts.tenant"}
	if len(got) != len(want) {
		t.Fatalf("HeaderParams = %+v, want %v (items are not properties)", got, want)
	}
	for _, hp := range got {
		path := ""
		for i, k := range hp.Path {
			if i > 0 {
				path += "."
			}
			path += k
		}
		if want[hp.Header] != path {
			t.Errorf("header %s at %s, want %s", hp.Header, path, want[hp.Header])
		}
	}
}

// TestHeaderParamsSpelled: an annotation found however its key is
// spelled (mayAnnotate skips only schemas that cannot hold one).
func TestHeaderParamsSpelled(t *testing.T) {
	for schema, want := range map[string]int{
		`{"properties":{"q":{"type":"string"}}}`:                                  0,
		`{"properties":{"q":{"type":"string","x-mcp-header":"Q"}}}`:               1,
		`{"properties":{"q":{"type":"string","\u0078-mcp-header":"Q"}}}`:          1,
		`{"properties":{"q":{"type":"string","x-mcp-head\u0065r":"Q"}}}`:          1,
		`{"properties":{"q":{"type":"string","description":"\u00e9 no header"}}}`: 0,
	} {
		if got := len(HeaderParams(json.RawMessage(schema))); got != want {
			t.Errorf("HeaderParams(%s): %d annotations, want %d", schema, got, want)
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	schema := json.RawMessage(headerSchema)
	for _, tc := range []struct {
		name    string
		args    string
		headers map[string][]string
		ok      bool
	}{
		{"all agree", `{"region":"eu","count":42,"dry":true,"opts":{"tenant":"Ada"}}`,
			map[string][]string{"Mcp-Param-Region": {"eu"}, "Mcp-Param-Count": {"42.0"}, "Mcp-Param-Dry": {"true"}, "Mcp-Param-Tenant": {"Ada"}}, true},
		{"omitted argument needs no header", `{"plain":"x"}`, nil, true},
		{"null argument needs no header", `{"region":null}`, nil, true},
		{"sentinel decoded", `{"region":"Zürich"}`, map[string][]string{"Mcp-Param-Region": {EncodeHeaderValue("Zürich")}}, true},
		{"missing header", `{"region":"eu"}`, nil, false},
		{"two values", `{"region":"eu"}`, map[string][]string{"Mcp-Param-Region": {"eu", "eu"}}, false},
		{"different value", `{"region":"eu"}`, map[string][]string{"Mcp-Param-Region": {"us"}}, false},
		{"number differs", `{"count":42}`, map[string][]string{"Mcp-Param-Count": {"43"}}, false},
		{"boolean spelled otherwise", `{"dry":true}`, map[string][]string{"Mcp-Param-Dry": {"True"}}, false},
		{"raw non-ASCII", `{"region":"Zürich"}`, map[string][]string{"Mcp-Param-Region": {"Zürich"}}, false},
		{"broken sentinel", `{"region":"eu"}`, map[string][]string{"Mcp-Param-Region": {"=?base64?!!?="}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header(tc.headers)
			err := CheckParamHeaders(schema, json.RawMessage(tc.args), h)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckParamHeaders = %v, want ok %v", err, tc.ok)
			}
			if err != nil && err.Code != CodeHeaderMismatch {
				t.Errorf("code %d, want %d", err.Code, CodeHeaderMismatch)
			}
		})
	}
	var _ *jsonrpc.Error = CheckParamHeaders(nil, nil, nil) // a tool without a schema checks nothing
}

func TestListenFilter(t *testing.T) {
	f := ListenFilter{ToolsListChanged: true}
	if !f.Wants(NotificationToolsListChanged) || f.Wants(NotificationPromptsChanged) || f.Wants(NotificationResourceUpdated) {
		t.Errorf("Wants: %+v", f)
	}
	if f.Empty() || !(ListenFilter{}).Empty() || (ListenFilter{ResourceSubscriptions: []string{"u"}}).Empty() {
		t.Error("Empty")
	}
}

// TestHeaderParamsLenient: the caller-header check skips an annotation
// that is not a non-empty string, where ValidHeaderParams refuses the
// schema; on a valid schema both find the same annotations.
func TestHeaderParamsLenient(t *testing.T) {
	for schema, want := range map[string]int{
		`{"properties":{"q":{"type":"string","x-mcp-header":5}}}`:                                             0,
		`{"properties":{"q":{"type":"string","x-mcp-header":""}}}`:                                            0,
		`{"properties":{"q":{"type":"string","x-mcp-header":null},"r":{"type":"string","x-mcp-header":"R"}}}`: 1,
	} {
		if got := len(HeaderParams(json.RawMessage(schema))); got != want {
			t.Errorf("HeaderParams(%s): %d annotations, want %d", schema, got, want)
		}
		if _, err := ValidHeaderParams(json.RawMessage(schema)); err == nil {
			t.Errorf("ValidHeaderParams(%s) accepted it", schema)
		}
	}
	valid, err := ValidHeaderParams(json.RawMessage(headerSchema))
	if err != nil {
		t.Fatal(err)
	}
	if lenient := HeaderParams(json.RawMessage(headerSchema)); !reflect.DeepEqual(valid, lenient) {
		t.Errorf("ValidHeaderParams = %+v, HeaderParams = %+v", valid, lenient)
	}
}
