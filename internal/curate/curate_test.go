package curate

import (
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/principal"
)

func val(s string) *config.CurateValue { return &config.CurateValue{JSON: []byte(s)} }

func display(up, name string) string { return up + "__" + name }

func testSet() *Set {
	return New([]*config.ToolCuration{
		{Tool: "demo__echo", Rename: "say", Description: &config.TextEdit{Replace: "Repeat the given text."}},
		{Tool: "demo__add", Parameters: map[string]*config.ParamCuration{
			"b":    {Fixed: val("10")},
			"c":    {Default: val(`"x"`), Describe: "the c"},
			"repo": {Fixed: val(`"${principal.subject}/r"`)},
		}},
	}, nil, map[string][]*config.ToolCuration{
		"demo": {{Tool: "add", Title: &config.TextEdit{Prepend: "[demo] "}, Annotations: map[string]bool{"readOnlyHint": true}}},
	}, display)
}

// Everything the admin did not change stays byte for byte the upstream's:
// member order, spacing, outputSchema, _meta, icons, unknown members.
func TestDefinitionGolden(t *testing.T) {
	s := testSet()
	def := `{"name":"demo__add", "title":"Add","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"string"}},"required":["a", "b"]},"outputSchema":{"x" : 1},"_meta":{"k":[1,2]},"icons":[],"zz":true}`
	out, missing, err := s.For("demo", "add").Definition([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"demo__add", "title":"[demo] Add","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"c":{"type":"string","default":"x","description":"the c"}},"required":["a"]},"outputSchema":{"x" : 1},"_meta":{"k":[1,2]},"icons":[],"zz":true,"annotations":{"readOnlyHint":true}}`
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if len(missing) != 1 || missing[0] != "repo" {
		t.Fatalf("missing = %v, want [repo]", missing)
	}
	out, _, _ = s.For("demo", "echo").Definition([]byte(`{"name":"demo__echo","description":"Echo.","inputSchema":{"type":"object"}}`))
	if string(out) != `{"name":"say","description":"Repeat the given text.","inputSchema":{"type":"object"}}` {
		t.Fatalf("echo: %s", out)
	}
}

func TestNames(t *testing.T) {
	s := testSet()
	if n, ok := s.Curated("say"); !ok || n != "demo__echo" {
		t.Fatalf("Curated(say) = %q %v", n, ok)
	}
	if to, ok := s.Renamed("demo", "echo"); !ok || to != "say" {
		t.Fatalf("Renamed = %q %v", to, ok)
	}
	if _, ok := s.Renamed("demo", "add"); ok {
		t.Fatal("add is not renamed")
	}
}

// A fixed or hidden parameter sent in any spelling is refused; fixed
// values are set and defaults filled.
func TestArguments(t *testing.T) {
	tool := testSet().For("demo", "add")
	p := &principal.Principal{Subject: "alice"}
	out, jerr := tool.Arguments([]byte(`{"a":5}`), p)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if string(out) != `{"a":5,"b":10,"c":"x","repo":"alice/r"}` {
		t.Fatalf("got %s", out)
	}
	out, _ = tool.Arguments([]byte(`{"a":5,"c":"mine"}`), p)
	if !strings.Contains(string(out), `"c":"mine"`) || strings.Contains(string(out), `"x"`) {
		t.Fatalf("default overrode the caller's: %s", out)
	}
	for _, args := range []string{`{"a":5,"b":1}`, `{"a":5,"B":1}`, `{"a":5,"\u0062":1}`, `{"b":1,"a":5,"b":2}`, `{"REPO":"x"}`} {
		if _, jerr := tool.Arguments([]byte(args), p); jerr == nil || !strings.Contains(jerr.Message, "may not be sent") {
			t.Errorf("%s: got %v, want refused", args, jerr)
		}
	}
	if _, jerr := tool.Arguments([]byte(`{"a":5}`), &principal.Principal{}); jerr == nil {
		t.Error("a principal without a subject filled repo")
	}
}

func TestExposed(t *testing.T) {
	s := New(nil, []string{"demo__e*"}, nil, display)
	if !s.Exposed("demo__echo") || s.Exposed("demo__add") {
		t.Fatal("expose")
	}
}

// A parameter the gateway fills (default) or the caller may not send
// (fixed, hidden) leaves the listed schema's "required", by byte-span
// edits: the other elements keep their spacing and order. A "required"
// left empty is removed (draft-04 schemas forbid an empty one).
func TestDefinitionRequired(t *testing.T) {
	s := New([]*config.ToolCuration{
		{Tool: "demo__add", Parameters: map[string]*config.ParamCuration{
			"b":      {Fixed: val("10")},
			"c":      {Default: val(`"x"`)},
			"d":      {Hide: true},
			"tenant": {Default: val(`"${principal.subject}"`)},
		}},
	}, nil, nil, display)
	tool := s.For("demo", "add")
	for _, tc := range []struct{ in, want string }{
		{
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"tenant":{}},"required":[ "c" , "a",` + "\n" + `"b", "\u0064","tenant" ],"x":1}}`,
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"a":{},"c":{"default":"x"},"tenant":{}},"required":[ "a" ],"x":1}}`,
		},
		{
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"c":{"type":"string"}},"required":["c"], "x":1}}`,
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"c":{"type":"string","default":"x"}}, "x":1}}`,
		},
		{
			`{"name":"demo__add","inputSchema":{"required":["b","c"],"type":"object","properties":{"c":{}}}}`,
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"c":{"default":"x"}}}}`,
		},
		{
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"a":{},"c":{}},"required":["a"]}}`,
			`{"name":"demo__add","inputSchema":{"type":"object","properties":{"a":{},"c":{"default":"x"}},"required":["a"]}}`,
		},
	} {
		out, _, err := tool.Definition([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != tc.want {
			t.Errorf("in   %s\ngot  %s\nwant %s", tc.in, out, tc.want)
		}
	}
}
