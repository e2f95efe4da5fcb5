package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Merged lists. A downstream page holds as many whole upstream pages as
// fit the route's page size, upstreams in name order and each upstream's
// items in its own order; an upstream page is never split. A page ends
// with a nextCursor only when the page size was reached or an upstream
// paged further than one downstream page follows (maxUpstreamPages), so a
// client that lists once sees the whole catalog of upstreams that do not
// paginate, up to the page size.

// maxUpstreamPages bounds the upstream pages one downstream page asks
// for: an upstream that pages in small steps is followed this far, and
// the page then ends with a cursor to go on from.
const maxUpstreamPages = 64

// cursor is the composite pagination cursor: which upstream to go on with
// and that upstream's own cursor. It is opaque to clients: base64 of the
// JSON with a checksum, so that a cursor altered in transit or by hand is
// refused rather than read as another position (it is not secret, and it
// grants nothing: the upstream must be on the route, and policy filters
// every page).
type cursor struct {
	V        int    `json:"v"`
	Kind     string `json:"k"`
	Upstream string `json:"u"`
	Cursor   string `json:"c,omitempty"`
}

const (
	cursorVersion  = 1
	cursorSumBytes = 8
)

func encodeCursor(c cursor) string {
	c.V = cursorVersion
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(append(b, sum[:cursorSumBytes]...))
}

var errBadCursor = errors.New("invalid cursor: it is not a nextCursor this gateway issued; pass back the nextCursor of the previous page unchanged, or start again without a cursor")

func decodeCursor(kind ListKind, s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) <= cursorSumBytes {
		return cursor{}, errBadCursor
	}
	body := b[:len(b)-cursorSumBytes]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:cursorSumBytes], b[len(b)-cursorSumBytes:]) {
		return cursor{}, errBadCursor
	}
	var c cursor
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil || dec.More() || c.V != cursorVersion || c.Upstream == "" {
		return cursor{}, errBadCursor
	}
	if c.Kind != kind.Key {
		for _, m := range mcp.ListMethods() {
			if k, _ := ListKindOf(m); k.Key == c.Kind {
				return cursor{}, fmt.Errorf("invalid cursor: it continues %s, not %s; pass each list its own nextCursor", k.Method, kind.Method)
			}
		}
		return cursor{}, errBadCursor
	}
	return c, nil
}

// page is one upstream page of a list.
type page struct {
	ok      bool            // the upstream answered (false: down, no such list, failed)
	res     json.RawMessage // its result object
	items   [][]byte
	next    string
	client  *client.Client // the connection it came from
	ttl     int64          // its ttlMs, -1 for none
	private bool           // its cacheScope is private
	// denied is why the caller could not be given a connection when the
	// upstream needs the caller's own credential first (credentialError:
	// authorize the gateway, or a refused exchange); nil otherwise.
	denied *jsonrpc.Error
}

// List answers one page of a merged list (see above). An upstream that is
// down, offers no such list or fails is skipped: its items are absent
// until it returns, and the lists announce it.
func (v *View) List(ctx context.Context, kind ListKind, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	start, upCursor, downCursor := 0, "", ""
	if s, ok := rawjson.GetString(params, "cursor"); ok {
		downCursor = s
		c, err := decodeCursor(kind, s)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err)
		}
		start = slices.Index(v.names, c.Upstream)
		if start < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid cursor: upstream %q is no longer on this route; start the list again without a cursor", c.Upstream)
		}
		upCursor = c.Cursor
	}
	// A request for nothing but a page is the same for every caller: a
	// page merged before from the same upstream lists is the answer
	// (listcache.go).
	shared := shareableParams(params)
	key := pageKey(kind, downCursor)
	if shared {
		if out, ok := v.cachedPage(kind, key); ok {
			return out, nil
		}
	}
	ups := v.names[start:]
	// Taken before listing: a change announced meanwhile leaves what this
	// list feeds the index marked stale.
	gens := make([]uint64, len(ups))
	for i, name := range ups {
		gens[i] = v.ups[name].lists.generation(kind.Method)
	}
	// The first page of every upstream at once: a page that fills needs
	// them all, and then costs the slowest upstream's time, not the sum.
	// Each from the upstream's cached complete list where there is one.
	first := make([]page, len(ups))
	fulls := make([]*fullList, len(ups))
	live := make([]bool, len(ups)) // some page was asked of the upstream itself
	all := make([]int, len(ups))
	for i := range all {
		all[i] = i
	}
	concurrently(all, func(i int) {
		cur := ""
		if i == 0 {
			cur = upCursor
		}
		u := v.ups[ups[i]]
		if shared {
			fulls[i] = u.fullListing(ctx, kind)
		}
		if p, ok := fulls[i].page(cur); ok {
			first[i] = p
			return
		}
		first[i], live[i] = u.fetchPage(ctx, kind, params, cur), true
	})

	type part struct {
		upstream string
		items    [][]byte
	}
	var (
		parts   []part
		results []page
		n       int
		next    string
		fetched = len(ups)
	)
fill:
	for i, name := range ups {
		p, cur := first[i], ""
		if i == 0 {
			cur = upCursor
		}
		fromStart := cur == ""
		var ids []string
		for p.ok {
			if n > 0 && n+len(p.items) > v.pageSize {
				next = encodeCursor(cursor{Kind: kind.Key, Upstream: name, Cursor: cur})
				break fill
			}
			parts = append(parts, part{name, p.items})
			results = append(results, p)
			n += len(p.items)
			if kind != Tools {
				ids = appendIDs(ids, kind, p.items)
			}
			if p.next == "" {
				if u := v.ups[name]; fromStart && kind != Tools && p.client == u.SharedClient() {
					// Walked whole: what the index holds for this
					// upstream is now exactly this.
					u.lists.put(kind.Method, newListing(p.client, kind, name, ids), gens[i])
				}
				break
			}
			if fetched >= maxUpstreamPages || n >= v.pageSize {
				next = encodeCursor(cursor{Kind: kind.Key, Upstream: name, Cursor: p.next})
				break fill
			}
			cur = p.next
			// Cached or not, pages count alike: the pages a client sees
			// are the same whether the cache is warm.
			if q, ok := fulls[i].page(cur); ok {
				p = q
			} else {
				p, live[i] = v.ups[name].fetchPage(ctx, kind, params, cur), true
			}
			fetched++
		}
		if n >= v.pageSize {
			// Full: go on with the next upstream that has anything.
			if j := slices.IndexFunc(first[i+1:], func(p page) bool { return p.ok && (len(p.items) > 0 || p.next != "") }); j >= 0 {
				next = encodeCursor(cursor{Kind: kind.Key, Upstream: ups[i+1+j]})
			}
			break
		}
	}

	if len(results) == 0 {
		// Nothing listed, because an upstream needs the caller's own
		// credential first: say so (the -32042 link to authorize) rather
		// than answer an empty list the caller cannot act on.
		for _, p := range first {
			if p.denied != nil {
				return nil, p.denied
			}
		}
		out := []byte(`{"` + kind.Key + `":[]}`)
		if next != "" {
			out, _ = rawjson.SetString(out, "nextCursor", next)
		}
		return out, nil
	}
	out := results[0].res
	var err error
	curating := kind.Key == Tools.Key && v.cur != nil
	if v.prefixed || len(parts) > 1 || curating {
		items := make([][]byte, 0, n)
		for _, p := range parts {
			for _, it := range p.items {
				id, _ := rawjson.GetString(it, kind.Field)
				if v.prefixed {
					var ok bool
					if it, ok = v.rewriteItem(ctx, kind, p.upstream, it); !ok {
						continue
					}
				}
				if curating {
					var ok bool
					if it, ok = v.curateItem(p.upstream, id, it); !ok { // curation.go
						continue
					}
				}
				items = append(items, it)
			}
		}
		if out, err = rawjson.Set(out, kind.Key, rawjson.AppendArray(nil, items)); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: could not merge %s: %v", kind.Method, err)
		}
		if len(results) > 1 {
			out = mergeHints(out, results)
		}
	}
	if next != "" {
		out, err = rawjson.SetString(out, "nextCursor", next)
	} else {
		out, err = rawjson.Delete(out, "nextCursor")
	}
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: could not page %s: %v", kind.Method, err)
	}
	if shared && !slices.Contains(live, true) {
		v.keepMerged(kind, key, start, fulls, out)
	}
	return out, nil
}

// keepMerged keeps a page merged wholly from cached lists (fulls, of the
// upstreams from start on), if every upstream's current list is still
// the one it used: a change meanwhile leaves it unkept.
func (v *View) keepMerged(kind ListKind, key string, start int, fulls []*fullList, out json.RawMessage) {
	from, ok := v.snapshot(kind)
	if !ok || !slices.Equal(from[start:], fulls) {
		return
	}
	v.keepPage(key, from, out)
}

// fetchPage asks the upstream for one page of kind.
func (u *upstreamState) fetchPage(ctx context.Context, kind ListKind, params json.RawMessage, upCursor string) page {
	c, err := u.ListClient(ctx)
	if err != nil {
		u.Logger().Debug("skipping unavailable upstream in "+kind.Method, zap.Error(err))
		return page{denied: credentialError(err)}
	}
	if !kind.offeredBy(c) {
		return page{}
	}
	p, err := rawjson.Delete(params, "cursor")
	if err == nil && upCursor != "" {
		p, err = rawjson.SetString(p, "cursor", upCursor)
	}
	if err != nil {
		return page{}
	}
	resp, err := c.Call(ctx, kind.Method, p, client.CallOptions{})
	if err != nil {
		u.Logger().Warn(kind.Method+" failed; its items are left out of this page", zap.Error(err))
		// The caller's credential may have been refused on the way (a
		// per-user token the upstream no longer takes).
		return page{denied: credentialError(err)}
	}
	if resp.Error != nil {
		u.Logger().Warn(kind.Method+" answered an error; its items are left out of this page",
			zap.Int("code", resp.Error.Code), zap.String("message", resp.Error.Message))
		return page{}
	}
	res := resp.Result
	pg := page{ok: true, res: res, client: c, ttl: -1}
	// One pass over the result's members: the items, the cursor, the hints.
	var itemsErr error
	err = rawjson.EachField(res, func(f rawjson.Field) bool {
		switch f.Key {
		case kind.Key:
			pg.items, itemsErr = rawjson.Elements(f.Value)
		case "nextCursor":
			_ = json.Unmarshal(f.Value, &pg.next) // a string, or no cursor
		case "ttlMs":
			if t, perr := strconv.ParseInt(string(f.Value), 10, 64); perr == nil && t >= 0 {
				pg.ttl = t
			}
		case "cacheScope":
			var scope string
			pg.private = json.Unmarshal(f.Value, &scope) == nil && scope == "private"
		}
		return itemsErr == nil
	})
	if err == nil {
		err = itemsErr
	}
	if err != nil {
		u.Logger().Warn(kind.Method+" result unreadable; its items are left out", zap.Error(err))
		return page{}
	}
	if kind.Key == Tools.Key && !u.Config().Stateful {
		// What clients are shown is what calls are checked against.
		u.schemas.observeItems(pg.items)
	}
	if kind.Key == Tools.Key && c.Modern() {
		if kept := u.dropInvalidHeaderTools(pg.items); len(kept) != len(pg.items) { // paramheaders.go
			// The page may be passed on whole (one unprefixed part).
			if res, err := rawjson.Set(pg.res, kind.Key, rawjson.AppendArray(nil, kept)); err == nil {
				pg.items, pg.res = kept, res
			}
		}
	}
	return pg
}

// mergeHints gives a page merged from several upstream pages the 2026-07-28
// cache hints that hold for all of them: the smallest ttlMs any gave, and
// cacheScope private if any was private. The other members are the first
// page's.
func mergeHints(out []byte, pages []page) []byte {
	ttl, private := int64(-1), false
	for _, p := range pages {
		if p.ttl >= 0 && (ttl < 0 || p.ttl < ttl) {
			ttl = p.ttl
		}
		private = private || p.private
	}
	if ttl >= 0 {
		if o, err := rawjson.Set(out, "ttlMs", []byte(strconv.FormatInt(ttl, 10))); err == nil {
			out = o
		}
	}
	if private {
		if o, err := rawjson.SetString(out, "cacheScope", "private"); err == nil {
			out = o
		}
	}
	return out
}
