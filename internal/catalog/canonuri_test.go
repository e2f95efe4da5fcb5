package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// TestPinTargetRefusesNonCanonicalURIs: a resource URI an upstream's URL
// parser would read as another (dot-segments, escapes, case) is refused
// before policy, naming the form to send; a URI the upstream lists as it
// is still reads (what the gateway hands out works), but only for a
// caller who may see it.
func TestPinTargetRefusesNonCanonicalURIs(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"ev": {resources: []string{`{"uri":"demo://resource/static/document/instructions.md"}`, `{"uri":"demo://resource/odd/../listed"}`},
			templates: []string{`{"uriTemplate":"demo://resource/dynamic/text/{id}"}`}},
		"fs": {resources: []string{`{"uri":"file:///pub/a.md"}`}},
	}
	h := fakeHost(t, ups)
	hideOdd := func(kind mcp.Kind, name string) bool { return !strings.Contains(name, "odd") }
	for _, tc := range []struct {
		name    string
		uri     string
		visible Visible
		errHas  string // "" when it goes through
	}{
		{"canonical", "demo://resource/static/document/instructions.md", nil, ""},
		{"explicit canonical", "ev+demo://resource/dynamic/text/7", nil, ""},
		{"dot-dot", "demo://resource/static/document/x/../instructions.md", nil, "send demo://resource/static/document/instructions.md"},
		{"dot", "demo://resource/static/document/./instructions.md", nil, "send demo://resource/static/document/instructions.md"},
		{"encoded dot", "demo://resource/static/document/%2e/instructions.md", nil, "send demo://resource/static/document/instructions.md"},
		{"explicit encoded dot-dot", "ev+demo://resource/static/document/%2e%2E/../dynamic/text/7", nil, "send ev+demo://resource/dynamic/text/7"},
		{"explicit query form", "demo://resource/static/document/x/../instructions.md?mcpgw=ev", nil, "send demo://resource/static/document/instructions.md?mcpgw=ev"},
		{"explicit query form with a query", "demo://resource/a/../b?mcpgw=ev&q=%7e", nil, "send demo://resource/b?mcpgw=ev&q=~"},
		{"template escape", "demo://resource/dynamic/text/%2e%2e/%2e%2e/static/document/instructions.md", nil, "send demo://resource/static/document/instructions.md"},
		{"scheme and host case", "DEMO://Resource/static/document/instructions.md", nil, "send demo://resource/static/document/instructions.md"},
		{"encoded slash", "demo://resource/static/document%2Finstructions.md", nil, "encoded slash"},
		{"backslash", `file:///pub\..\a.md`, nil, "backslash"},
		{"listed as it is", "demo://resource/odd/../listed", nil, ""},
		{"listed but hidden", "demo://resource/odd/../listed", hideOdd, "send demo://resource/listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(h, nil, true, 0, true)
			params, _ := rawjson.SetString(json.RawMessage(`{}`), "uri", tc.uri)
			for _, method := range []string{mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe} {
				_, _, jerr := v.PinTarget(context.Background(), method, params, tc.visible)
				switch {
				case tc.errHas == "" && jerr != nil:
					t.Errorf("%s %q: %v", method, tc.uri, jerr)
				case tc.errHas != "" && (jerr == nil || !strings.Contains(jerr.Message, tc.errHas) || !strings.Contains(jerr.Message, fmt.Sprintf("%q", tc.uri))):
					t.Errorf("%s %q: %v; want an error naming it and saying %q", method, tc.uri, jerr, tc.errHas)
				}
			}
		})
	}
	// An unprefixed route of one upstream checks too.
	v := newView(h, []string{"fs"}, false, 0, false)
	params, _ := rawjson.SetString(json.RawMessage(`{}`), "uri", "file:///pub/../etc/passwd")
	if _, _, jerr := v.PinTarget(context.Background(), mcp.MethodResourcesRead, params, nil); jerr == nil || !strings.Contains(jerr.Message, "send file:///etc/passwd") {
		t.Errorf("unprefixed route: %v", jerr)
	}
}
