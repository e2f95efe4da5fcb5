package catalog

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The catalog index: what each upstream lists (prompt names, resource
// URIs, resource templates), so that a route can tell whether a URI is
// unique on it, which upstream a bare name or an unlisted URI belongs to,
// and name what it hands out accordingly. Tool names come from
// toolSchemas (schemas.go), which already holds every tool definition.
//
// An upstream's listing is walked on first need over its shared
// connection, kept until the upstream announces a change (CatalogChanged)
// or reconnects, and refreshed for free whenever a client's list walks
// that upstream from its first page to its last.

// Bounds on one upstream's listing: a larger catalog is indexed only in
// part (the rest is still listed and served; only bare names and URI
// uniqueness beyond the bound are not known).
const (
	maxIndexPages = 1000
	maxIndexItems = 100_000
)

// listing is one upstream's complete answer to one list method.
type listing struct {
	client *client.Client // the connection it was listed on
	stale  bool           // a change was announced since (guarded by listCache.mu)
	ids    []string       // the items' identifying strings, in listed order
	set    map[string]bool
	// For resource templates: a matcher per template (nil where it
	// cannot be read) and each template's explicit form.
	matchers []*regexp.Regexp
	explicit map[string]string
}

func newListing(c *client.Client, kind ListKind, upstream string, ids []string) *listing {
	l := &listing{client: c, ids: ids, set: make(map[string]bool, len(ids))}
	for _, id := range ids {
		l.set[id] = true
	}
	if kind.Key == ResourceTemplates.Key {
		l.matchers = make([]*regexp.Regexp, len(ids))
		l.explicit = make(map[string]string, len(ids))
		for i, id := range ids {
			l.matchers[i] = compileTemplate(id)
			l.explicit[explicitTemplate(upstream, id)] = id
		}
	}
	return l
}

// matches reports whether one of the listed templates matches uri.
func (l *listing) matches(uri string) bool {
	for _, m := range l.matchers {
		if m != nil && m.MatchString(uri) {
			return true
		}
	}
	return false
}

// listCache holds an upstream's listings by list method.
type listCache struct {
	mu       sync.Mutex
	last     map[string]*listing // the latest complete listing, maybe stale
	gen      map[string]uint64   // bumped by every announced change
	building map[string]chan struct{}
}

// invalidate marks the listing of method stale: the next lookup that may
// list walks the upstream again.
func (lc *listCache) invalidate(method string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.gen == nil {
		lc.gen = map[string]uint64{}
	}
	lc.gen[method]++
	if l := lc.last[method]; l != nil {
		l.stale = true
	}
}

// generation is the change count of method, taken before a walk so that
// a change announced during it marks its result stale.
func (lc *listCache) generation(method string) uint64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.gen[method]
}

// put stores a listing walked at generation g.
func (lc *listCache) put(method string, l *listing, g uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.last == nil {
		lc.last = map[string]*listing{}
	}
	l.stale = lc.gen[method] != g
	lc.last[method] = l
}

// cachedListing returns the latest listing of kind without listing, and
// whether it is fresh: of the current connection with no change announced
// since (an upstream that is down has nothing fresher to offer).
func (u *upstreamState) cachedListing(kind ListKind) (*listing, bool) {
	c := u.SharedClient()
	u.lists.mu.Lock()
	defer u.lists.mu.Unlock()
	l := u.lists.last[kind.Method]
	return l, c == nil || (l != nil && !l.stale && l.client == c)
}

// listing returns the upstream's current listing for kind. With fetch it
// walks the upstream when the listing is missing, stale or of an older
// connection (one walk at a time; concurrent callers wait for it); without
// fetch it returns the latest listing as it is, or nil. Lookups without
// fetch serve callers that must not wait on the upstream, such as the
// delivery of its own notifications.
func (u *upstreamState) listing(ctx context.Context, kind ListKind, fetch bool) *listing {
	lc := &u.lists
	for {
		c := u.SharedClient()
		lc.mu.Lock()
		l := lc.last[kind.Method]
		if l != nil && (!fetch || (!l.stale && l.client == c)) {
			lc.mu.Unlock()
			return l
		}
		if !fetch || c == nil {
			lc.mu.Unlock()
			return l
		}
		if wait := lc.building[kind.Method]; wait != nil {
			lc.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return l
			}
		}
		if lc.building == nil {
			lc.building = map[string]chan struct{}{}
		}
		done := make(chan struct{})
		lc.building[kind.Method] = done
		g := lc.gen[kind.Method]
		lc.mu.Unlock()

		nl := u.walk(ctx, c, kind)
		if nl != nil {
			lc.put(kind.Method, nl, g)
		}
		lc.mu.Lock()
		delete(lc.building, kind.Method)
		lc.mu.Unlock()
		close(done)
		if nl == nil {
			return l
		}
		return nl
	}
}

// walk lists everything of kind the upstream offers on c. It returns nil
// when the walk could not finish (the connection failed, ctx ended); an
// upstream that answers the list with an error, or does not offer it, lists
// nothing.
func (u *upstreamState) walk(ctx context.Context, c *client.Client, kind ListKind) *listing {
	var ids []string
	if !kind.offeredBy(c) {
		return newListing(c, kind, u.Name(), nil)
	}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == maxIndexPages || len(ids) >= maxIndexItems {
			u.Logger().Warn(kind.Method+" is too long to index whole; bare names and URI uniqueness are judged on its first part",
				zap.Int("pages", pages), zap.Int("items", len(ids)))
			break
		}
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = rawjson.SetString(params, "cursor", cursor)
		}
		resp, err := c.Call(ctx, kind.Method, params, client.CallOptions{})
		if err != nil {
			u.Logger().Debug("could not index "+kind.Method, zap.Error(err))
			return nil
		}
		if resp.Error != nil {
			u.Logger().Debug(kind.Method+" answered an error; indexed as empty", zap.Int("code", resp.Error.Code))
			return newListing(c, kind, u.Name(), nil)
		}
		arr, _ := rawjson.Get(resp.Result, kind.Key)
		items, _ := rawjson.Elements(arr)
		ids = appendIDs(ids, kind, items)
		if cursor, _ = rawjson.GetString(resp.Result, "nextCursor"); cursor == "" {
			break
		}
	}
	return newListing(c, kind, u.Name(), ids)
}

// appendIDs appends the identifying strings of a list page's items.
func appendIDs(ids []string, kind ListKind, items [][]byte) []string {
	for _, it := range items {
		if kind.Key == Skills.Key {
			ids = appendSkillIDs(ids, it) // skills.go: the skill's files and directories too
			continue
		}
		if id, ok := rawjson.GetString(it, kind.Field); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// hasTool reports whether the upstream lists tool name (without fetch:
// as far as its cached definitions tell).
func (u *upstreamState) hasTool(ctx context.Context, name string, fetch bool) bool {
	if !fetch || u.SharedClient() == nil {
		// Down or still starting: nothing to ask (and no first
		// connection to wait for).
		u.schemas.mu.Lock()
		defer u.schemas.mu.Unlock()
		_, ok := u.schemas.byName[name]
		return ok
	}
	_, ok := u.toolDef(ctx, name)
	return ok
}

// toolsIndexed reports whether every tool the upstream lists is known
// without asking it (or there is no one to ask).
func (u *upstreamState) toolsIndexed() bool {
	if u.SharedClient() == nil {
		return true
	}
	u.schemas.mu.Lock()
	defer u.schemas.mu.Unlock()
	return u.schemas.complete
}

// offers reports whether the upstream is connected and offers capability.
func (u *upstreamState) offers(capability string) bool {
	c := u.SharedClient()
	return c != nil && c.HasCapability(capability)
}

// Changed tells the catalog that upstream of h announced a list change
// (method is the list_changed notification), so that what it indexed of
// that list is walked again before the next use.
func Changed(h *host.Host, upstream, method string) {
	hu := h.Upstream(upstream)
	if hu == nil {
		return
	}
	u := stateOf(hu)
	changed := mcp.ListsChangedBy(method) // resources/list_changed: skills too, skill files are resources
	if len(changed) == 0 {
		return
	}
	for _, list := range changed {
		if list == Tools.Method {
			u.schemas.invalidate() // the tools are indexed with their schemas
			continue
		}
		u.lists.invalidate(list)
	}
	u.bump() // listcache.go: any list's change may rename what the others show
}
