package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/toolsearch"
)

// Tool search over a route's catalog (docs/protocol.md, "Tool search").
// Each upstream's tools are indexed in a segment of their own, built from
// its tool definition cache (schemas.go) when first searched after a
// change — a list_changed or reconnect drops the cache, a list that shows
// a changed definition bumps its version — so that a change re-indexes
// that upstream only, and routes over different sets of upstreams share
// the segments. A route's search ranks its upstreams' segments together
// (toolsearch.Search sums their statistics).

// toolSegment is an upstream's search index and the definitions it was
// built from, in document order.
type toolSegment struct {
	version uint64
	seg     *toolsearch.Segment
	defs    []json.RawMessage
}

// searchSegment returns the upstream's current search segment, listing
// its tools first when they are not cached; nil when it cannot list them.
func (u *upstreamState) searchSegment(ctx context.Context) *toolSegment {
	t := &u.schemas
	t.mu.Lock()
	complete := t.complete
	t.mu.Unlock()
	if !complete && u.SharedClient() != nil {
		u.toolDef(ctx, "") // walks the upstream's tools/list into the cache
	}
	t.mu.Lock()
	if s := t.search; s != nil && s.version == t.version {
		t.mu.Unlock()
		return s
	}
	version := t.version
	names := make([]string, 0, len(t.byName))
	for n := range t.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	defs := make([]json.RawMessage, len(names))
	for i, n := range names {
		defs[i] = t.byName[n]
	}
	t.mu.Unlock()

	docs := make([]toolsearch.Doc, 0, len(defs))
	kept := defs[:0]
	for _, d := range defs {
		if doc, ok := toolsearch.ParseTool(d); ok {
			docs = append(docs, doc)
			kept = append(kept, d)
		}
	}
	s := &toolSegment{version: version, seg: toolsearch.NewSegment(u.Name(), docs), defs: kept}
	t.mu.Lock()
	if t.version == version {
		t.search = s
	}
	t.mu.Unlock()
	return s
}

// ToolHit is one tool a search found, as the route shows it.
type ToolHit struct {
	Name     string          // as the route names it
	Upstream string          // where it is served
	Item     json.RawMessage // its tools/list item, named for the route
}

// searchSegments returns the segments of the view's upstreams (of only
// upstream, when given), in name order, building those that are stale
// concurrently.
func (v *View) searchSegments(ctx context.Context, upstream string, shown Shown) ([]*toolSegment, *jsonrpc.Error) {
	names := v.names
	if upstream != "" {
		if v.ups[upstream] == nil || !shown.has(upstream) {
			seen := slices.DeleteFunc(slices.Clone(v.names), func(n string) bool { return !shown.has(n) })
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "there is no upstream %q on this route; leave upstream out, or use one of: %s", upstream, strings.Join(seen, ", "))
		}
		names = []string{upstream}
	}
	segs := make([]*toolSegment, len(names))
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	concurrently(idx, func(i int) { segs[i] = v.curatedSegment(names[i], v.ups[names[i]].searchSegment(ctx)) }) // curation.go
	return slices.DeleteFunc(segs, func(s *toolSegment) bool { return s == nil }), nil
}

// routeItem is an upstream's tool definition as the route lists it; false
// when the route does not list it (unnamed, or an x-mcp-header annotation
// a 2026 upstream's client may not call).
func (v *View) routeItem(ctx context.Context, upstream string, def json.RawMessage) (string, json.RawMessage, bool) {
	u := v.ups[upstream]
	if c := u.SharedClient(); c != nil && c.Modern() && len(u.dropInvalidHeaderTools([][]byte{def})) == 0 {
		return "", nil, false
	}
	item := []byte(def)
	if v.prefixed {
		var ok bool
		if item, ok = v.rewriteItem(ctx, Tools, upstream, item); !ok {
			return "", nil, false
		}
	}
	doc, ok := toolsearch.ParseTool(def)
	if !ok {
		return "", nil, false
	}
	if v.cur != nil { // searched as listed: by the curated name and description (curation.go)
		if item, ok = v.curateItem(upstream, doc.Name, item); !ok {
			return "", nil, false
		}
	}
	if to, ok := v.cur.Renamed(upstream, doc.Name); ok {
		return to, item, true // resolves (Canonical) to the upstream's tool
	}
	return v.displayName(upstream, doc.Name), item, true
}

// SearchTools ranks the route's tools (of upstream only, when given)
// against query and returns the best limit that accept lets through, best
// first. accept sees each candidate's route name and item: the caller's
// list filter, so that a search shows exactly what a list would; an
// upstream shown does not let through is refused as one the route does
// not have.
func (v *View) SearchTools(ctx context.Context, query, upstream string, limit int, accept func(name string, item []byte) bool, shown Shown) ([]ToolHit, *jsonrpc.Error) {
	segs, jerr := v.searchSegments(ctx, upstream, shown)
	if jerr != nil {
		return nil, jerr
	}
	idx := make([]*toolsearch.Segment, len(segs))
	for i, s := range segs {
		idx[i] = s.seg
	}
	var out []ToolHit
	seen := 0
	for k := max(4*limit, 16); ; k *= 4 {
		hits := toolsearch.Search(idx, query, k)
		for _, h := range hits[seen:] {
			s := segs[h.Seg]
			name, item, ok := v.routeItem(ctx, s.seg.Upstream(), s.defs[h.Doc])
			if ok && accept(name, item) {
				out = append(out, ToolHit{Name: name, Upstream: s.seg.Upstream(), Item: item})
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(hits) < k {
			return out, nil // every match was considered
		}
		seen = len(hits)
	}
}

// CountTools counts the route's tools that accept lets through, stopping
// once it exceeds atMost (what a threshold needs to know).
func (v *View) CountTools(ctx context.Context, atMost int, accept func(name string, item []byte) bool) int {
	segs, _ := v.searchSegments(ctx, "", nil)
	n := 0
	for _, s := range segs {
		for _, def := range s.defs {
			if name, item, ok := v.routeItem(ctx, s.seg.Upstream(), def); ok && accept(name, item) {
				if n++; n > atMost {
					return n
				}
			}
		}
	}
	return n
}

// ListedTool returns a tool as the route lists it, by its route name
// (prefixed or, while unambiguous, bare).
func (v *View) ListedTool(ctx context.Context, name string) (string, json.RawMessage, bool) {
	up, def, ok := v.Tool(ctx, name)
	if !ok {
		return "", nil, false
	}
	return v.routeItem(ctx, up, def)
}

// ToolsMode is the route's discovery mode and its auto threshold
// (routes[].tools).
func (v *View) ToolsMode() (mode string, threshold int, always []string) {
	return v.toolsMode, v.toolsThreshold, v.toolsAlways
}

// MetaToolName is the name of the gateway's own tool base on this route
// (mcpgw__search_tools).
func (v *View) MetaToolName(base string) string {
	return fmt.Sprintf("%s%s%s", config.MetaUpstream, v.sep, base)
}
