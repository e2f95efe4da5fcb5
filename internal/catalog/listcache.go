package catalog

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The list cache: each upstream's complete list of each kind, as the
// upstream paged it, so that a client's list is answered without asking
// fifty upstreams again; and on each view, the merged downstream pages
// already renamed for the route (pageCache), so that a warm page costs one
// lookup.
//
// What is cached is only what is the same for every caller: the lists of
// the upstream's shared connection, asked with no caller in the request's
// context. Never cached: stateful upstreams (each session lists on its
// own connection, and its lists may depend on the session's state),
// upstreams whose requests carry credentials of the caller (callerLists),
// pages the upstream marks cacheScope private, and list requests with
// params other than cursor and _meta. Those are asked of the upstream on
// every request, as before.
//
// Only an upstream that announces its list changes (the capability's
// listChanged) has a list kept until it announces one, whatever ttlMs it
// gives (the go-sdk gives 0 to every list); one that announces none is
// kept only for a positive ttlMs it gives. An upstream's cached lists are
// dropped when it announces any list change (Changed), when its connection changes (ConnectionChanged: a
// reconnect may offer other lists), after the smallest ttlMs its pages
// gave, and with the upstream on a reload that replaces it. A view's
// merged page holds pointers to the upstream lists it was made from and
// is used only while each of them is still the upstream's current one.

// Bounds: an upstream whose lists exceed maxListCacheBytes (all kinds
// together) keeps only what fits, the rest being asked every time; a
// view keeps at most maxPageCacheBytes of merged pages (it starts over
// when full).
const (
	maxListCacheBytes = 32 << 20
	maxPageCacheBytes = 64 << 20
)

// fullList is one upstream's complete list of one kind.
type fullList struct {
	client  *client.Client // the connection it was listed on
	ver     uint64         // the upstream's change count when the walk began
	pages   []page         // in the upstream's order; none: the upstream does not offer the list
	at      map[string]int // the upstream cursor that asks for each page ("" for the first)
	bytes   int64
	expires time.Time // zero: no ttlMs was given
	// uncacheable marks a walk that cannot be kept (private, too large):
	// until the next change, ask the upstream directly, without walking.
	uncacheable bool
}

// page returns the page the upstream answers for cursor.
func (f *fullList) page(cursor string) (page, bool) {
	if f == nil || f.uncacheable {
		return page{}, false
	}
	if len(f.pages) == 0 {
		return page{}, cursor == "" // offers no such list: nothing to ask
	}
	i, ok := f.at[cursor]
	if !ok {
		return page{}, false
	}
	return f.pages[i], true
}

// fullLists holds an upstream's complete lists by list method.
type fullLists struct {
	mu       sync.Mutex
	byMethod map[string]*fullList
	building map[string]chan struct{}
	bytes    int64
}

// detached is the caller's context without the caller: its end and
// deadline, none of its values. A cached list is asked for no one in
// particular, so that nothing of one caller reaches a list another is
// shown.
type detached struct{ context.Context }

func (detached) Value(any) any { return nil }

// listsShared reports whether the upstream's lists are the same for
// every caller, so that one caller's listing can answer another's.
func (u *upstreamState) listsShared() bool {
	return !u.Config().Stateful && !u.callerLists()
}

// callerLists reports whether the upstream's lists are asked for with
// the caller's own credentials (an exchanged or per-user upstream without
// a credential of its own for the shared connection): they may depend on
// who asks, so none is kept for another caller.
func (u *upstreamState) callerLists() bool { return u.ListsActForCaller() }

// bump records a change of the upstream's lists: everything cached of
// them is dropped.
func (u *upstreamState) bump() {
	fl := &u.full
	fl.mu.Lock()
	u.ver.Add(1)
	fl.byMethod, fl.bytes = nil, 0
	fl.mu.Unlock()
	u.Metrics().ListCacheBytes(0)
}

// currentFull returns the cached complete list of kind if it is still
// good: of the current connection, with no change announced since and
// its ttlMs not run out; nil otherwise.
func (u *upstreamState) currentFull(kind ListKind) *fullList {
	c := u.SharedClient()
	fl := &u.full
	fl.mu.Lock()
	f := fl.byMethod[kind.Method]
	fl.mu.Unlock()
	if f == nil || c == nil || f.client != c || f.ver != u.ver.Load() || (!f.expires.IsZero() && !u.now().Before(f.expires)) {
		return nil
	}
	return f
}

// now is the catalog's clock (ttlMs of cached lists).
func (u *upstreamState) now() time.Time {
	if u.clock != nil {
		return u.clock()
	}
	return time.Now()
}

// fullListing returns the upstream's complete list of kind, walking it
// when there is none (one walk at a time; concurrent callers wait for it).
// nil means it is not to be had from the cache: the upstream's lists
// are not shared, it is down, the walk failed, or the list cannot be kept.
func (u *upstreamState) fullListing(ctx context.Context, kind ListKind) *fullList {
	if !u.listsShared() {
		return nil
	}
	fl := &u.full
	for {
		if f := u.currentFull(kind); f != nil {
			if f.uncacheable {
				return nil
			}
			return f
		}
		c := u.SharedClient()
		if c == nil {
			return nil
		}
		fl.mu.Lock()
		if wait := fl.building[kind.Method]; wait != nil {
			fl.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if fl.building == nil {
			fl.building = map[string]chan struct{}{}
		}
		done := make(chan struct{})
		fl.building[kind.Method] = done
		ver := u.ver.Load()
		fl.mu.Unlock()

		f := u.walkFull(detached{ctx}, c, kind, ver)
		fl.mu.Lock()
		delete(fl.building, kind.Method)
		stored := false
		if f != nil && u.ver.Load() == ver {
			if old := fl.byMethod[kind.Method]; old != nil {
				fl.bytes -= old.bytes
			}
			if fl.bytes+f.bytes > maxListCacheBytes && !f.uncacheable {
				u.Metrics().ListUncacheable("too_large")
				u.Logger().Info(kind.Method+" is too large to cache with this upstream's other lists; it is asked of the upstream on every list",
					zap.Int64("bytes", f.bytes), zap.Int64("cached_bytes", fl.bytes), zap.Int("max_bytes", maxListCacheBytes))
				f = &fullList{client: c, ver: ver, uncacheable: true}
			}
			if fl.byMethod == nil {
				fl.byMethod = map[string]*fullList{}
			}
			fl.byMethod[kind.Method] = f
			fl.bytes += f.bytes
			stored = true
		}
		total := fl.bytes
		fl.mu.Unlock()
		close(done)
		if stored {
			u.Metrics().ListCacheBytes(total)
		}
		if f == nil || f.uncacheable {
			return nil
		}
		return f
	}
}

// walkFull lists the whole of kind on c, page by page, as a client that
// names no one asks for it. It returns nil when the walk did not finish
// (a failure, an error answer, ctx ended: not worth keeping) and an
// uncacheable list for one that must not be kept.
func (u *upstreamState) walkFull(ctx context.Context, c *client.Client, kind ListKind, ver uint64) *fullList {
	f := &fullList{client: c, ver: ver, at: map[string]int{}}
	if !kind.offeredBy(c) {
		return f
	}
	// An upstream that announces changes (listChanged) is cached until it
	// does; one that does not, only for the ttlMs it gives (a positive
	// one: 0 is "stale at once"), else not at all. A positive ttlMs
	// bounds the first kind too: the upstream asked for no longer.
	announces := mcp.ServerCapability{Path: []string{kind.Capability, "listChanged"}}.In(c.InitializeResult().Capabilities)
	params := json.RawMessage(`{}`)
	var ttl int64 = -1
	for cur := ""; ; {
		if len(f.pages) == maxIndexPages || f.bytes > maxListCacheBytes {
			return &fullList{client: c, ver: ver, uncacheable: true, bytes: 0}
		}
		if _, seen := f.at[cur]; seen {
			return nil // an upstream whose cursors go round in circles
		}
		p := u.fetchPage(ctx, kind, params, cur)
		if !p.ok || p.client != c {
			return nil
		}
		if p.private {
			u.Metrics().ListUncacheable("private")
			return &fullList{client: c, ver: ver, uncacheable: true}
		}
		if p.ttl > 0 && (ttl < 0 || p.ttl < ttl) {
			ttl = p.ttl
		}
		f.at[cur] = len(f.pages)
		f.pages = append(f.pages, p)
		f.bytes += int64(len(p.res))
		if p.next == "" {
			break
		}
		cur = p.next
	}
	if ttl > 0 {
		f.expires = u.now().Add(time.Duration(ttl) * time.Millisecond)
	} else if !announces {
		u.Metrics().ListUncacheable("unannounced")
		return &fullList{client: c, ver: ver, uncacheable: true}
	}
	return f
}

// shareableParams reports whether a list request's params ask for
// nothing but a page (cursor) with request metadata (_meta): a cached
// list answers only those.
func shareableParams(params json.RawMessage) bool {
	ok := true
	err := rawjson.EachField(params, func(f rawjson.Field) bool {
		ok = f.Key == "cursor" || f.Key == "_meta"
		return ok
	})
	return ok && err == nil
}

// pageCache holds a view's merged downstream pages, renamed for the route.
type pageCache struct {
	mu    sync.Mutex
	pages map[string]*mergedPage // by list method and downstream cursor
	bytes int
}

// mergedPage is one downstream page, valid while every upstream's
// current complete list is still the one it was made from.
type mergedPage struct {
	from []*fullList // in v.names order
	out  json.RawMessage
}

func pageKey(kind ListKind, cursor string) string { return kind.Method + "\x00" + cursor }

// cachedPage returns the merged page for key if it is still good.
func (v *View) cachedPage(kind ListKind, key string) (json.RawMessage, bool) {
	v.cache.mu.Lock()
	mp := v.cache.pages[key]
	v.cache.mu.Unlock()
	if mp == nil {
		return nil, false
	}
	for i, name := range v.names {
		if v.ups[name].currentFull(kind) != mp.from[i] {
			// Stale: dropped now, so that it holds on to no upstream's
			// old lists.
			v.cache.mu.Lock()
			if v.cache.pages[key] == mp {
				delete(v.cache.pages, key)
				v.cache.bytes -= len(mp.out)
			}
			v.cache.mu.Unlock()
			return nil, false
		}
	}
	return mp.out, true
}

// snapshot is every upstream's current complete list of kind, in v.names
// order; false when one of them has none (then a merged page is not kept).
func (v *View) snapshot(kind ListKind) ([]*fullList, bool) {
	from := make([]*fullList, len(v.names))
	for i, name := range v.names {
		if from[i] = v.ups[name].currentFull(kind); from[i] == nil || from[i].uncacheable {
			return nil, false
		}
	}
	return from, true
}

// keepPage stores a merged page made from the lists in from.
func (v *View) keepPage(key string, from []*fullList, out json.RawMessage) {
	pc := &v.cache
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if old := pc.pages[key]; old != nil {
		pc.bytes -= len(old.out)
	}
	if pc.pages == nil || pc.bytes+len(out) > maxPageCacheBytes {
		pc.pages, pc.bytes = map[string]*mergedPage{}, 0
	}
	if len(out) > maxPageCacheBytes {
		return
	}
	pc.pages[key] = &mergedPage{from: from, out: out}
	pc.bytes += len(out)
}
