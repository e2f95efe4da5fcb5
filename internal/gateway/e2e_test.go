package gateway_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMergedCatalogEveryRevision(t *testing.T) {
	t.Parallel()
	base := gatewaytest.TwoUpstreams(t)
	// "" is the SDK's default: it tries 2026-07-28's server/discover first
	// and must fall back to initialize against this gateway.
	for _, version := range []string{"", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run("version="+version, func(t *testing.T) {
			ctx := context.Background()
			cs := gatewaytest.Connect(t, base+"/mcp", nil, version)
			if version != "" && cs.InitializeResult().ProtocolVersion != version {
				t.Errorf("negotiated %q, want %q", cs.InitializeResult().ProtocolVersion, version)
			}

			var names []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
			}
			var want []string
			for _, up := range []struct {
				name  string
				count int
			}{{"alpha", 7}, {"beta", 4}} {
				var tools []string
				tools = append(tools, "echo", "progress", "slow")
				for i := range up.count {
					tools = append(tools, fmt.Sprintf("t%02d", i))
				}
				slices.Sort(tools) // the SDK lists tools by name
				for _, tl := range tools {
					want = append(want, up.name+"__"+tl)
				}
			}
			if !slices.Equal(names, want) {
				t.Errorf("tools across pages:\n got %v\nwant %v", names, want)
			}

			// Collisions: both upstreams have "echo"; each call reaches its own.
			for _, up := range []string{"alpha", "beta"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: up + "__echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := gatewaytest.TextOf(t, res); got != up+":hi" {
					t.Errorf("%s__echo = %q", up, got)
				}
			}

			pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet", Arguments: map[string]string{"who": "bob"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Messages[0].Content.(*mcp.TextContent).Text; got != "beta greets bob" {
				t.Errorf("prompt = %q", got)
			}
		})
	}
}

// TestPaginationPageByPage: a page holds whole upstream pages up to the
// route's page size, so with the default one list is one page, and with a
// small one the cursors go on across upstreams (each upstream pages 2 at
// a time: alpha 10 tools, beta 7).
func TestPaginationPageByPage(t *testing.T) {
	t.Parallel()
	base := gatewaytest.TwoUpstreams(t)
	ctx := context.Background()
	for _, tc := range []struct {
		route string
		pages []int
	}{
		{"/mcp", []int{17}},
		{"/mcp/small", []int{4, 4, 4, 4, 1}}, // alpha 2+2, 2+2, 2 + beta 2, beta 2+2, 1
	} {
		t.Run(tc.route, func(t *testing.T) {
			cs := gatewaytest.Connect(t, base+tc.route, nil, "2025-11-25")
			var cursor string
			var sizes []int
			seen := map[string]bool{}
			for {
				res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(res.Tools))
				for _, tl := range res.Tools {
					if seen[tl.Name] {
						t.Errorf("tool %s listed twice", tl.Name)
					}
					seen[tl.Name] = true
				}
				if res.NextCursor == "" {
					break
				}
				cursor = res.NextCursor
				if len(sizes) > 50 {
					t.Fatal("pagination does not end")
				}
			}
			if !slices.Equal(sizes, tc.pages) || len(seen) != 17 {
				t.Errorf("pages of %v (%d tools), want %v (17)", sizes, len(seen), tc.pages)
			}
			if _, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not-a-cursor"}); err == nil || !strings.Contains(err.Error(), "invalid cursor") {
				t.Errorf("bad cursor: err = %v", err)
			}
		})
	}
}

func TestResourcesTemplatesAndCompletionRouted(t *testing.T) {
	t.Parallel()
	base := gatewaytest.TwoUpstreams(t)
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "2025-11-25")
	ctx := context.Background()

	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	if want := []string{"mem://shared?mcpgw=alpha", "mem://shared?mcpgw=beta"}; !slices.Equal(uris, want) {
		t.Fatalf("resources = %v, want %v (same upstream URI kept apart)", uris, want)
	}
	for _, up := range []string{"alpha", "beta"} {
		// The explicit form, and the canonical one earlier versions showed.
		for _, uri := range []string{"mem://shared?mcpgw=" + up, up + "+mem://shared"} {
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatal(err)
			}
			if rr.Contents[0].Text != "content of "+up || rr.Contents[0].URI != "mem://shared?mcpgw="+up {
				t.Errorf("read %s: %+v", uri, rr.Contents[0])
			}
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://shared"}); err == nil || !strings.Contains(err.Error(), "mem://shared?mcpgw=alpha or mem://shared?mcpgw=beta") {
		t.Errorf("the shared URI as it is: %v, want an error naming both", err)
	}

	var templates []string
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, rt.URITemplate)
	}
	if want := []string{"mem://items/{id}?mcpgw=alpha", "mem://items/{id}?mcpgw=beta"}; !slices.Equal(templates, want) {
		t.Errorf("templates = %v, want %v", templates, want)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://items/42?mcpgw=beta"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Contents[0].Text != "beta item 42" {
		t.Errorf("template read = %q", rr.Contents[0].Text)
	}

	comp, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "alpha__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha-x-1", "alpha-x-2"}; !slices.Equal(comp.Completion.Values, want) {
		t.Errorf("completion = %v, want %v", comp.Completion.Values, want)
	}
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "mem://items/{id}?mcpgw=beta"},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"beta-4-1", "beta-4-2"}; !slices.Equal(comp.Completion.Values, want) {
		t.Errorf("resource completion = %v, want %v", comp.Completion.Values, want)
	}
}

func TestUnprefixedRoute(t *testing.T) {
	t.Parallel()
	base := gatewaytest.TwoUpstreams(t)
	cs := gatewaytest.Connect(t, base+"/mcp/beta", nil, "2025-06-18")
	ctx := context.Background()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if want := []string{"echo", "progress", "slow", "t00", "t01", "t02", "t03"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "beta:x" {
		t.Errorf("echo = %q", got)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://shared"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Contents[0].Text != "content of beta" || rr.Contents[0].URI != "mem://shared" {
		t.Errorf("read: %+v", rr.Contents[0])
	}
	if got := cs.InitializeResult().Instructions; got != "instructions of beta" {
		t.Errorf("instructions = %q, want the upstream's own", got)
	}
}

func TestProgressReachesOnlyItsCaller(t *testing.T) {
	t.Parallel()
	base := gatewaytest.TwoUpstreams(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Two sessions use the same progress token and the same request ids; a
	// gateway that keyed progress by token or id alone would cross them.
	type tally struct {
		mu     sync.Mutex
		counts map[string]int
	}
	tallies := []*tally{{counts: map[string]int{}}, {counts: map[string]int{}}}
	sessions := make([]*mcp.ClientSession, 2)
	for i := range sessions {
		tl := tallies[i]
		sessions[i] = gatewaytest.Connect(t, base+"/mcp", &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				tl.mu.Lock()
				tl.counts[fmt.Sprint(req.Params.ProgressToken, "/", req.Params.Message)]++
				tl.mu.Unlock()
			},
		}, "2025-11-25")
	}
	var wg sync.WaitGroup
	for i, cs := range sessions {
		for _, up := range []string{"alpha", "beta"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				params := &mcp.CallToolParams{Name: up + "__progress", Arguments: map[string]any{"tag": fmt.Sprint("s", i)}}
				params.SetProgressToken("tok")
				if _, err := cs.CallTool(ctx, params); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	// The SDK client runs notification handlers asynchronously: let them
	// settle, then check that nothing more and nothing foreign arrived.
	for i, tl := range tallies {
		want := map[string]int{fmt.Sprintf("tok/s%d", i): 6} // 3 from each upstream
		var got map[string]int
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) { // a poll, bounded by deadline
			tl.mu.Lock()
			got = maps.Clone(tl.counts)
			tl.mu.Unlock()
			if maps.Equal(got, want) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond) // a negative check (no more arrive): a wait cut short only misses a failure
		tl.mu.Lock()
		got = maps.Clone(tl.counts)
		tl.mu.Unlock()
		if !maps.Equal(got, want) {
			t.Errorf("session %d progress = %v, want %v", i, got, want)
		}
	}
}
