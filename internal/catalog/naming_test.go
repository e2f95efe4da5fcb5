package catalog

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

func TestExplicitURI(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"ui://get-time/mcp-app.html", "ui://get-time/mcp-app.html?mcpgw=basic"},
		{"file:///a.md", "file:///a.md?mcpgw=basic"},
		{"https://h/p?a=1", "https://h/p?mcpgw=basic&a=1"},
		{"https://h/p#top", "https://h/p?mcpgw=basic#top"},
		{"https://h/p?a=1#top?x", "https://h/p?mcpgw=basic&a=1#top?x"},
		{"https://h/p?", "https://h/p?mcpgw=basic&"},
		{"urn:isbn:0451450523", "urn:isbn:0451450523?mcpgw=basic"},
		{"", "?mcpgw=basic"},
	} {
		got := explicitURI("basic", tc.uri)
		if got != tc.want {
			t.Errorf("explicitURI(%q) = %q, want %q", tc.uri, got, tc.want)
		}
		up, uri, ok := parseExplicit(got)
		if !ok || up != "basic" || uri != tc.uri {
			t.Errorf("parseExplicit(%q) = %q %q %v, want basic %q", got, up, uri, ok, tc.uri)
		}
		// The scheme, host and path a URL parser reads stay the original's.
		if a, err := url.Parse(tc.uri); err == nil && tc.uri != "" {
			b, err := url.Parse(got)
			if err != nil || a.Scheme != b.Scheme || a.Host != b.Host || a.Path != b.Path || a.Opaque != b.Opaque || a.Fragment != b.Fragment {
				t.Errorf("%q parses as %+v, the original %q as %+v", got, b, tc.uri, a)
			}
		}
	}
	for _, s := range []string{"ui://x", "ui://x?a=1", "ui://x?mcpgw=", "ui://x#?mcpgw=a", "ui://x?b=1&mcpgw=a"} {
		if up, uri, ok := parseExplicit(s); ok {
			t.Errorf("parseExplicit(%q) = %q %q: it is no explicit form", s, up, uri)
		}
	}
}

func TestExplicitTemplate(t *testing.T) {
	for _, tc := range []struct {
		tpl, want string
		// an expansion of tpl and the same expansion of want: the latter
		// must be the explicit form of the former.
		expansion, explicitExpansion string
	}{
		{"file:///{path}", "file:///{path}?mcpgw=fs", "file:///a.md", "file:///a.md?mcpgw=fs"},
		{"https://h/s{?q,lang}", "https://h/s?mcpgw=fs{&q,lang}", "https://h/s?q=x&lang=en", "https://h/s?mcpgw=fs&q=x&lang=en"},
		{"https://h/s{?q}", "https://h/s?mcpgw=fs{&q}", "https://h/s", "https://h/s?mcpgw=fs"},
		{"https://h/s?a=1{&b}", "https://h/s?mcpgw=fs&a=1{&b}", "https://h/s?a=1&b=2", "https://h/s?mcpgw=fs&a=1&b=2"},
		{"https://h/{doc}{#sec}", "https://h/{doc}?mcpgw=fs{#sec}", "https://h/d#s", "https://h/d?mcpgw=fs#s"},
		{"mem://items/{id}#top", "mem://items/{id}?mcpgw=fs#top", "mem://items/7#top", "mem://items/7?mcpgw=fs#top"},
	} {
		if got := explicitTemplate("fs", tc.tpl); got != tc.want {
			t.Errorf("explicitTemplate(%q) = %q, want %q", tc.tpl, got, tc.want)
		}
		if got := explicitURI("fs", tc.expansion); got != tc.explicitExpansion {
			t.Errorf("explicitURI(%q) = %q, but the explicit template expands to %q", tc.expansion, got, tc.explicitExpansion)
		}
		if m := compileTemplate(tc.tpl); m == nil || !m.MatchString(tc.expansion) {
			t.Errorf("template %q does not match its expansion %q", tc.tpl, tc.expansion)
		}
	}
}

func TestCompileTemplate(t *testing.T) {
	for _, tc := range []struct {
		tpl       string
		match, no []string
	}{
		{"mem://items/{id}", []string{"mem://items/7", "mem://items/"}, []string{"mem://items/7/x", "mem://item/7", "mem://items/7?x"}},
		{"file:///{+path}", []string{"file:///a/b/c.md"}, []string{"file://a"}},
		{"https://h/s{?q,lang}", []string{"https://h/s", "https://h/s?q=1&lang=en"}, []string{"https://h/sx"}},
		{"x://{a}{/b}{.c}{;d}{#e}", []string{"x://a/b/c.x;d=1#f", "x://a"}, []string{"x://a/b?q"}},
		{"x://literal.only", []string{"x://literal.only"}, []string{"x://literalXonly"}},
	} {
		m := compileTemplate(tc.tpl)
		if m == nil {
			t.Fatalf("template %q did not compile", tc.tpl)
		}
		for _, s := range tc.match {
			if !m.MatchString(s) {
				t.Errorf("%q does not match %q", tc.tpl, s)
			}
		}
		for _, s := range tc.no {
			if m.MatchString(s) {
				t.Errorf("%q matches %q", tc.tpl, s)
			}
		}
	}
	for _, bad := range []string{"x://{unterminated", "x://{}", "x://{=x}", strings.Repeat("a", maxTemplateBytes+1)} {
		if compileTemplate(bad) != nil {
			t.Errorf("template %.40q compiled; it cannot be read", bad)
		}
	}
}

func FuzzExplicitURI(f *testing.F) {
	for _, s := range []string{"ui://x/y.html", "https://h/p?a=1#f", "?", "#", "x?mcpgw=a&b", "x?mcpgw=a"} {
		f.Add("up", s)
	}
	f.Fuzz(func(t *testing.T, up, uri string) {
		if !validUpstreamName(up) {
			return
		}
		e := explicitURI(up, uri)
		gotUp, gotURI, ok := parseExplicit(e)
		if !ok || gotUp != up || gotURI != uri {
			t.Fatalf("parseExplicit(explicitURI(%q, %q) = %q) = %q %q %v", up, uri, e, gotUp, gotURI, ok)
		}
		// And the other way: every explicit form is one upstream's URI.
		if u2, uri2, ok := parseExplicit(uri); ok && explicitURI(u2, uri2) != uri {
			t.Fatalf("explicitURI(parseExplicit(%q)) = %q", uri, explicitURI(u2, uri2))
		}
	})
}

// validUpstreamName is config validation's rule for upstream names.
func validUpstreamName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && (r == '_' || r == '.' || r == '-')
		if !ok {
			return false
		}
	}
	return true
}

// staticView is a prefixed view over upstreams whose catalogs are given
// listings, with no connection: what naming needs, and nothing else.
func staticView(catalogs map[string]struct{ resources, templates []string }) *View {
	v := &View{ups: map[string]*upstreamState{}, sep: "__", prefixed: true, pageSize: 10, bare: true}
	for name, c := range catalogs {
		u := &upstreamState{Upstream: &host.Upstream{}} // no connection: only its listings
		u.lists.put(Resources.Method, newListing(nil, Resources, name, c.resources), 0)
		u.lists.put(ResourceTemplates.Method, newListing(nil, ResourceTemplates, name, c.templates), 0)
		v.ups[name] = u
		v.names = append(v.names, name)
	}
	return v
}

// FuzzRouteNaming checks the naming round trip on a route whose upstreams
// list colliding and unique URIs and templates: whatever name the route
// shows for an upstream's URI reads back as that upstream's URI, and
// shows again as the same name.
func FuzzRouteNaming(f *testing.F) {
	f.Add("ui://app/x.html", "ui://app/x.html", "file:///{path}", "file:///a.md")
	f.Add("mem://a", "mem://b", "mem://{id}", "mem://c?mcpgw=b&x")
	f.Add("x?mcpgw=b", "b+x", "{+any}", "a+y")
	f.Fuzz(func(t *testing.T, r1, r2, tpl, other string) {
		v := staticView(map[string]struct{ resources, templates []string }{
			"a": {resources: []string{r1, other}, templates: []string{tpl}},
			"b": {resources: []string{r2}, templates: []string{tpl, r1}},
			"c": {},
		})
		v.names = []string{"a", "b", "c"}
		ctx := context.Background()
		for _, c := range []struct {
			up, uri  string
			template bool
		}{{"a", r1, false}, {"b", r2, false}, {"a", other, false}, {"b", other, false}, {"c", r1, false}, {"a", tpl, true}, {"b", tpl, true}} {
			var shown string
			if c.template {
				shown = v.displayTemplate(ctx, c.up, c.uri, false)
			} else {
				shown = v.displayURI(ctx, c.up, c.uri, false)
			}
			r, ok, err := v.resolveURI(ctx, shown, false, nil)
			if !ok || err != nil || r.upstream != c.up || r.internal != c.uri {
				t.Fatalf("%s's %q is shown as %q, which reads as %+v %v %v", c.up, c.uri, shown, r, ok, err)
			}
			var again string
			if c.template {
				again = v.displayTemplate(ctx, r.upstream, r.internal, false)
			} else {
				again = v.displayURI(ctx, r.upstream, r.internal, false)
			}
			if again != shown {
				t.Fatalf("%q reads as %s's %q, shown again as %q", shown, r.upstream, r.internal, again)
			}
			if canon, err := v.Canonical(ctx, mcp.KindResource, shown); err != nil || canon != c.up+"+"+c.uri {
				t.Fatalf("Canonical(%q) = %q, %v; want %q", shown, canon, err, c.up+"+"+c.uri)
			}
		}
	})
}

func FuzzCursor(f *testing.F) {
	f.Add("alpha", "", "")
	f.Add("beta", "upstream-cursor", encodeCursor(cursor{Kind: "tools", Upstream: "x"}))
	f.Add("a", "c", "eyJ2IjoxLCJrIjoidG9vbHMiLCJ1IjoiYSJ9")
	f.Fuzz(func(t *testing.T, up, upCursor, s string) {
		// Whatever a client sends decodes or fails cleanly.
		if c, err := decodeCursor(Tools, s); err == nil {
			if c.Kind != Tools.Key || c.Upstream == "" || c.V != cursorVersion {
				t.Fatalf("decodeCursor(%q) accepted %+v", s, c)
			}
		} else if !strings.HasPrefix(err.Error(), "invalid cursor") {
			t.Fatalf("decodeCursor(%q): %v does not say the cursor is invalid", s, err)
		}
		if !validUpstreamName(up) || !utf8.ValidString(upCursor) {
			return // upstream names are validated; cursors arrive as JSON strings
		}
		// What the gateway issues reads back as it was, for its own list only.
		enc := encodeCursor(cursor{Kind: Prompts.Key, Upstream: up, Cursor: upCursor})
		c, err := decodeCursor(Prompts, enc)
		if err != nil || c.Upstream != up || c.Cursor != upCursor {
			t.Fatalf("cursor for %q/%q read back as %+v, %v", up, upCursor, c, err)
		}
		if _, err := decodeCursor(Tools, enc); err == nil || !strings.Contains(err.Error(), "prompts/list") {
			t.Fatalf("a prompts cursor was accepted by tools/list: %v", err)
		}
		// Any one changed character is refused.
		for i := range enc {
			b := []byte(enc)
			b[i] ^= 1
			if _, err := decodeCursor(Prompts, string(b)); err == nil && string(b) != enc {
				if c2, _ := decodeCursor(Prompts, string(b)); c2 != c {
					t.Fatalf("cursor %q altered at %d to %q was accepted as %+v", enc, i, b, c2)
				}
			}
		}
	})
}

// TestSpells: Canonical hands back the name it was given only when that
// is exactly upstream+sep+name, never a near miss.
func TestSpells(t *testing.T) {
	for _, tc := range []struct {
		s, up, sep, name string
		want             bool
	}{
		{"a__echo", "a", "__", "echo", true},
		{"echo", "a", "", "echo", true},
		{"a__echo", "a", "", "echo", false},
		{"a__echoX", "a", "__", "echo", false},
		{"ab__echo", "a", "__", "echo", false},
		{"a_echo", "a", "__", "echo", false},
		{"a___echo", "a", "__", "_echo", true},
		{"a+file:///x", "a", URISeparator, "file:///x", true},
		{"b+file:///x", "a", URISeparator, "file:///x", false},
		{"", "", "__", "", false},
	} {
		if got := spells(tc.s, tc.up, tc.sep, tc.name); got != tc.want {
			t.Errorf("spells(%q, %q, %q, %q) = %v, want %v", tc.s, tc.up, tc.sep, tc.name, got, tc.want)
		}
	}
}
