package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/curate"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The catalog: what one route shows of its upstreams, and where a request
// on it goes. Names on a prefixed route (docs/protocol.md, "Naming"):
//
//   - tools and prompts are "<upstream><separator><name>"; a bare name (the
//     upstream's own) also resolves while exactly one upstream on the route
//     has it (routes[].bare_names);
//   - resource URIs and templates are the upstream's own while they are
//     unique on the route, and otherwise in the explicit form that names
//     the upstream in the query (naming.go);
//   - policy judges the canonical name: "<upstream><separator><name>", and
//     "<upstream>+<uri>" for resources (Canonical), whatever form was sent.

// URISeparator joins an upstream name and a resource URI in the canonical
// name policy rules match ("fs+file:///a.md"). The route also accepts it
// for reading (it is the form earlier versions showed), but never hands it
// out: it changes the URI's scheme.
const URISeparator = "+"

// ListKind describes one of the merged list methods.
type ListKind struct {
	Method     string // e.g. tools/list
	Key        string // the result's array key, e.g. "tools"
	Field      string // the item's identifying field, e.g. "name"
	URI        bool   // Field holds a URI (template)
	Capability string // the upstream capability that offers the list
}

// The merged lists, as the method table (mcp.Method) describes them.
var (
	Tools             = mustListKind(mcp.MethodToolsList)
	Prompts           = mustListKind(mcp.MethodPromptsList)
	Resources         = mustListKind(mcp.MethodResourcesList)
	ResourceTemplates = mustListKind(mcp.MethodResourcesTemplatesList)
	// Skills (the skills extension, SEP-2640) is offered under
	// capabilities.extensions; each item is named by its SKILL.md URI and
	// carries the URIs of its files (skills.go).
	Skills = mustListKind(mcp.MethodSkillsList)
)

// ListKindOf returns the merged list method is, if it is one.
func ListKindOf(method string) (ListKind, bool) {
	l := mcp.Method(method).List
	if l == nil {
		return ListKind{}, false
	}
	return ListKind{Method: method, Key: l.Key, Field: l.Field, URI: l.URI, Capability: l.Capability}, true
}

// mustListKind is ListKindOf for a method the table lists as a merged list.
func mustListKind(method string) ListKind {
	k, ok := ListKindOf(method)
	if !ok {
		panic("catalog: " + method + " is not a merged list in the method table")
	}
	return k
}

// offeredBy reports whether connection c offers the list.
func (k ListKind) offeredBy(c *client.Client) bool {
	if k.Key == Skills.Key {
		return skillsCapability.In(c.InitializeResult().Capabilities)
	}
	return c.HasCapability(k.Capability)
}

// View is the catalog one route exposes: a subset of the upstreams, with or
// without name prefixes.
//
// A View is a snapshot of the host's upstream set when it was made: after a
// reload the router makes new views, and calls already under way on an old
// one finish on the upstreams they started on. What the upstreams list is
// not part of the snapshot: names resolve against their current catalogs.
type View struct {
	tasks    *tasks // the host's task ids (tasks.go)
	ups      map[string]*upstreamState
	names    []string // sorted
	sep      string
	prefixed bool
	pageSize int  // items per downstream list page
	bare     bool // bare (unprefixed) names resolve when unambiguous
	// routes[].tools: the discovery mode (toolindex.go)
	toolsMode      string
	toolsThreshold int
	toolsAlways    []string
	cache          pageCache // merged pages renamed for the route (listcache.go)
	// cur is the route's tool curation (curation.go); nil: none.
	cur       *curate.Set
	curWarned sync.Map // warnMissing's: what was logged once
	curSegs   curatedSegments
	// resolutions counts the targets resolved, so that a test can see a
	// request's target resolved once (PinParams), not again by each step.
	resolutions atomic.Int64
}

// Resolutions is how many targets the view has resolved.
func (v *View) Resolutions() int64 { return v.resolutions.Load() }

// NewView returns the catalog over the named upstreams (all when names is
// empty) of h's current upstream set, with the default page size and bare
// names on.
func NewView(h *host.Host, names []string, prefixed bool) *View {
	return newView(h, names, prefixed, 0, true)
}

// RouteView returns the catalog route r exposes over h's current upstreams.
func RouteView(h *host.Host, r *config.Route) *View {
	v := newView(h, r.Upstreams, r.Prefixed(), r.PageSize, r.BareNamesEnabled())
	v.toolsMode, v.toolsThreshold = r.ToolsMode(), r.ToolsThreshold()
	if r.Tools != nil {
		v.toolsAlways = slices.Clone(r.Tools.Always)
	}
	v.cur = v.curation(h, r)
	return v
}

func newView(h *host.Host, names []string, prefixed bool, pageSize int, bare bool) *View {
	byName, all, sep := h.UpstreamSet()
	if len(names) == 0 {
		names = all
	}
	if pageSize <= 0 {
		pageSize = config.DefaultPageSize
	}
	v := &View{tasks: tasksOf(h), ups: map[string]*upstreamState{}, sep: sep, prefixed: prefixed, pageSize: pageSize, bare: bare, toolsMode: config.ToolsAll}
	for _, n := range names {
		if u := byName[n]; u != nil && v.ups[n] == nil {
			v.ups[n] = stateOf(u)
			v.names = append(v.names, n)
		}
	}
	slices.Sort(v.names)
	return v
}

// Upstreams returns the view's upstream names in catalog order.
func (v *View) Upstreams() []string { return slices.Clone(v.names) }

// Prefixed reports whether names carry the upstream prefix.
func (v *View) Prefixed() bool { return v.prefixed }

// Visible tells name resolution which candidates the caller may see, by
// canonical name; nil sees everything. A bare name or shared URI resolves
// when exactly one visible upstream has it, so a candidate the caller may
// not see neither makes its name ambiguous nor appears in the error.
type Visible func(kind mcp.Kind, canonical string) bool

// resolution is where a routed name or URI goes: the upstream and the
// upstream's own name for it.
type resolution struct {
	upstream, internal string
	template           bool // a listed URI template (a completion's ref), named as one
}

// resolveWait bounds what Resolve waits for an upstream's listing.
const resolveWait = 5 * time.Second

// Resolve maps a downstream tool/prompt name (or, with uri, a resource URI)
// to its upstream and the upstream's own name for it; false when nothing
// on the route has it or it is ambiguous. It may list an upstream it has
// not indexed yet, for at most resolveWait.
// CredentialKind is the kind of credential the named upstream's calls
// carry ("" for an unknown upstream), for the audit record.
func (v *View) CredentialKind(upstream string) credentials.Kind {
	if u := v.ups[upstream]; u != nil {
		return u.CredentialKind()
	}
	return ""
}

func (v *View) Resolve(uri bool, external string) (upstream, internal string, ok bool) {
	kind := mcp.KindTool
	if uri {
		kind = mcp.KindResource
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveWait)
	defer cancel()
	r, ok, _ := v.resolve(ctx, kind, external, true, nil)
	return r.upstream, r.internal, ok
}

// Canonical returns the name policy judges for a request naming name: the
// prefixed name of a tool or prompt (also for a bare one), "<upstream>+<uri>"
// for a resource or template in any of its forms; on an unprefixed route
// the name itself. It fails, naming the candidates, for an ambiguous bare
// name or URI, and for a name nothing on the route has.
func (v *View) Canonical(ctx context.Context, kind mcp.Kind, name string) (string, error) {
	if kind == mcp.KindTask {
		return name, nil // a sealed token, opened by forwardTask (tasks.go)
	}
	r, ok, jerr := v.resolve(ctx, kind, name, true, nil)
	if jerr != nil {
		return name, jerr
	}
	if !ok {
		return name, v.unknown(kind, name)
	}
	return v.canonicalOf(kind, name, r), nil
}

// canonicalOf is Canonical of name, which resolved to r.
func (v *View) canonicalOf(kind mcp.Kind, name string, r resolution) string {
	if spells(name, r.upstream, v.canonicalSep(kind), r.internal) {
		return name // already canonical (a pinned target): no new string per call
	}
	return v.canonical(kind, r)
}

// canonicalSep is what joins an upstream and its name in the canonical
// form of kind ("": the name alone, unprefixed).
func (v *View) canonicalSep(kind mcp.Kind) string {
	switch {
	case !v.prefixed:
		return ""
	case kind == mcp.KindResource:
		return URISeparator
	}
	return v.sep
}

// spells reports whether s is upstream+sep+name (just name when sep is "").
func spells(s, upstream, sep, name string) bool {
	if sep == "" {
		return s == name
	}
	return len(s) == len(upstream)+len(sep)+len(name) && strings.HasPrefix(s, upstream) &&
		strings.HasPrefix(s[len(upstream):], sep) && strings.HasSuffix(s, name)
}

// Pin resolves the target of a routed request once, among what visible
// lets the caller see, and returns params with the target in its explicit
// form (the prefixed name; the explicit URI), so that everything after —
// policy, audit, the upstream — reads the same resolution however the
// catalogs change meanwhile. An ambiguous target is an error naming the
// candidates, and a target nothing (visible) has is refused as unknown, so
// that nothing is left for a later step to resolve differently.
func (v *View) Pin(ctx context.Context, method string, params json.RawMessage, visible Visible) (json.RawMessage, *jsonrpc.Error) {
	p, _, jerr := v.PinTarget(ctx, method, params, visible)
	return p, jerr
}

// PinTarget is Pin, also returning the target as the pinned params name
// it ("" when Pin left the params as they were without reading a target),
// so that the caller need not read it again (one reading of a request).
func (v *View) PinTarget(ctx context.Context, method string, params json.RawMessage, visible Visible) (json.RawMessage, string, *jsonrpc.Error) {
	pinned, t, jerr := v.PinParams(ctx, method, mcp.ReadParams(method, params), visible)
	if pinned == nil && jerr == nil {
		pinned = params
	}
	if !v.prefixed || t.Kind == mcp.KindTask {
		return pinned, "", jerr // left as it was
	}
	return pinned, t.External, jerr
}

// Target is a routed request's target, resolved once (PinParams): what
// the policy, the limits, the audit and Forward (ForwardResolved) all
// take, so that none resolves it again, differently.
type Target struct {
	Kind mcp.Kind // "": the request names no target
	// External is the target as the pinned params name it; Canonical is
	// what the policy judges (Canonical).
	External, Canonical string
	// Upstream and Internal are where it goes, when Resolved (a task's
	// sealed id, or a name nothing on an unprefixed route has, is not).
	Upstream, Internal string
	Resolved           bool
	template           bool
	// Renamed is set only with PinParams' refusal of a renamed tool's
	// old name (Resolved false: it goes nowhere): the tool's name on the
	// route, which the router names to a caller that may see the tool
	// (core.offeredAs), with Canonical, Upstream and Internal the tool's.
	Renamed string
}

// resolution is t's, for Forward.
func (t Target) resolution() resolution {
	return resolution{upstream: t.Upstream, internal: t.Internal, template: t.template}
}

// PinParams is PinTarget over the request's params as the edge read them
// (mcp.ReadParams): it reads nothing of the bytes again, edits them only
// when the target's explicit form differs (pinned nil: p.Raw as it is),
// and resolves the target once, for everything after (Target).
func (v *View) PinParams(ctx context.Context, method string, p *mcp.Params, visible Visible) (pinned json.RawMessage, tgt Target, jerr *jsonrpc.Error) {
	t, ok := p.Target, p.HasTarget
	if !ok || !p.NameOK {
		return nil, Target{}, nil
	}
	s := p.Name
	tgt = Target{Kind: t.Kind, External: s, Canonical: s}
	if t.Kind == mcp.KindTask { // a task id is a sealed token (tasks.go)
		return nil, tgt, nil
	}
	if !v.prefixed {
		if readsResource(t) && len(v.names) == 1 {
			if jerr := v.checkURI(ctx, s, resolution{upstream: v.names[0], internal: s}, visible); jerr != nil {
				return nil, Target{}, jerr
			}
		}
		// What the policy judges and where it goes, resolved among
		// everything (a name nothing has is the upstream's to answer).
		if r, ok, jerr := v.resolve(ctx, t.Kind, s, true, nil); jerr == nil && ok {
			if v.curatedAway(t.Kind, s, r) { // renamed or not exposed (curation.go)
				away, jerr := v.refuseCuratedAway(t.Kind, s, r)
				return nil, away, jerr
			}
			tgt.Canonical = v.canonicalOf(t.Kind, s, r)
			tgt.Upstream, tgt.Internal, tgt.template, tgt.Resolved = r.upstream, r.internal, r.template, true
		}
		return nil, tgt, nil
	}
	r, ok, jerr := v.resolve(ctx, t.Kind, s, true, visible)
	if jerr != nil {
		return nil, Target{}, jerr
	}
	if !ok {
		if readsResource(t) { // say what to send rather than "not found"
			if jerr := v.checkURI(ctx, s, resolution{internal: s}, visible); jerr != nil {
				return nil, Target{}, jerr
			}
		}
		return nil, Target{}, v.unknown(t.Kind, s)
	}
	if v.curatedAway(t.Kind, s, r) { // renamed or not exposed (curation.go)
		away, jerr := v.refuseCuratedAway(t.Kind, s, r)
		return nil, away, jerr
	}
	if readsResource(t) {
		if jerr := v.checkURI(ctx, s, r, visible); jerr != nil {
			return nil, Target{}, jerr
		}
	}
	// A name sent in its explicit form, as almost every one is, is not
	// built again to compare (a new string per call); a resource's
	// explicit forms are explicit's to spell.
	e := s
	if t.Kind == mcp.KindResource || v.sep == "" || !spells(s, r.upstream, v.sep, r.internal) {
		e = v.explicit(t.Kind, r)
	}
	tgt.Upstream, tgt.Internal, tgt.template, tgt.Resolved = r.upstream, r.internal, r.template, true
	if e != s {
		out, err := rawjson.SetPath(p.Raw, t.Path, e)
		if err != nil {
			tgt.Canonical = v.canonicalOf(t.Kind, s, r)
			return nil, tgt, nil
		}
		pinned, tgt.External = out, e
	}
	tgt.Canonical = v.canonicalOf(t.Kind, tgt.External, r)
	return pinned, tgt, nil
}

// External returns the downstream-facing name or URI for an upstream's
// one. It lists nothing (it serves the upstream's own notifications): a
// URI is named by what the catalog already knows.
func (v *View) External(uri bool, upstream, id string) string {
	if uri {
		return v.displayURI(context.Background(), upstream, id, false)
	}
	return v.displayName(upstream, id)
}

func (v *View) displayName(upstream, name string) string {
	if !v.prefixed {
		return name
	}
	return upstream + v.sep + name
}

// displayURI names an upstream's URI on the route: as it is when reading
// it back reaches that upstream, else in its explicit form.
func (v *View) displayURI(ctx context.Context, upstream, uri string, fetch bool) string {
	if !v.prefixed {
		return uri
	}
	if r, ok, _ := v.resolveURI(ctx, uri, fetch, nil); ok && r.upstream == upstream && r.internal == uri {
		return uri
	}
	return explicitURI(upstream, uri)
}

// displayTemplate names an upstream's URI template on the route.
func (v *View) displayTemplate(ctx context.Context, upstream, tpl string, fetch bool) string {
	if !v.prefixed {
		return tpl
	}
	if r, ok, _ := v.resolveURI(ctx, tpl, fetch, nil); ok && r.upstream == upstream && r.internal == tpl {
		return tpl
	}
	return explicitTemplate(upstream, tpl)
}

// canonical is the policy's name for a resolution.
func (v *View) canonical(kind mcp.Kind, r resolution) string {
	sep := v.canonicalSep(kind)
	if sep == "" {
		return r.internal
	}
	return r.upstream + sep + r.internal
}

// explicit is the form of a resolution that names its upstream.
func (v *View) explicit(kind mcp.Kind, r resolution) string {
	switch {
	case !v.prefixed:
		return r.internal
	case kind != mcp.KindResource:
		return r.upstream + v.sep + r.internal
	case r.template:
		return explicitTemplate(r.upstream, r.internal)
	}
	return explicitURI(r.upstream, r.internal)
}

// resolve finds where a name (or URI) goes. It reports false with no error
// when nothing on the route has it, and an error when several visible
// upstreams do. With fetch it may list upstreams whose catalogs it has not
// indexed yet.
func (v *View) resolve(ctx context.Context, kind mcp.Kind, s string, fetch bool, visible Visible) (resolution, bool, *jsonrpc.Error) {
	v.resolutions.Add(1)
	if kind == mcp.KindResource {
		return v.resolveURI(ctx, s, fetch, visible)
	}
	return v.resolveName(ctx, kind, s, fetch, visible)
}

func (v *View) resolveName(ctx context.Context, kind mcp.Kind, s string, fetch bool, visible Visible) (resolution, bool, *jsonrpc.Error) {
	if r, ok := v.curatedName(kind, s); ok { // curation.go
		return r, true, nil
	}
	if !v.prefixed {
		if len(v.names) != 1 {
			return resolution{}, false, nil
		}
		return resolution{upstream: v.names[0], internal: s}, true, nil
	}
	// The prefixed name always means its upstream, whatever others list.
	if up, rest, ok := strings.Cut(s, v.sep); ok && rest != "" && v.ups[up] != nil {
		return resolution{upstream: up, internal: s[len(up)+len(v.sep):]}, true, nil
	}
	if !v.bare {
		return resolution{}, false, nil
	}
	has := make([]bool, len(v.names))
	if kind == mcp.KindTool {
		var walk []int
		for i, name := range v.names {
			u := v.ups[name]
			has[i] = u.hasTool(ctx, s, false)
			if fetch && !has[i] && !u.toolsIndexed() {
				walk = append(walk, i)
			}
		}
		concurrently(walk, func(i int) { has[i] = v.ups[v.names[i]].hasTool(ctx, s, true) })
	} else {
		for i, l := range v.listings(ctx, Prompts, fetch) {
			has[i] = l != nil && l.set[s]
		}
	}
	var owners []resolution
	for i, name := range v.names {
		if has[i] {
			owners = append(owners, resolution{upstream: name, internal: s})
		}
	}
	return v.pick(kind, s, owners, visible)
}

func (v *View) resolveURI(ctx context.Context, s string, fetch bool, visible Visible) (resolution, bool, *jsonrpc.Error) {
	if !v.prefixed {
		if len(v.names) != 1 {
			return resolution{}, false, nil
		}
		return resolution{upstream: v.names[0], internal: s}, true, nil
	}
	// 1. The explicit form names its upstream, whatever others list.
	if up, uri, ok := parseExplicit(s); ok && v.ups[up] != nil {
		return resolution{upstream: up, internal: uri}, true, nil
	}
	res := v.listings(ctx, Resources, fetch)
	tpl := v.listings(ctx, ResourceTemplates, fetch)
	skills := v.listings(ctx, Skills, fetch) // the skill files and directories (skills.go)
	// 2. The explicit form of a listed template (where it is not an
	// explicit URI: "{?q}" became "?mcpgw=up{&q}").
	for i, name := range v.names {
		if l := tpl[i]; l != nil {
			if t, ok := l.explicit[s]; ok {
				return resolution{upstream: name, internal: t, template: true}, true, nil
			}
		}
	}
	// 3. Listed as it is: unique, or ambiguous.
	var owners []resolution
	for i, name := range v.names {
		switch {
		case res[i] != nil && res[i].set[s]:
			owners = append(owners, resolution{upstream: name, internal: s})
		case tpl[i] != nil && tpl[i].set[s]:
			owners = append(owners, resolution{upstream: name, internal: s, template: true})
		case skills[i] != nil && skills[i].set[s]:
			owners = append(owners, resolution{upstream: name, internal: s})
		}
	}
	if len(owners) > 0 {
		return v.pick(mcp.KindResource, s, owners, visible)
	}
	// 4. The canonical form, <upstream>+<uri>.
	if up, uri, ok := strings.Cut(s, URISeparator); ok && uri != "" && v.ups[up] != nil {
		return resolution{upstream: up, internal: uri}, true, nil
	}
	// 5. An expansion of the templates of exactly one upstream.
	for i, name := range v.names {
		if tpl[i] != nil && tpl[i].matches(s) {
			owners = append(owners, resolution{upstream: name, internal: s})
		}
	}
	if len(owners) > 0 {
		return v.pick(mcp.KindResource, s, owners, visible)
	}
	// 6. The one upstream on the route that has resources at all. One that
	// is down or still starting counts by what it last declared (or as
	// having resources, when it never got ready): the URI may be its, and
	// guessing the one that happens to be up would send it elsewhere.
	var only []resolution
	for _, name := range v.names {
		u := v.ups[name]
		caps := u.Capabilities()
		if o := offer(caps); u.offers(Resources.Capability) || o.resources || o.subscribe {
			only = append(only, resolution{upstream: name, internal: s})
		}
	}
	if len(only) == 1 {
		return v.pick(mcp.KindResource, s, only, visible)
	}
	return resolution{}, false, nil
}

// pick returns the one visible owner, or an error naming the visible ones.
func (v *View) pick(kind mcp.Kind, s string, owners []resolution, visible Visible) (resolution, bool, *jsonrpc.Error) {
	if visible != nil {
		owners = slices.DeleteFunc(owners, func(r resolution) bool { return !visible(kind, v.canonical(kind, r)) })
	}
	switch len(owners) {
	case 0:
		return resolution{}, false, nil
	case 1:
		return owners[0], true, nil
	}
	names := make([]string, len(owners))
	for i, r := range owners {
		names[i] = v.explicit(kind, r)
	}
	data, _ := json.Marshal(map[string][]string{"candidates": names})
	e := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Data: data}
	if kind == mcp.KindResource {
		e.Message = fmt.Sprintf("resource %q is served by %d upstreams on this route; name the one you mean by its explicit URI: %s", s, len(names), strings.Join(names, " or "))
	} else {
		e.Message = fmt.Sprintf("%s %q is offered by %d upstreams on this route; use its prefixed name: %s", kind, s, len(names), strings.Join(names, " or "))
	}
	return resolution{}, false, e
}

// listings returns each upstream's listing of kind, in v.names order
// (nil where there is none). With fetch, the upstreams whose listing is
// missing or stale are walked, concurrently.
func (v *View) listings(ctx context.Context, kind ListKind, fetch bool) []*listing {
	out := make([]*listing, len(v.names))
	var walk []int
	for i, name := range v.names {
		l, fresh := v.ups[name].cachedListing(kind)
		out[i] = l
		if fetch && !fresh {
			walk = append(walk, i)
		}
	}
	concurrently(walk, func(i int) { out[i] = v.ups[v.names[i]].listing(ctx, kind, true) })
	return out
}

// concurrently runs fn for each index at once and waits for them all
// (one alone runs on the caller's goroutine).
func concurrently(idx []int, fn func(i int)) {
	if len(idx) == 1 {
		fn(idx[0])
		return
	}
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}

// Forward routes a request to the upstream that owns the name or URI in its
// params, translating the name back, and returns the upstream's response
// with the URIs it hands out named for the route. A gateway-side failure
// (unknown name, upstream down, timeout) is returned as a *jsonrpc.Error
// that names the upstream; the upstream's own errors come back inside the
// response.
func (v *View) Forward(ctx context.Context, method string, params json.RawMessage, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	return v.ForwardTarget(ctx, method, params, "", opts)
}

// AsksNothing reports whether a stateless caller's request for the
// target external (as its params carry it, already read) of kind goes to
// an upstream that cannot ask the caller anything during it (host's
// AsksCallersNothing), judged without fetching anything: a task, a name
// not resolved at once or an upstream that may ask reports false.
func (v *View) AsksNothing(ctx context.Context, kind mcp.Kind, external string) bool {
	if kind == mcp.KindTask {
		return false
	}
	r, ok, jerr := v.resolve(ctx, kind, external, false, nil)
	if jerr != nil || !ok {
		return false
	}
	u := v.ups[r.upstream]
	return u != nil && u.AsksCallersNothing()
}

// ForwardTarget is Forward of a request whose target the caller already
// read from params (external: exactly what params carry at the target's
// member; "": Forward reads it), so that the router's one reading serves
// the routing too.
func (v *View) ForwardTarget(ctx context.Context, method string, params json.RawMessage, external string, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	t, ok := mcp.TargetOf(method, params)
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not routed by mcpgw", method)
	}
	if t.Kind == mcp.KindTask {
		return v.forwardTask(ctx, method, params, opts) // tasks.go
	}
	if external == "" {
		var err error
		if external, err = rawjson.GetPath(params, t.Path); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: params.%s must be a string", method, t.Field())
		}
	}
	r, ok, jerr := v.resolve(ctx, t.Kind, external, true, nil)
	if jerr != nil {
		return nil, jerr
	}
	if !ok {
		return nil, v.unknown(t.Kind, external)
	}
	return v.forwardTo(ctx, method, params, t, external, r, opts)
}

// ForwardResolved is Forward of a request whose target was resolved once
// already (PinParams): it is not resolved again.
func (v *View) ForwardResolved(ctx context.Context, method string, params json.RawMessage, tgt Target, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	t, ok := mcp.TargetOf(method, params)
	if !ok || t.Kind == mcp.KindTask || !tgt.Resolved || v.ups[tgt.Upstream] == nil {
		return v.ForwardTarget(ctx, method, params, tgt.External, opts)
	}
	return v.forwardTo(ctx, method, params, t, tgt.External, tgt.resolution(), opts)
}

// forwardTo forwards a request whose target external resolved to r.
func (v *View) forwardTo(ctx context.Context, method string, params json.RawMessage, t mcp.Target, external string, r resolution, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	var err error
	upstream, internal := r.upstream, r.internal
	if internal != external {
		if params, err = rawjson.SetPath(params, t.Path, internal); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", method, err)
		}
	}
	u := v.ups[upstream]
	if !u.Enter() {
		if gone := callerGone(ctx, upstream); gone != nil {
			return nil, gone
		}
		u.Metrics().Unavailable()
		return nil, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %q was replaced or removed by a config reload while this request was routed; retry it", upstream)}
	}
	defer u.Exit()
	c, cerr := u.ClientFor(host.CallOnly(ctx, method), !opts.PassInputRequired)
	if cerr != nil {
		return nil, unavailableError(ctx, u.Upstream, upstream, method, cerr) // errors.go
	}
	if jerr := capabilityGap(upstream, method, c.InitializeResult().Capabilities); jerr != nil {
		return nil, jerr // capabilities.go: the gap named, not the upstream's bare -32601
	}
	// A call that may be asked (its caller declared sampling or
	// elicitation): a connection where it is the only one in flight
	// (host/interactive.go). Not a bridged call that may park (Parked): it
	// would hold a connection of the pool while its client takes its
	// time, and the owner rule already leaves parked calls out on the
	// shared one.
	c, release, ierr := u.Interactive(ctx, c, method, params, opts.CanAsk() && opts.Parked == nil)
	if ierr != nil {
		return nil, unavailableError(ctx, u.Upstream, upstream, method, ierr) // errors.go
	}
	defer release()
	if method == mcp.MethodToolsCall && c.Modern() {
		var jerr *jsonrpc.Error
		if ctx, jerr = u.paramHeaders(ctx, internal, params); jerr != nil { // paramheaders.go
			return nil, jerr
		}
	}
	copts := u.CallOptions(opts)
	if len(t.Path) == 1 && t.Path[0] == mcp.NameHeaderField(method) {
		copts.Target = internal // Mcp-Name, as the params forwarded name it
	}
	if caps, ok := host.CallerCapabilities(ctx); ok && c.Modern() && !opts.PassInputRequired {
		// An older caller of a stateless upstream: declare what it can do,
		// as its own initialize would have (roots as the gateway answers them).
		copts.Capabilities = json.RawMessage(u.ViewCapabilities(caps))
	}
	if opts.PassInputRequired && c.Modern() {
		var jerr *jsonrpc.Error
		if params, jerr = v.openRequestState(ctx, upstream, params); jerr != nil { // requeststate.go
			return nil, jerr
		}
	}
	tc, terr := v.beginTaskCall(ctx, method, upstream, params, &copts) // tasks.go: the task a tools/call may create
	if terr != nil {
		return nil, terr
	}
	defer tc.end()
	start := u.Metrics().CallStarted()
	resp, cerr := c.Call(ctx, method, params, copts)
	if cerr == nil && c.Modern() && !opts.PassInputRequired {
		resp, cerr = v.fulfil(ctx, c, method, params, resp, copts)
	}
	u.Metrics().CallDone(method, start, callReason(resp, cerr))
	if cerr != nil {
		if gone := callerGone(ctx, upstream); gone != nil { // errors.go
			return nil, gone
		}
		return nil, callError(ctx, u.Upstream, method, cerr) // tasks.go
	}
	tc.result(resp) // tasks.go: a created task's id, sealed for the caller
	if opts.PassInputRequired && c.Modern() {
		v.sealRequestState(ctx, upstream, resp) // requeststate.go: bound to the caller
	}
	if !v.prefixed {
		return resp, nil
	}
	if resp.Error != nil {
		if t.URI() {
			v.rewriteErrorURI(resp.Error, internal, v.displayURI(ctx, upstream, internal, true))
		}
		return resp, nil
	}
	if res, err := v.rewriteResult(ctx, method, upstream, resp.Result); err == nil {
		resp.Result = res
	} else {
		u.Logger().Debug(method+" result not renamed for the route", zap.Error(err))
	}
	return resp, nil
}

// callReason classifies a call's end for metrics: -1 for a result.
func callReason(resp *jsonrpc.Message, err error) int {
	switch {
	case err == nil && resp != nil && resp.Error != nil:
		return metrics.ReasonErrorResponse
	case err == nil:
		return -1 // (no errors.As target made: it would escape on every call)
	case isTimeout(err):
		return metrics.ReasonTimeout
	case errors.Is(err, context.Canceled):
		return metrics.ReasonCancelled
	}
	return metrics.ReasonTransport
}

func isTimeout(err error) bool {
	var te *client.TimeoutError
	return errors.As(err, &te)
}

// maxInputRounds bounds how many input_required rounds the gateway answers
// on a caller's behalf before giving up on an upstream that keeps asking.
const maxInputRounds = 8

// fulfil bridges a 2026-07-28 upstream's input_required results for a
// caller of an older revision: each input request becomes a server→client
// request on the caller's stream (opts.Ask), and the original request is
// retried with the answers and the upstream's requestState, untouched.
func (v *View) fulfil(ctx context.Context, c *client.Client, method string, params json.RawMessage, resp *jsonrpc.Message, opts client.CallOptions) (*jsonrpc.Message, error) {
	for round := 0; ; round++ {
		if resp.Error != nil {
			return resp, nil
		}
		if rt, _ := rawjson.GetString(resp.Result, "resultType"); rt != "input_required" {
			return resp, nil
		}
		if !opts.CanAsk() || round == maxInputRounds {
			why := "the caller cannot receive server requests (it accepts no event stream)"
			if opts.CanAsk() {
				why = fmt.Sprintf("the upstream still asked for input after %d rounds", maxInputRounds)
			}
			resp.Result, resp.Error = nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the upstream needs input from the client, but %s", why)
			return resp, nil
		}
		requests, _ := rawjson.Get(resp.Result, "inputRequests")
		fields, _ := rawjson.Fields(requests)
		answers := []byte(`{}`)
		for _, f := range fields {
			m, _ := rawjson.GetString(f.Value, "method")
			p, _ := rawjson.Get(f.Value, "params")
			res, rerr := opts.Ask(ctx, m, p)
			if rerr != nil {
				resp.Result, resp.Error = nil, jsonrpc.Errorf(rerr.Code, "mcpgw: the client did not answer the upstream's %s: %s", m, rerr.Message)
				return resp, nil
			}
			var err error
			if answers, err = rawjson.Set(answers, f.Key, res); err != nil {
				return nil, err
			}
		}
		retry, err := rawjson.Set(params, "inputResponses", answers)
		if err != nil {
			return nil, err
		}
		if state, ok := rawjson.Get(resp.Result, "requestState"); ok {
			retry, _ = rawjson.Set(retry, "requestState", state)
		} else {
			retry, _ = rawjson.Delete(retry, "requestState")
		}
		if resp, err = c.Call(ctx, method, retry, opts); err != nil {
			return nil, err
		}
	}
}

// unknown names no upstream of the route: the answer is the same for
// every caller, and one may see nothing of some of them (their names
// show in the lists of those who may).
func (v *View) unknown(kind mcp.Kind, external string) *jsonrpc.Error {
	switch {
	case kind == mcp.KindResource && v.prefixed:
		return jsonrpc.Errorf(mcp.CodeResourceNotFound, "resource not found: %q: no upstream on this route lists it or has a template it matches; read a URI that a list or a result showed, or name the upstream as in %q", external, explicitURI("<upstream>", external))
	case kind == mcp.KindResource:
		return jsonrpc.Errorf(mcp.CodeResourceNotFound, "resource not found: %q", external)
	case v.prefixed && v.bare:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown %s %q: names on this route have the form <upstream>%s<name> (a bare name works while exactly one upstream has it)", kind, external, v.sep)
	case v.prefixed:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown %s %q: names on this route have the form <upstream>%s<name>", kind, external, v.sep)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown %s %q", kind, external)
}

// rewriteErrorURI names the resource of an upstream's error (resource not
// found: data.uri, and the message) as the route names it.
func (v *View) rewriteErrorURI(e *jsonrpc.Error, internal, external string) {
	if internal == external {
		return
	}
	if uri, ok := rawjson.GetString(e.Data, "uri"); ok && uri == internal {
		if d, err := rawjson.SetString(e.Data, "uri", external); err == nil {
			e.Data = d
		}
	}
	if !strings.Contains(e.Message, external) {
		e.Message = strings.ReplaceAll(e.Message, internal, external)
	}
}

// Each sends a request to every connected upstream of the view that offers
// capability, for settings the gateway fans out (logging/setLevel). Errors
// are logged, not returned: one upstream's refusal must not fail the rest.
// Only upstreams for which want returns true are asked; stateless upstreams
// never are (their settings travel in each request's _meta).
func (v *View) Each(ctx context.Context, capability, method string, params json.RawMessage, want func(upstream string) bool) {
	for _, name := range v.names {
		u := v.ups[name]
		if !want(name) {
			continue
		}
		// Settings come from sessions of older revisions: they go where
		// those sessions' calls go.
		c, err := u.ClientFor(ctx, true)
		if err != nil || c.Modern() || !c.HasCapability(capability) {
			continue
		}
		if resp, err := c.Call(ctx, method, params, client.CallOptions{}); err != nil || resp.Error != nil {
			u.Logger().Debug(method+" not accepted", zap.Error(err))
		}
	}
}

// Instructions merges the instructions of the upstreams shown lets the
// caller see: an unprefixed route passes its upstream's through; a
// prefixed one labels each part.
func (v *View) Instructions(shown Shown) string {
	var parts []string
	for _, name := range v.names {
		if !shown.has(name) {
			continue
		}
		u := v.ups[name]
		c := u.SharedClient()
		if c == nil || c.InitializeResult().Instructions == "" {
			continue
		}
		ins := c.InitializeResult().Instructions
		if !v.prefixed {
			return ins
		}
		parts = append(parts, fmt.Sprintf("## %s (tools prefixed %q)\n%s", name, name+v.sep, ins))
	}
	return strings.Join(parts, "\n\n")
}
