package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// toolSchemas caches one upstream's tool definitions (raw, as the upstream
// sent them), for what the gateway must check against a tool's definition
// itself: the x-mcp-header annotations of 2026-07-28 and definition
// pinning. It is filled by walking the upstream's tools/list once and
// dropped when the upstream announces a change or reconnects.
type toolSchemas struct {
	mu       sync.Mutex
	byName   map[string]json.RawMessage
	complete bool
	// version counts the changes to byName, so that what is derived from
	// it (the search segment, toolindex.go) knows when to rebuild.
	version uint64
	search  *toolSegment // the search index of version search.version
}

// invalidate forgets the cached schemas.
func (t *toolSchemas) invalidate() {
	t.mu.Lock()
	t.byName, t.complete = nil, false
	t.version++
	t.mu.Unlock()
}

// observeItems refreshes cached definitions from the items of a tools/list
// page the gateway just fetched, so that a definition a client is shown and the one its
// call is checked against (pinning, x-mcp-header) never differ.
func (t *toolSchemas) observeItems(items [][]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName == nil {
		return // cold: the next lookup lists everything
	}
	for _, it := range items {
		if n, ok := rawjson.GetString(it, "name"); ok {
			if old, had := t.byName[n]; !had || !bytes.Equal(old, it) {
				t.version++
			}
			t.byName[n] = it
		}
	}
}

// toolDef returns the upstream's raw definition of tool name, listing the
// upstream's tools when the cache is cold.
func (u *upstreamState) toolDef(ctx context.Context, name string) (json.RawMessage, bool) {
	def, ok, _ := u.sharedToolDef(ctx, name)
	return def, ok
}

// sharedToolDef is toolDef telling apart a tool the upstream does not list
// (false, nil) from one that could not be listed (err).
func (u *upstreamState) sharedToolDef(ctx context.Context, name string) (json.RawMessage, bool, error) {
	t := &u.schemas
	t.mu.Lock()
	if t.complete {
		s, ok := t.byName[name]
		t.mu.Unlock()
		return s, ok, nil
	}
	t.mu.Unlock()

	c, err := u.Client(ctx)
	if err != nil {
		return nil, false, err
	}
	byName, err := walkTools(ctx, c)
	if err != nil {
		return nil, false, err
	}
	t.mu.Lock()
	t.byName, t.complete = byName, true
	t.version++
	t.mu.Unlock()
	s, ok := byName[name]
	return s, ok, nil
}

// walkTools lists every tool c offers, by name, as sent.
func walkTools(ctx context.Context, c *client.Client) (map[string]json.RawMessage, error) {
	return walkNamed(ctx, c, Tools)
}

// walkNamed lists every item of kind (tools or prompts) c offers, by
// name, as sent. A list longer than maxIndexPages is kept in part.
func walkNamed(ctx context.Context, c *client.Client, kind ListKind) (map[string]json.RawMessage, error) {
	byName := map[string]json.RawMessage{}
	err := eachPage(ctx, c, kind, maxIndexPages, false, func(items [][]byte) {
		for _, it := range items {
			if n, ok := rawjson.GetString(it, "name"); ok {
				byName[n] = it
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return byName, nil
}

// MaxToolPages bounds the tools/list pages UpstreamTools reads, against an
// upstream whose cursors never end.
const MaxToolPages = 10_000

// UpstreamTools lists every tool u offers on a connection of its own, as
// the upstream sent each one, waiting for u's first connection. Unlike the
// catalog's own walks it is strict: an error answer, a page without a
// tools array, a cursor that comes back, or more than MaxToolPages pages
// fail it, since what it lists is approved whole (mcpgw pin).
func UpstreamTools(ctx context.Context, u *host.Upstream) ([][]byte, error) {
	c, err := u.Client(ctx)
	if err != nil {
		return nil, err
	}
	var tools [][]byte
	err = eachPage(ctx, c, Tools, MaxToolPages, true, func(items [][]byte) { tools = append(tools, items...) })
	if err != nil {
		return nil, err
	}
	return tools, nil
}

// eachPage walks kind's pages on c from the first, handing each page's
// items to page, until a page names no nextCursor. An upstream that does
// not offer kind lists nothing. At most maxPages pages are read: past
// that the walk ends quietly, or, when strict, with an error. Strict also
// fails a page without kind's array and a cursor that comes back, and
// names the method in its errors.
func eachPage(ctx context.Context, c *client.Client, kind ListKind, maxPages int, strict bool, page func(items [][]byte)) error {
	if !kind.offeredBy(c) {
		return nil
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == maxPages {
			if strict {
				return fmt.Errorf("%s: more than %d pages; the upstream's cursors do not end", kind.Method, maxPages)
			}
			return nil
		}
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = rawjson.SetString(params, "cursor", cursor)
		}
		resp, err := c.Call(ctx, kind.Method, params, client.CallOptions{})
		if err != nil {
			if strict {
				return fmt.Errorf("%s: %w", kind.Method, err)
			}
			return err
		}
		if resp.Error != nil {
			if strict {
				return fmt.Errorf("%s: error %d: %s", kind.Method, resp.Error.Code, resp.Error.Message)
			}
			return resp.Error
		}
		arr, ok := rawjson.Get(resp.Result, kind.Key)
		if !ok && strict {
			return fmt.Errorf("%s: the result has no %q array", kind.Method, kind.Key)
		}
		items, err := rawjson.Elements(arr)
		if err != nil && strict {
			return fmt.Errorf("%s: %s: %w", kind.Method, kind.Key, err)
		}
		page(items)
		if cursor, _ = rawjson.GetString(resp.Result, "nextCursor"); cursor == "" {
			return nil
		}
		if strict {
			if seen[cursor] {
				return fmt.Errorf("%s: cursor %q came back twice; the upstream's pagination loops", kind.Method, cursor)
			}
			seen[cursor] = true
		}
	}
}

// ToolSchema returns the inputSchema of a tool by its downstream name.
func (v *View) ToolSchema(ctx context.Context, external string) (json.RawMessage, bool) {
	_, def, ok := v.Tool(ctx, external)
	if !ok {
		return nil, false
	}
	s, ok := rawjson.Get(def, "inputSchema")
	return s, ok
}

// Tool returns a tool's upstream and its definition as that upstream sent it
// (its own name, no prefix), by the tool's downstream name (prefixed or,
// while unambiguous, bare).
func (v *View) Tool(ctx context.Context, external string) (upstream string, def json.RawMessage, ok bool) {
	r, ok, _ := v.resolve(ctx, mcp.KindTool, external, true, nil) // a bare name too
	if !ok {
		return "", nil, false
	}
	def, ok = v.ups[r.upstream].toolDef(ctx, r.internal)
	return r.upstream, def, ok
}
