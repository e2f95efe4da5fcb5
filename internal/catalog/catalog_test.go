package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// listPages follows a merged list to its end and returns each page's
// items (raw) and their identifying strings.
func listPages(t *testing.T, v *View, kind ListKind) (pages [][]string, raw [][]byte) {
	t.Helper()
	ctx := context.Background()
	params := json.RawMessage(`{}`)
	for range 1000 {
		res, jerr := v.List(ctx, kind, params)
		if jerr != nil {
			t.Fatalf("%s: %v", kind.Method, jerr)
		}
		arr, _ := rawjson.Get(res, kind.Key)
		elems, err := rawjson.Elements(arr)
		if err != nil {
			t.Fatalf("%s result %s: %v", kind.Method, res, err)
		}
		var ids []string
		for _, e := range elems {
			id, _ := rawjson.GetString(e, kind.Field)
			ids = append(ids, id)
		}
		pages = append(pages, ids)
		raw = append(raw, elems...)
		next, ok := rawjson.GetString(res, "nextCursor")
		if !ok {
			return pages, raw
		}
		params, _ = rawjson.SetString(json.RawMessage(`{}`), "cursor", next)
	}
	t.Fatalf("%s does not end", kind.Method)
	return nil, nil
}

func TestListFillsPages(t *testing.T) {
	counts := []int{3, 5, 1, 7, 5} // 21 tools, as in the Inspector report
	names := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name        string
		upPageSize  map[string]int // upstreams that paginate
		pageSize    int
		wantPages   []int // items per downstream page
		upstreamCap int   // items of a large upstream added as "f", 0: none
	}{
		{name: "no upstream paginates: one page", wantPages: []int{21}},
		{name: "upstreams paginate: still one page", upPageSize: map[string]int{"b": 2, "d": 3}, wantPages: []int{21}},
		{name: "page size reached: whole upstream pages", pageSize: 6, wantPages: []int{3, 6, 7, 5}},
		{name: "page size reached inside a paginating upstream", pageSize: 6, upPageSize: map[string]int{"d": 3}, wantPages: []int{3, 6, 6, 6}},
		{name: "an upstream pages further than one page follows", upPageSize: map[string]int{"f": 1}, upstreamCap: 100,
			// Page 1: the six first pages, then f's next ones up to the bound.
			wantPages: []int{21 + maxUpstreamPages - 5, 100 - (maxUpstreamPages - 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ups := map[string]*fakeUpstream{}
			var want []string
			all := names
			if tc.upstreamCap > 0 {
				all = append(slices.Clone(names), "f")
			}
			for i, n := range all {
				c := tc.upstreamCap
				if i < len(counts) {
					c = counts[i]
				}
				ups[n] = &fakeUpstream{tools: items("name", "tool", c), pageSize: tc.upPageSize[n]}
				for j := range c {
					want = append(want, fmt.Sprintf("%s__tool%02d", n, j))
				}
			}
			h := fakeHost(t, ups)
			v := newView(h, nil, true, tc.pageSize, true)
			pages, raw := listPages(t, v, Tools)
			var got []string
			var sizes []int
			for _, p := range pages {
				got = append(got, p...)
				sizes = append(sizes, len(p))
			}
			if !slices.Equal(got, want) {
				t.Errorf("tools:\n got %v\nwant %v", got, want)
			}
			if !slices.Equal(sizes, tc.wantPages) {
				t.Errorf("page sizes %v, want %v", sizes, tc.wantPages)
			}
			// Byte-identical items: only the name changed.
			for i, it := range raw {
				up, _, _ := strings.Cut(got[i], "__")
				orig, _ := rawjson.SetString([]byte(ups[up].tools[i-offset(want, up)]), "name", got[i])
				if string(it) != string(orig) {
					t.Fatalf("item %d = %s, want %s", i, it, orig)
				}
			}
		})
	}
}

// offset is the index of upstream up's first item in want.
func offset(want []string, up string) int {
	return slices.IndexFunc(want, func(s string) bool { return strings.HasPrefix(s, up+"__") })
}

func TestListEveryKindFills(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"a": {prompts: items("name", "p", 2), resources: items("uri", "mem://a/", 3), templates: items("uriTemplate", "mem://a/t{x}", 1)},
		"b": {prompts: items("name", "p", 4), resources: items("uri", "mem://b/", 2), templates: items("uriTemplate", "mem://b/t{x}", 2), pageSize: 1},
		"c": {tools: items("name", "t", 1)}, // offers none of them
	}
	h := fakeHost(t, ups)
	v := NewView(h, nil, true)
	for _, tc := range []struct {
		kind ListKind
		want []string
	}{
		{Prompts, []string{"a__p00", "a__p01", "b__p00", "b__p01", "b__p02", "b__p03"}},
		{Resources, []string{"mem://a/00", "mem://a/01", "mem://a/02", "mem://b/00", "mem://b/01"}},
		{ResourceTemplates, []string{"mem://a/t{x}00", "mem://b/t{x}00", "mem://b/t{x}01"}},
	} {
		pages, _ := listPages(t, v, tc.kind)
		if len(pages) != 1 || !slices.Equal(pages[0], tc.want) {
			t.Errorf("%s pages %v, want one page %v", tc.kind.Method, pages, tc.want)
		}
	}
}

func TestListKeepsUpstreamMembersAndHints(t *testing.T) {
	ups := map[string]*fakeUpstream{"a": {tools: items("name", "t", 2)}}
	h := fakeHost(t, ups)
	// Unprefixed, one page: the upstream's result as it was, less its cursor.
	res, jerr := NewView(h, nil, false).List(context.Background(), Tools, nil)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if want := `{"tools":[` + strings.Join(ups["a"].tools, ",") + `],"x-upstream-member":1}`; string(res) != want {
		t.Errorf("unprefixed page\n got %s\nwant %s", res, want)
	}
	// Several pages: the first one's members, the hints that hold for all.
	ups2 := map[string]*fakeUpstream{
		"a": {tools: items("name", "t", 1), handleList: `,"ttlMs":60000,"cacheScope":"public","_meta":{"first":true}`},
		"b": {tools: items("name", "t", 1), handleList: `,"ttlMs":5000,"cacheScope":"private","_meta":{"second":true}`},
		"c": {tools: items("name", "t", 1)},
	}
	res, jerr = NewView(fakeHost(t, ups2), nil, true).List(context.Background(), Tools, nil)
	if jerr != nil {
		t.Fatal(jerr)
	}
	for _, m := range []string{`"x-upstream-member":1`, `"ttlMs":5000`, `"cacheScope":"private"`, `"_meta":{"first":true}`} {
		if !strings.Contains(string(res), m) {
			t.Errorf("merged page %s lacks %s", res, m)
		}
	}
}

func TestListCursorErrors(t *testing.T) {
	h := fakeHost(t, map[string]*fakeUpstream{"a": {tools: items("name", "t", 3), prompts: items("name", "p", 1), pageSize: 1}})
	v := newView(h, nil, true, 1, true)
	res, jerr := v.List(context.Background(), Tools, nil)
	if jerr != nil {
		t.Fatal(jerr)
	}
	good, ok := rawjson.GetString(res, "nextCursor")
	if !ok {
		t.Fatalf("page of 1 with 3 tools has no nextCursor: %s", res)
	}
	tampered := []byte(good)
	tampered[len(tampered)/2] ^= 2
	for _, tc := range []struct{ name, cursor, want string }{
		{"not base64", "not a cursor!", "not a nextCursor this gateway issued"},
		{"tampered", string(tampered), "not a nextCursor this gateway issued"},
		{"forged without checksum", "eyJ2IjoxLCJrIjoidG9vbHMiLCJ1IjoiYSJ9", "not a nextCursor this gateway issued"},
		{"another list's", encodeCursor(cursor{Kind: Prompts.Key, Upstream: "a"}), "it continues prompts/list, not tools/list"},
		{"upstream gone", encodeCursor(cursor{Kind: Tools.Key, Upstream: "gone"}), `upstream "gone" is no longer on this route`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := rawjson.SetString(json.RawMessage(`{}`), "cursor", tc.cursor)
			_, jerr := v.List(context.Background(), Tools, p)
			if jerr == nil || jerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(jerr.Message, tc.want) || !strings.Contains(jerr.Message, "invalid cursor") {
				t.Errorf("List with %s cursor: %v, want -32602 saying %q", tc.name, jerr, tc.want)
			}
		})
	}
}

func read(t *testing.T, v *View, uri string) (*jsonrpc.Message, *jsonrpc.Error) {
	t.Helper()
	p, _ := rawjson.SetString(json.RawMessage(`{}`), "uri", uri)
	return v.Forward(context.Background(), mcp.MethodResourcesRead, p, client.CallOptions{})
}

// readHandler answers resources/read with the URI it was asked for, and
// -32002 for "missing" URIs.
func readHandler(name string) func(string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return func(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		uri, _ := rawjson.GetString(params, "uri")
		if strings.Contains(uri, "missing") {
			d, _ := json.Marshal(map[string]string{"uri": uri})
			return nil, &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "no " + uri + " here", Data: d}
		}
		b, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": uri, "text": name}}})
		return b, nil
	}
}

func namingHost(t *testing.T, more ...func(map[string]*fakeUpstream)) (*host.Host, map[string]*fakeUpstream) {
	ups := map[string]*fakeUpstream{
		"basic": {resources: []string{`{"uri":"ui://get-time/mcp-app.html","mimeType":"text/html;profile=mcp-app"}`, `{"uri":"file:///notes.md"}`},
			templates: []string{`{"uriTemplate":"mem://items/{id}"}`, `{"uriTemplate":"file:///{name}"}`}},
		"budget": {resources: []string{`{"uri":"ui://get-time/mcp-app.html"}`, `{"uri":"https://example.com/x"}`}},
		"fs":     {templates: []string{`{"uriTemplate":"file:///{path}"}`, `{"uriTemplate":"fs://{+p}"}`}},
		"tools":  {tools: items("name", "t", 1)},
	}
	for name, u := range ups {
		u.handle = readHandler(name)
	}
	for _, m := range more {
		m(ups)
	}
	return fakeHost(t, ups), ups
}

func TestURINaming(t *testing.T) {
	h, ups := namingHost(t)
	v := NewView(h, nil, true)
	// Unique URIs are the upstream's own; only the shared one is explicit,
	// and keeps its scheme.
	pages, _ := listPages(t, v, Resources)
	if want := []string{"ui://get-time/mcp-app.html?mcpgw=basic", "file:///notes.md", "ui://get-time/mcp-app.html?mcpgw=budget", "https://example.com/x"}; !slices.Equal(pages[0], want) {
		t.Errorf("resources %v, want %v", pages[0], want)
	}
	pages, _ = listPages(t, v, ResourceTemplates)
	// Distinct templates are unique, even where their expansions overlap
	// (a read of such an expansion is what is ambiguous, below).
	if want := []string{"mem://items/{id}", "file:///{name}", "file:///{path}", "fs://{+p}"}; !slices.Equal(pages[0], want) {
		t.Errorf("templates %v, want %v", pages[0], want)
	}
	for _, tc := range []struct {
		name, uri    string
		upstream     string // "" for an error
		internal     string
		errCode      int
		errHas       []string
		contentsURI  string // how the read result names it (default uri)
		canonicalURI string
	}{
		{name: "unique ui", uri: "file:///notes.md", upstream: "basic", internal: "file:///notes.md"},
		{name: "unique https", uri: "https://example.com/x", upstream: "budget", internal: "https://example.com/x"},
		{name: "explicit shared", uri: "ui://get-time/mcp-app.html?mcpgw=budget", upstream: "budget", internal: "ui://get-time/mcp-app.html"},
		{name: "shared, raw", uri: "ui://get-time/mcp-app.html", errCode: jsonrpc.CodeInvalidParams,
			errHas: []string{"served by 2 upstreams", "ui://get-time/mcp-app.html?mcpgw=basic or ui://get-time/mcp-app.html?mcpgw=budget"}},
		{name: "one upstream's template", uri: "mem://items/7", upstream: "basic", internal: "mem://items/7"},
		{name: "reserved expansion", uri: "fs://a/b/c", upstream: "fs", internal: "fs://a/b/c"},
		{name: "two upstreams' templates", uri: "file:///a.txt", errCode: jsonrpc.CodeInvalidParams,
			errHas: []string{"file:///a.txt?mcpgw=basic or file:///a.txt?mcpgw=fs"}},
		{name: "explicit expansion", uri: "file:///a.txt?mcpgw=fs", upstream: "fs", internal: "file:///a.txt", contentsURI: "file:///a.txt?mcpgw=fs"},
		{name: "canonical form still reads", uri: "budget+https://example.com/x", upstream: "budget", internal: "https://example.com/x", contentsURI: "https://example.com/x"},
		{name: "nothing has it", uri: "zz://nothing", errCode: mcp.CodeResourceNotFound, errHas: []string{`"zz://nothing?mcpgw=<upstream>"`}},
		{name: "upstream's not-found, named as shown", uri: "mem://items/missing", errCode: mcp.CodeResourceNotFound, errHas: []string{"no mem://items/missing here"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]int{}
			for n, u := range ups {
				before[n] = len(u.requests())
			}
			resp, jerr := read(t, v, tc.uri)
			if tc.upstream == "" {
				e := jerr
				if e == nil && resp != nil {
					e = resp.Error
				}
				if e == nil || e.Code != tc.errCode {
					t.Fatalf("read %q = %v, %v; want error %d", tc.uri, resp, jerr, tc.errCode)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(e.Message, s) {
						t.Errorf("error %q does not say %q", e.Message, s)
					}
				}
				return
			}
			if jerr != nil || resp.Error != nil {
				t.Fatalf("read %q: %v %v", tc.uri, jerr, resp.Error)
			}
			got := ups[tc.upstream].requests()
			if len(got) != before[tc.upstream]+1 {
				t.Fatalf("%s got %d requests, want 1 more than %d", tc.upstream, len(got), before[tc.upstream])
			}
			if uri, _ := rawjson.GetString(got[len(got)-1].params, "uri"); uri != tc.internal {
				t.Errorf("%s was asked for %q, want %q", tc.upstream, uri, tc.internal)
			}
			want := tc.contentsURI
			if want == "" {
				want = tc.uri
			}
			if !strings.Contains(string(resp.Result), `"uri":"`+want+`"`) {
				t.Errorf("read result %s: want contents named %q", resp.Result, want)
			}
			canon, err := v.Canonical(context.Background(), mcp.KindResource, tc.uri)
			if err != nil || canon != tc.upstream+"+"+tc.internal {
				t.Errorf("Canonical(%q) = %q, %v", tc.uri, canon, err)
			}
		})
	}
	// The not-found error names the URI as the route does.
	resp, _ := read(t, v, "mem://items/missing")
	if d, _ := rawjson.GetString(resp.Error.Data, "uri"); d != "mem://items/missing" {
		t.Errorf("not-found data.uri %q", d)
	}
}

func TestUnlistedURIGoesToTheOnlyResourceUpstream(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"docs":  {resources: []string{`{"uri":"doc://a"}`}},
		"tools": {tools: items("name", "t", 1)},
	}
	ups["docs"].handle = readHandler("docs")
	h := fakeHost(t, ups)
	v := NewView(h, nil, true)
	resp, jerr := read(t, v, "doc://unlisted")
	if jerr != nil || resp.Error != nil || !strings.Contains(string(resp.Result), `"text":"docs"`) {
		t.Fatalf("unlisted read = %v %v", resp, jerr)
	}
	if got := v.External(true, "docs", "doc://unlisted"); got != "doc://unlisted" {
		t.Errorf("unlisted URI of the only resource upstream shown as %q", got)
	}
	// A URI a tools-only upstream hands out would read elsewhere: explicit.
	if got := v.External(true, "tools", "doc://unlisted"); got != "doc://unlisted?mcpgw=tools" {
		t.Errorf("tools' URI shown as %q", got)
	}
}

func TestResultURIsNamed(t *testing.T) {
	result := `{"content":[{"type":"text","text":"ui://get-time/mcp-app.html"},` +
		`{"type":"resource_link","uri":"ui://get-time/mcp-app.html","name":"app"},` +
		`{"type":"resource_link","uri":"file:///notes.md","name":"notes"},` +
		`{"type":"resource","resource":{"uri":"mem://items/3","text":"three"}}],` +
		`"structuredContent":{"uri":"ui://get-time/mcp-app.html"},"_meta":{"ui":{"resourceUri":"ui://get-time/mcp-app.html"}}}`
	prompt := `{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"ui://get-time/mcp-app.html","text":"x"}}},` +
		`{"role":"user","content":[{"type":"resource_link","uri":"ui://get-time/mcp-app.html"}]}]}`
	h, _ := namingHost(t, func(ups map[string]*fakeUpstream) {
		b := ups["basic"]
		b.tools = []string{
			`{"name":"clock","_meta":{"ui":{"resourceUri":"ui://get-time/mcp-app.html","visibility":["model"]}},"inputSchema":{"type":"object"}}`,
			`{"name":"legacy","_meta":{"ui/resourceUri":"file:///notes.md"}}`,
		}
		b.prompts = []string{`{"name":"p"}`}
		b.handle = func(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			switch method {
			case mcp.MethodToolsCall:
				return json.RawMessage(result), nil
			case mcp.MethodPromptsGet:
				return json.RawMessage(prompt), nil
			}
			return readHandler("basic")(method, params)
		}
	})
	v := NewView(h, nil, true)
	ctx := context.Background()

	app := "ui://get-time/mcp-app.html?mcpgw=basic"
	tools, _ := listPages(t, v, Tools)
	_, raw := listPages(t, v, Tools)
	if len(tools[0]) != 3 {
		t.Fatalf("tools %v", tools)
	}
	if want := `{"name":"basic__clock","_meta":{"ui":{"resourceUri":"` + app + `","visibility":["model"]}},"inputSchema":{"type":"object"}}`; string(raw[0]) != want {
		t.Errorf("tool item\n got %s\nwant %s", raw[0], want)
	}
	if want := `{"name":"basic__legacy","_meta":{"ui/resourceUri":"file:///notes.md"}}`; string(raw[1]) != want {
		t.Errorf("legacy tool item\n got %s\nwant %s", raw[1], want)
	}

	resp, jerr := v.Forward(ctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"basic__clock","arguments":{}}`), client.CallOptions{})
	if jerr != nil {
		t.Fatal(jerr)
	}
	want := strings.NewReplacer(`"resource_link","uri":"ui://get-time/mcp-app.html"`, `"resource_link","uri":"`+app+`"`,
		`"resourceUri":"ui://get-time/mcp-app.html"`, `"resourceUri":"`+app+`"`).Replace(result)
	if string(resp.Result) != want {
		t.Errorf("tool result\n got %s\nwant %s", resp.Result, want)
	}
	resp, jerr = v.Forward(ctx, mcp.MethodPromptsGet, json.RawMessage(`{"name":"basic__p"}`), client.CallOptions{})
	if jerr != nil {
		t.Fatal(jerr)
	}
	if want := strings.ReplaceAll(prompt, `"uri":"ui://get-time/mcp-app.html"`, `"uri":"`+app+`"`); string(resp.Result) != want {
		t.Errorf("prompt result\n got %s\nwant %s", resp.Result, want)
	}
	// Every URI handed out reads back from its upstream.
	for _, uri := range []string{app, "file:///notes.md", "mem://items/3"} {
		resp, jerr := read(t, v, uri)
		if jerr != nil || resp.Error != nil || !strings.Contains(string(resp.Result), `"text":"basic"`) {
			t.Errorf("read %q: %v %v", uri, resp, jerr)
		}
	}
}

func TestBareNames(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"a": {tools: []string{`{"name":"echo"}`, `{"name":"only_a"}`, `{"name":"b__x"}`}},
		"b": {tools: []string{`{"name":"echo"}`, `{"name":"x"}`}, prompts: []string{`{"name":"greet"}`}},
	}
	for _, u := range ups {
		u.handle = func(string, json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			return json.RawMessage(`{"content":[]}`), nil
		}
	}
	h := fakeHost(t, ups)
	hideB := func(kind mcp.Kind, name string) bool { return !strings.HasPrefix(name, "b__") }
	for _, tc := range []struct {
		name     string
		bare     bool
		method   string
		target   string
		visible  Visible
		upstream string // "" for an error
		internal string
		errHas   string
	}{
		{"unique bare tool", true, mcp.MethodToolsCall, "only_a", nil, "a", "only_a", ""},
		{"prefixed tool", true, mcp.MethodToolsCall, "b__echo", nil, "b", "echo", ""},
		{"prefixed wins over a bare name with the separator", true, mcp.MethodToolsCall, "b__x", nil, "b", "x", ""},
		{"ambiguous bare tool", true, mcp.MethodToolsCall, "echo", nil, "", "", "use its prefixed name: a__echo or b__echo"},
		{"ambiguous among what the caller sees is not", true, mcp.MethodToolsCall, "echo", hideB, "a", "echo", ""},
		{"a hidden one is unknown", true, mcp.MethodToolsCall, "x", hideB, "", "", `unknown tool "x"`},
		{"unique bare prompt", true, mcp.MethodPromptsGet, "greet", nil, "b", "greet", ""},
		{"bare names off", false, mcp.MethodToolsCall, "only_a", nil, "", "", `unknown tool "only_a": names on this route have the form <upstream>__<name>`},
		{"unknown bare", true, mcp.MethodToolsCall, "nothing", nil, "", "", "a bare name works while exactly one upstream has it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(h, nil, true, 0, tc.bare)
			ctx := context.Background()
			params, _ := rawjson.SetString(json.RawMessage(`{"arguments":{"k":1}}`), "name", tc.target)
			pinned, jerr := v.Pin(ctx, tc.method, params, tc.visible)
			if tc.upstream == "" {
				if jerr == nil || !strings.Contains(jerr.Message, tc.errHas) {
					t.Fatalf("Pin(%q) = %s, %v; want an error saying %q", tc.target, pinned, jerr, tc.errHas)
				}
				if strings.Contains(tc.errHas, " or ") {
					var d struct{ Candidates []string }
					if json.Unmarshal(jerr.Data, &d) != nil || len(d.Candidates) != 2 {
						t.Errorf("error data %s: want the two candidates", jerr.Data)
					}
				}
				return
			}
			if jerr != nil {
				t.Fatal(jerr)
			}
			canonical := tc.upstream + "__" + tc.internal
			if want, _ := rawjson.SetString(params, "name", canonical); string(pinned) != string(want) {
				t.Errorf("pinned %s, want %s", pinned, want)
			}
			// PinTarget hands back the name the pinned params carry.
			if p2, name, jerr := v.PinTarget(ctx, tc.method, params, tc.visible); jerr != nil || string(p2) != string(pinned) || name != canonical {
				t.Errorf("PinTarget = %s, %q, %v; want %s, %q", p2, name, jerr, pinned, canonical)
			}
			if tc.visible == nil {
				if c, err := v.Canonical(ctx, kindOf(tc.method), tc.target); err != nil || c != canonical {
					t.Errorf("Canonical(%q) = %q, %v; want %q", tc.target, c, err, canonical)
				}
			}
			if tc.method == mcp.MethodToolsCall && tc.visible == nil {
				up, def, ok := v.Tool(ctx, tc.target)
				if name, _ := rawjson.GetString(def, "name"); !ok || up != tc.upstream || name != tc.internal {
					t.Errorf("Tool(%q) = %s %s %v", tc.target, up, def, ok)
				}
			}
			n := len(ups[tc.upstream].requests())
			if _, jerr := v.Forward(ctx, tc.method, pinned, client.CallOptions{}); jerr != nil {
				t.Fatal(jerr)
			}
			got := ups[tc.upstream].requests()
			if len(got) != n+1 {
				t.Fatalf("%s got no request", tc.upstream)
			}
			if want, _ := rawjson.SetString(params, "name", tc.internal); string(got[n].params) != string(want) {
				t.Errorf("%s got %s, want %s", tc.upstream, got[n].params, want)
			}
		})
	}
}

func kindOf(method string) mcp.Kind {
	t, _ := mcp.TargetOf(method, nil)
	return t.Kind
}

func TestNamingAsUpstreamsChange(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"a": {resources: []string{`{"uri":"ui://app/x.html"}`}},
		"b": {resources: []string{`{"uri":"mem://b"}`}},
	}
	for n, u := range ups {
		u.handle = readHandler(n)
	}
	h := fakeHost(t, ups)
	v := NewView(h, nil, true)
	explicitA := "ui://app/x.html?mcpgw=a"
	for _, uri := range []string{"ui://app/x.html", explicitA} {
		if resp, jerr := read(t, v, uri); jerr != nil || resp.Error != nil {
			t.Fatalf("before the collision, read %q: %v %v", uri, jerr, resp)
		}
	}
	if got := v.External(true, "a", "ui://app/x.html"); got != "ui://app/x.html" {
		t.Fatalf("unique URI shown as %q", got)
	}
	// b comes to list the same URI and says so.
	ups["b"].setResources([]string{`{"uri":"mem://b"}`, `{"uri":"ui://app/x.html"}`})
	Changed(h, "b", mcp.NotificationResourcesChanged)
	pages, _ := listPages(t, v, Resources)
	if want := []string{explicitA, "mem://b", "ui://app/x.html?mcpgw=b"}; !slices.Equal(pages[0], want) {
		t.Errorf("after the collision: %v, want %v", pages[0], want)
	}
	// Notifications (resources/updated) name it the same way.
	if got := v.External(true, "a", "ui://app/x.html"); got != explicitA {
		t.Errorf("a's update for the shared URI names %q, want %q", got, explicitA)
	}
	if up, _, ok := v.Resolve(true, "ui://app/x.html"); ok {
		t.Errorf("the shared raw URI resolves to %s", up)
	}
	if _, jerr := read(t, v, "ui://app/x.html"); jerr == nil || !strings.Contains(jerr.Message, explicitA) {
		t.Errorf("the now shared raw URI: %v, want an error naming %s", jerr, explicitA)
	}
	// The explicit form read before the collision still reads a's.
	if resp, jerr := read(t, v, explicitA); jerr != nil || !strings.Contains(string(resp.Result), `"text":"a"`) {
		t.Errorf("explicit form after the collision: %v %v", resp, jerr)
	}
	// And once b drops it again, the raw URI is a's alone once more.
	ups["b"].setResources([]string{`{"uri":"mem://b"}`})
	Changed(h, "b", mcp.NotificationResourcesChanged)
	if resp, jerr := read(t, v, "ui://app/x.html"); jerr != nil || !strings.Contains(string(resp.Result), `"text":"a"`) {
		t.Errorf("after b dropped it: %v %v", resp, jerr)
	}
}

// A full list walk refreshes the index: no walk of its own is needed.
func TestListFeedsTheIndex(t *testing.T) {
	ups := map[string]*fakeUpstream{"a": {resources: items("uri", "mem://", 3)}, "b": {resources: items("uri", "mem://", 1)}}
	h := fakeHost(t, ups)
	v := NewView(h, nil, true)
	pages, _ := listPages(t, v, Resources)
	if want := []string{"mem://00?mcpgw=a", "mem://01", "mem://02", "mem://00?mcpgw=b"}; !slices.Equal(pages[0], want) {
		t.Errorf("resources %v, want %v", pages[0], want)
	}
	if n := ups["a"].lists(mcp.MethodResourcesList); n != 1 {
		t.Errorf("a was asked for resources/list %d times; want once (the list fed the index)", n)
	}
}

func TestRouteView(t *testing.T) {
	h := fakeHost(t, map[string]*fakeUpstream{"a": {tools: items("name", "t", 5)}})
	off := false
	v := RouteView(h, &config.Route{Path: "/mcp", PageSize: 2, BareNames: &off})
	if v.pageSize != 2 || v.bare || !v.prefixed {
		t.Errorf("RouteView: page size %d, bare %v, prefixed %v", v.pageSize, v.bare, v.prefixed)
	}
	if v := RouteView(h, &config.Route{Path: "/mcp"}); v.pageSize != config.DefaultPageSize || !v.bare {
		t.Errorf("RouteView defaults: page size %d, bare %v", v.pageSize, v.bare)
	}
	pages, _ := listPages(t, v, Tools)
	if len(pages) != 1 || len(pages[0]) != 5 {
		t.Errorf("one upstream page of 5 on a route of page size 2: %v (an upstream page is never split)", pages)
	}
	if _, err := v.Canonical(context.Background(), mcp.KindTool, "t00"); err == nil || !errors.As(err, new(*jsonrpc.Error)) {
		t.Errorf("bare name with bare_names off: %v", err)
	}
}

// TestUnlistedURINotGuessedWhileAnotherUpstreamIsDown: the "only upstream
// with resources" rule counts an upstream that never got ready (it may
// have resources), so an unlisted URI is not sent to whichever one happens
// to be up: the read is refused, naming the candidates, and the upstream
// that is up is not asked.
func TestUnlistedURINotGuessedWhileAnotherUpstreamIsDown(t *testing.T) {
	fs := &fakeUpstream{resources: []string{`{"uri":"file:///fs.txt"}`}}
	fs.handle = readHandler("fs")
	cfg := &config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{
		"fs":    {Protocol: "legacy", Timeout: config.Duration(10 * time.Second)},
		"notes": {Protocol: "legacy", Timeout: config.Duration(10 * time.Second)},
	}}
	h := host.New(cfg, host.Options{Transport: func(name string) (client.Transport, error) {
		if name == "fs" {
			return &memTransport{up: fs, done: make(chan struct{})}, nil
		}
		return nil, fmt.Errorf("notes is not up yet")
	}})
	h.Start()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.Upstream("fs").Client(ctx); err != nil {
		t.Fatal(err)
	}
	v := NewView(h, nil, true)
	resp, jerr := read(t, v, "file:///notes.txt")
	if jerr == nil && resp.Error == nil {
		t.Fatalf("unlisted URI while notes is down was read from fs: %s", resp.Result)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, r := range fs.got {
		if r.method == mcp.MethodResourcesRead {
			t.Errorf("fs was asked %s %s", r.method, r.params)
		}
	}
}
