package catalog

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkListFilled is one tools/list over five in-memory upstreams of
// 1000 tools each (one page of 5000, every name prefixed): the gateway's
// own cost of merging and renaming a large catalog.
func BenchmarkListFilled(b *testing.B) {
	ups := map[string]*fakeUpstream{}
	for i := range 5 {
		ups[fmt.Sprintf("u%d", i)] = &fakeUpstream{tools: items("name", "tool", 1000)}
	}
	h := fakeHost(b, ups)
	v := NewView(h, nil, true)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, jerr := v.List(ctx, Tools, nil); jerr != nil {
			b.Fatal(jerr)
		}
	}
}
