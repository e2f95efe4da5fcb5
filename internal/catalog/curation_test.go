package catalog

import (
	"context"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Curated definitions through the list path, byte for byte: the upstream's
// bytes except the members the rules change, on a prefixed and on an
// unprefixed route; a tool expose leaves out is neither listed nor
// resolved; the curated name resolves to the upstream's tool and the old
// one to nothing (PinParams).
func TestCuratedListGolden(t *testing.T) {
	echo := `{"name":"echo" ,"description":"Echo.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"outputSchema":{"a" : [1,2]},"_meta":{"k":"v"},"icons":[{"src":"x"}],"x-unknown":{"deep":[true]}}`
	add := `{"name":"add","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}`
	other := `{"name":"other","inputSchema":{"type":"object"}}`
	h := fakeHostWith(t, map[string]*fakeUpstream{"demo": {tools: []string{echo, add, other}}}, func(_ string, u *config.Upstream) {
		u.Curate = []*config.ToolCuration{{Tool: "add", Parameters: map[string]*config.ParamCuration{"b": {Fixed: &config.CurateValue{JSON: []byte("10")}}}}}
	})
	off := false
	for _, tc := range []struct {
		route      *config.Route
		echo, add  string
		old, fresh string
	}{
		{
			route: &config.Route{Path: "/mcp", Tools: &config.RouteTools{Expose: []string{"demo__echo", "demo__add"},
				Curate: []*config.ToolCuration{{Tool: "demo__echo", Rename: "say", Description: &config.TextEdit{Replace: "Repeat the given text."}}}}},
			echo: `{"name":"say" ,"description":"Repeat the given text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"outputSchema":{"a" : [1,2]},"_meta":{"k":"v"},"icons":[{"src":"x"}],"x-unknown":{"deep":[true]}}`,
			add:  `{"name":"demo__add","inputSchema":{"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}}`,
			old:  "demo__echo", fresh: "say",
		},
		{
			route: &config.Route{Path: "/one", Prefix: &off, Tools: &config.RouteTools{Expose: []string{"echo", "add"},
				Curate: []*config.ToolCuration{{Tool: "echo", Rename: "say", Description: &config.TextEdit{Append: " Twice."}}}}},
			echo: `{"name":"say" ,"description":"Echo. Twice.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"outputSchema":{"a" : [1,2]},"_meta":{"k":"v"},"icons":[{"src":"x"}],"x-unknown":{"deep":[true]}}`,
			add:  `{"name":"add","inputSchema":{"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}}`,
			old:  "echo", fresh: "say",
		},
	} {
		v := RouteView(h, tc.route)
		pages, raw := listPages(t, v, Tools)
		if len(pages) != 1 || len(raw) != 2 {
			t.Fatalf("%s: listed %v, want echo and add only (other is not exposed)", tc.route.Path, pages)
		}
		if string(raw[0]) != tc.echo || string(raw[1]) != tc.add {
			t.Errorf("%s: listed\n%s\n%s\nwant\n%s\n%s", tc.route.Path, raw[0], raw[1], tc.echo, tc.add)
		}
		ctx := context.Background()
		p := mcp.ReadParams(mcp.MethodToolsCall, []byte(`{"name":"`+tc.fresh+`","arguments":{}}`))
		_, tgt, jerr := v.PinParams(ctx, mcp.MethodToolsCall, p, nil)
		if jerr != nil || tgt.Upstream != "demo" || tgt.Internal != "echo" {
			t.Errorf("%s: %s resolves to %+v %v, want demo's echo", tc.route.Path, tc.fresh, tgt, jerr)
		}
		// Tool search finds it by its curated name and description, and
		// shows it as listed; what expose leaves out is not found.
		for _, q := range []string{"say", "repeat given", "twice"} {
			hits, jerr := v.SearchTools(ctx, q, "", 5, func(string, []byte) bool { return true }, nil)
			if q == "repeat given" && tc.route.Path == "/one" || q == "twice" && tc.route.Path == "/mcp" {
				continue // this route's rule does not say so
			}
			if jerr != nil || len(hits) == 0 || hits[0].Name != "say" || string(hits[0].Item) != tc.echo {
				t.Errorf("%s: search %q: %+v %v, want say first", tc.route.Path, q, hits, jerr)
			}
		}
		if hits, _ := v.SearchTools(ctx, "other", "", 5, func(string, []byte) bool { return true }, nil); len(hits) != 0 {
			t.Errorf("%s: search found %s, which is not exposed", tc.route.Path, hits[0].Name)
		}
		for _, name := range []string{tc.old, "demo__other", "other"} {
			p := mcp.ReadParams(mcp.MethodToolsCall, []byte(`{"name":"`+name+`","arguments":{}}`))
			if _, _, jerr := v.PinParams(ctx, mcp.MethodToolsCall, p, nil); jerr == nil {
				t.Errorf("%s: %s resolved; want unknown (renamed or not exposed)", tc.route.Path, name)
			}
		}
	}
}
