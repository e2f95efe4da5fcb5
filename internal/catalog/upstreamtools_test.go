package catalog

import (
	"context"
	"strings"
	"testing"
	"time"
)

// UpstreamTools (mcpgw pin's listing) walks every page and hands each
// tool back byte for byte as the upstream sent it.
func TestUpstreamToolsEveryPageAsSent(t *testing.T) {
	up := &fakeUpstream{pageSize: 2, tools: items("name", "t", 5)}
	h := fakeHost(t, map[string]*fakeUpstream{"a": up})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := UpstreamTools(ctx, h.Upstream("a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 5 {
		t.Fatalf("%d tools, want 5", len(tools))
	}
	for i, tool := range tools {
		if string(tool) != up.tools[i] {
			t.Errorf("tool %d: %s, want as sent: %s", i, tool, up.tools[i])
		}
	}
	if n := up.lists("tools/list"); n != 3 {
		t.Errorf("%d tools/list requests, want 3 (pages of 2)", n)
	}
}

// Unlike the catalog's own walks, which keep what they got, the pin's
// listing fails on a cursor that comes back: what it lists is approved
// whole.
func TestUpstreamToolsRefusesLoopingCursor(t *testing.T) {
	up := &fakeUpstream{tools: items("name", "t", 2), handleList: `,"nextCursor":"at-0"`}
	h := fakeHost(t, map[string]*fakeUpstream{"a": up})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := UpstreamTools(ctx, h.Upstream("a"))
	if err == nil || !strings.Contains(err.Error(), `tools/list: cursor "at-0" came back twice`) {
		t.Fatalf("error %v, want the looping cursor named", err)
	}
	byName, err := walkTools(ctx, h.Upstream("a").SharedClient())
	if err != nil || len(byName) != 2 {
		t.Errorf("the catalog's own walk: %d tools, %v; want the 2 it got, kept", len(byName), err)
	}
}
