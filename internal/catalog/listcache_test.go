package catalog

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// listAsks is how many tools/list requests the upstreams received.
func listAsks(ups map[string]*fakeUpstream) int {
	n := 0
	for _, u := range ups {
		n += u.lists(mcp.MethodToolsList)
	}
	return n
}

func flatten(pages [][]string) []string { return slices.Concat(pages...) }

// A warm listing is answered from the cache; what drops the cache makes
// the next listing ask again and show the upstream's current tools; what
// must not be shared is asked every time.
func TestListCache(t *testing.T) {
	type env struct {
		h     *host.Host
		ups   map[string]*fakeUpstream
		clock *time.Time
	}
	addTool := func(e env) {
		e.ups["a"].mu.Lock()
		e.ups["a"].tools = append(e.ups["a"].tools, `{"name":"new"}`)
		e.ups["a"].mu.Unlock()
	}
	for _, tc := range []struct {
		name        string
		handleList  string // members every list page carries
		unannounced bool   // the upstreams declare no listChanged
		between     func(e env)
		wantAsks    int  // tools/list requests of the second listing
		wantNew     bool // the second listing shows a__new
	}{
		{name: "warm: no upstream asked", between: func(env) {}, wantAsks: 0},
		{name: "an unannounced change is not seen", between: addTool, wantAsks: 0},
		{name: "list_changed drops it", between: func(e env) {
			addTool(e)
			Changed(e.h, "a", mcp.NotificationToolsListChanged)
		}, wantAsks: 2, wantNew: true}, // a's two pages; b's list is still good
		{name: "another list's change drops it too", between: func(e env) {
			addTool(e)
			Changed(e.h, "a", mcp.NotificationResourcesChanged)
		}, wantAsks: 2, wantNew: true},
		{name: "a notification that changes no list keeps it", between: func(e env) {
			Changed(e.h, "a", "notifications/message")
		}, wantAsks: 0},
		{name: "a connection change drops it", between: func(e env) {
			addTool(e)
			stateOf(e.h.Upstream("a")).ConnectionChanged()
		}, wantAsks: 2, wantNew: true},
		{name: "ttlMs not yet run out", handleList: `,"ttlMs":60000`, between: func(e env) {
			*e.clock = e.clock.Add(59 * time.Second)
		}, wantAsks: 0},
		{name: "ttlMs run out", handleList: `,"ttlMs":60000`, between: func(e env) {
			addTool(e)
			*e.clock = e.clock.Add(61 * time.Second)
		}, wantAsks: 3, wantNew: true},
		{name: "ttlMs 0 of an upstream that announces changes", handleList: `,"ttlMs":0`, between: addTool, wantAsks: 0},
		{name: "no listChanged: asked every time", unannounced: true, between: addTool, wantAsks: 3, wantNew: true},
		{name: "no listChanged, ttlMs 0: asked every time", unannounced: true, handleList: `,"ttlMs":0`, between: addTool, wantAsks: 3, wantNew: true},
		{name: "no listChanged, kept for its ttlMs", unannounced: true, handleList: `,"ttlMs":60000`, between: addTool, wantAsks: 0},
		{name: "private pages are asked every time", handleList: `,"cacheScope":"private"`, between: addTool, wantAsks: 3, wantNew: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ups := map[string]*fakeUpstream{
				"a": {tools: items("name", "t", 3), pageSize: 2, handleList: tc.handleList, noListChanged: tc.unannounced},
				"b": {tools: items("name", "t", 1), handleList: tc.handleList, noListChanged: tc.unannounced},
			}
			h := fakeHost(t, ups)
			var mu sync.Mutex
			now := time.Unix(1e9, 0)
			for _, n := range []string{"a", "b"} {
				stateOf(h.Upstream(n)).clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			}
			v := NewView(h, nil, true)
			first, _ := listPages(t, v, Tools)
			if want := []string{"a__t00", "a__t01", "a__t02", "b__t00"}; !slices.Equal(flatten(first), want) {
				t.Fatalf("first listing %v, want %v", flatten(first), want)
			}
			before := listAsks(ups)
			mu.Lock()
			tc.between(env{h: h, ups: ups, clock: &now})
			mu.Unlock()
			second, _ := listPages(t, v, Tools)
			if got := listAsks(ups) - before; got != tc.wantAsks {
				t.Errorf("the second listing asked the upstreams %d times, want %d", got, tc.wantAsks)
			}
			if got := slices.Contains(flatten(second), "a__new"); got != tc.wantNew {
				t.Errorf("second listing %v: a__new listed %v, want %v", flatten(second), got, tc.wantNew)
			}
		})
	}
}

// Params other than a cursor and _meta may change what an upstream lists:
// such a request is asked, never answered from (or kept in) the cache.
func TestListCacheOnlyPlainRequests(t *testing.T) {
	ups := map[string]*fakeUpstream{"a": {tools: items("name", "t", 2)}}
	v := NewView(fakeHost(t, ups), nil, true)
	ctx := context.Background()
	for i, tc := range []struct {
		params   string
		wantAsks int
	}{
		{`{}`, 1}, // cold: the walk
		{`{}`, 0},
		{`{"_meta":{"progressToken":1}}`, 0},
		{`{"filter":"x"}`, 1},
		{`{"filter":"x"}`, 1},
		{`{}`, 0},
	} {
		before := listAsks(ups)
		if _, jerr := v.List(ctx, Tools, json.RawMessage(tc.params)); jerr != nil {
			t.Fatal(jerr)
		}
		if got := listAsks(ups) - before; got != tc.wantAsks {
			t.Errorf("request %d %s asked %d times, want %d", i, tc.params, got, tc.wantAsks)
		}
	}
}

// A stateful upstream lists per session: one session's listing never
// answers another's, so a change is seen by the next session at once.
func TestListCacheNotAcrossSessions(t *testing.T) {
	ups := map[string]*fakeUpstream{"s": {tools: items("name", "t", 1)}, "shared": {tools: items("name", "t", 1)}}
	h := fakeHostWith(t, ups, func(name string, u *config.Upstream) { u.Stateful = name == "s" })
	v := NewView(h, nil, true)
	list := func(session string) []string {
		t.Helper()
		res, jerr := v.List(host.WithSession(context.Background(), session), Tools, nil)
		if jerr != nil {
			t.Fatal(jerr)
		}
		var out struct {
			Tools []struct{ Name string }
		}
		if err := json.Unmarshal(res, &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range out.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	list("one")
	list("one")
	ups["s"].mu.Lock()
	ups["s"].tools = append(ups["s"].tools, `{"name":"only-later"}`)
	ups["s"].mu.Unlock()
	if got := list("two"); !slices.Contains(got, "s__only-later") {
		t.Errorf("session two listed %v: the stateful upstream's list came from another session", got)
	}
	if n := ups["s"].lists(mcp.MethodToolsList); n != 3 {
		t.Errorf("the stateful upstream was asked %d times, want 3 (once per listing)", n)
	}
	if n := ups["shared"].lists(mcp.MethodToolsList); n != 1 {
		t.Errorf("the shared upstream was asked %d times, want 1 (then cached)", n)
	}
}
