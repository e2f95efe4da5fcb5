package catalog

import (
	"context"
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/curate"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/toolsearch"
)

// Tool curation in the catalog (docs/curation.md): a listed tool is
// rewritten where the route names its list items (rewriteItem), a curated
// name resolves to its upstream's tool and the old name of a renamed tool
// resolves to nothing (resolveName), and a tool the route does not expose
// is neither listed nor resolved. Policy, pinning and audit keep the
// canonical upstream name: the pinned params name the tool explicitly
// (PinParams), as the upstream's.

// curation makes route r's curation over the view's upstreams.
func (v *View) curation(h *host.Host, r *config.Route) *curate.Set {
	byName, _, _ := h.UpstreamSet()
	var route []*config.ToolCuration
	var expose []string
	if r.Tools != nil {
		route, expose = r.Tools.Curate, r.Tools.Expose
	}
	var ups map[string][]*config.ToolCuration
	for _, n := range v.names {
		if u := byName[n]; u != nil && u.Config() != nil && len(u.Config().Curate) > 0 {
			if ups == nil {
				ups = map[string][]*config.ToolCuration{}
			}
			ups[n] = u.Config().Curate
		}
	}
	return curate.New(route, expose, ups, v.displayName)
}

// Curation is the route's tool curation (nil: none), for the call path.
func (v *View) Curation() *curate.Set { return v.cur }

// curateItem applies the route's curation to one tool list item, already
// named for the route; false leaves it out (not exposed).
func (v *View) curateItem(upstream, id string, it []byte) ([]byte, bool) {
	if !v.cur.Exposed(v.displayName(upstream, id)) {
		return nil, false
	}
	t := v.cur.For(upstream, id)
	if t == nil {
		return it, true
	}
	out, missing, err := t.Definition(it)
	if err != nil {
		v.ups[upstream].Logger().Warn("tool definition not curated; left out", zap.String("tool", id), zap.Error(err))
		return nil, false // fail closed: an uncurated definition would show hidden parameters
	}
	for _, m := range missing {
		v.warnMissing(upstream, id, m)
	}
	return out, true
}

// warnMissing logs, once per view, a fixed parameter the tool does not
// have (the config cannot know what an upstream lists).
func (v *View) warnMissing(upstream, tool, param string) {
	key := upstream + "\x00" + tool + "\x00" + param
	if _, seen := v.curWarned.LoadOrStore(key, true); seen {
		return
	}
	v.ups[upstream].Logger().Warn("curation fixes a parameter the tool does not list; check the rule's parameter name",
		zap.String("tool", tool), zap.String("parameter", param))
}

// curatedName resolves a curated tool name (ok false: not one).
func (v *View) curatedName(kind mcp.Kind, s string) (resolution, bool) {
	if kind != mcp.KindTool || v.cur == nil {
		return resolution{}, false
	}
	name, ok := v.cur.Curated(s)
	if !ok {
		return resolution{}, false
	}
	if !v.prefixed {
		return resolution{upstream: v.names[0], internal: name}, true
	}
	for _, up := range v.names {
		if len(name) > len(up)+len(v.sep) && name[:len(up)] == up && name[len(up):len(up)+len(v.sep)] == v.sep {
			return resolution{upstream: up, internal: name[len(up)+len(v.sep):]}, true
		}
	}
	return resolution{}, false
}

// curatedAway reports whether a tool the caller named s (resolved to r)
// is not on the route as s: renamed (its old name is unknown) or not
// exposed.
func (v *View) curatedAway(kind mcp.Kind, s string, r resolution) bool {
	if kind != mcp.KindTool || v.cur == nil {
		return false
	}
	if to, ok := v.cur.Renamed(r.upstream, r.internal); ok && to != s {
		return true
	}
	return !v.cur.Exposed(v.displayName(r.upstream, r.internal))
}

// refuseCuratedAway is the refusal of a name curatedAway: unknown, as a
// name nothing has. For the old name of a renamed tool the route exposes,
// the Target also carries the tool and its curated name (Target.Renamed):
// whether the caller may be told it is the router's to judge, once it
// knows what the caller's list shows.
func (v *View) refuseCuratedAway(kind mcp.Kind, s string, r resolution) (Target, *jsonrpc.Error) {
	var t Target
	if to, ok := v.cur.Renamed(r.upstream, r.internal); ok && to != s && v.cur.Exposed(v.displayName(r.upstream, r.internal)) {
		t = Target{Kind: kind, External: s, Canonical: v.canonical(kind, r), Upstream: r.upstream, Internal: r.internal, Renamed: to}
	}
	return t, v.unknown(kind, s)
}

// SameCuration reports whether v and o curate their tools alike.
func (v *View) SameCuration(o *View) bool { return v.cur.Same(o.cur) }

// curatedSegments are a view's search segments re-indexed as the route
// lists its tools: by curated name, title and description. One per
// upstream, of its current base segment: bounded by the view's upstreams.
type curatedSegments struct {
	mu sync.Mutex
	by map[string][2]*toolSegment // upstream -> {base, curated}
}

// curatedSegment is base indexed as the route shows it (base itself
// when the route curates nothing). Its defs stay the upstream's own, so
// that routeItem names and curates each hit as a list would.
func (v *View) curatedSegment(upstream string, base *toolSegment) *toolSegment {
	if v.cur == nil || base == nil {
		return base
	}
	c := &v.curSegs
	c.mu.Lock()
	if p, ok := c.by[upstream]; ok && p[0] == base {
		c.mu.Unlock()
		return p[1]
	}
	c.mu.Unlock()
	docs := make([]toolsearch.Doc, 0, len(base.defs))
	defs := make([]json.RawMessage, 0, len(base.defs))
	for _, def := range base.defs {
		doc, ok := toolsearch.ParseTool(def)
		if !ok {
			continue
		}
		item, ok := v.curateItem(upstream, doc.Name, def)
		if !ok {
			continue // not exposed: not found either
		}
		if cd, ok := toolsearch.ParseTool(item); ok {
			doc = cd
		}
		docs = append(docs, doc)
		defs = append(defs, def)
	}
	out := &toolSegment{version: base.version, seg: toolsearch.NewSegment(upstream, docs), defs: defs}
	c.mu.Lock()
	if c.by == nil {
		c.by = map[string][2]*toolSegment{}
	}
	c.by[upstream] = [2]*toolSegment{base, out}
	c.mu.Unlock()
	return out
}

// ListedForm is an upstream's tool definition def as the route lists it:
// named for the route (rewriteItem) and curated (curateItem), exactly what
// the list does to that one item. false: the list leaves it out. The call
// path judges this form with the list-phase interceptors, so that what a
// caller may call is judged as what the list showed it.
func (v *View) ListedForm(ctx context.Context, upstream string, def []byte) ([]byte, bool) {
	id, _ := rawjson.GetString(def, Tools.Field)
	it, ok := def, true
	if v.prefixed {
		if it, ok = v.rewriteItem(ctx, Tools, upstream, it); !ok {
			return nil, false
		}
	}
	if v.cur != nil {
		return v.curateItem(upstream, id, it)
	}
	return it, true
}

// ListedName is the upstream and the canonical name (as policy judges it,
// Canonical) of a name (or URI) a list of kind shows on the route: what
// the list-phase interceptors judge it as, as the call path does, so that
// a curated rename never moves a tool out of an interceptor's scope. ok
// is false when nothing on the route resolves it.
func (v *View) ListedName(ctx context.Context, kind mcp.Kind, name string) (upstream, canonical string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, resolveWait)
	defer cancel()
	r, ok, _ := v.resolve(ctx, kind, name, true, nil)
	if !ok {
		return "", name, false
	}
	return r.upstream, v.canonicalOf(kind, name, r), true
}
