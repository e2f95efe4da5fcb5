package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/curate"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/principal"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// UpstreamTools is what ListTools found of one upstream.
type UpstreamTools struct {
	Name string
	// Tools are the tools some route serves, as the upstream sent them.
	Tools [][]byte
	// Hidden are the tools the list phase hides on every route that has
	// the upstream: no caller is shown them or may call them, so they are
	// not to be approved.
	Hidden []HiddenTool
	Err    error // the upstream could not be listed
}

// HiddenTool is a tool the interceptors' list phase hides.
type HiddenTool struct {
	Name string // the upstream's own name
	// By says which interceptor hid it and why, per route
	// ("/mcp: scan: description contains ...").
	By string
}

// ListTools builds cfg's upstreams alone (build's modePin: no router, no
// listener), lists every upstream's tools (catalog.UpstreamTools) and
// stops them again before it returns: what `mcpgw pin` approves. Every
// upstream is listed at once and waited for on its own (each waits for its
// first connection), so one that hangs costs ctx's deadline once and fails
// alone. The answer is in host.Names order.
func ListTools(ctx context.Context, cfg *config.Config, opts Options) ([]UpstreamTools, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	// The list phase judges what is approved as it judges what is served
	// (issue 33): one judgement, intercept.Set.Hides, as the core's.
	set, err := buildIntercept(cfg, nil, opts.Logger) // intercept.go
	if err != nil {
		return nil, err
	}
	b, err := build(cfg, opts, modePin, nil, nil) // build.go
	if err != nil {
		return nil, err
	}
	b.host.Start()
	names := b.host.Names()
	out := make([]UpstreamTools, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		out[i].Name = name
		wg.Go(func() { out[i].Tools, out[i].Err = catalog.UpstreamTools(ctx, b.host.Upstream(name)) })
	}
	wg.Wait()
	// Stopped before the caller writes its report: the supervisors log
	// their retries until then.
	b.undo.run()
	for i := range out {
		if out[i].Err == nil {
			out[i].Tools, out[i].Hidden = servedTools(ctx, cfg, set, out[i].Name, out[i].Tools)
		}
	}
	return out, nil
}

// servedTools splits an upstream's tools into those some route serves and
// those the list phase hides on every route that has the upstream, judged
// as the served list and the core judge them (router/core's
// hiddenByInterceptor): the definition as the route lists it, curated,
// under its canonical name. What is kept is the upstream's definition,
// uncurated: pinning approves what the upstream runs. The caller is
// one with no groups, so an interceptor limited to some groups hides from
// them alone and the tool, served to the others, stays approved. A tool no
// route has is kept: nothing judges it.
func servedTools(ctx context.Context, cfg *config.Config, set *intercept.Set, upstream string, tools [][]byte) (kept [][]byte, hidden []HiddenTool) {
	if !set.Has(config.PhaseList) {
		return tools, nil
	}
	var routes []*config.Route
	for _, r := range cfg.Routes {
		if r != nil && slices.Contains(cfg.RouteUpstreams(r), upstream) {
			routes = append(routes, r)
		}
	}
	sep := cfg.Separator
	if sep == "" {
		sep = config.DefaultSeparator
	}
	curs := make([]*curate.Set, len(routes))
	for i, r := range routes {
		curs[i] = routeCuration(cfg, r, upstream, sep)
	}
	kept = tools[:0:0]
	for _, def := range tools {
		name, _ := rawjson.GetString(def, "name")
		var why []string
		serving := 0 // routes that list it at all
		for i, r := range routes {
			t := intercept.Target{Route: r.Path, Upstream: upstream, Kind: "tool", Name: name, Principal: &principal.Principal{}}
			if r.Prefixed() {
				t.Name = upstream + sep + name
			}
			if !curs[i].Exposed(t.Name) {
				continue // the route does not list it: nothing there to judge
			}
			serving++
			listed, err := def, error(nil)
			if ct := curs[i].For(upstream, name); ct != nil {
				listed, _, err = ct.Definition(def)
			}
			hide, by := err != nil, "curation failed" // the list leaves out what it cannot curate
			if err == nil {
				hide, by = set.Hides(ctx, &t, listed)
			}
			if !hide {
				break
			}
			why = append(why, r.Path+": "+by)
		}
		if serving == 0 || len(why) < serving {
			kept = append(kept, def)
			continue
		}
		hidden = append(hidden, HiddenTool{Name: name, By: strings.Join(why, "; ")})
	}
	return kept, hidden
}

// routeCuration is route r's curation of upstream's tools, as the
// catalog makes it for the served list (catalog's View.curation): the
// route's rules and the upstream's own.
func routeCuration(cfg *config.Config, r *config.Route, upstream, sep string) *curate.Set {
	var route []*config.ToolCuration
	var expose []string
	if r.Tools != nil {
		route, expose = r.Tools.Curate, r.Tools.Expose
	}
	var ups map[string][]*config.ToolCuration
	if u := cfg.Upstreams[upstream]; u != nil && len(u.Curate) > 0 {
		ups = map[string][]*config.ToolCuration{upstream: u.Curate}
	}
	return curate.New(route, expose, ups, func(up, name string) string {
		if r.Prefixed() {
			return up + sep + name
		}
		return name
	})
}
