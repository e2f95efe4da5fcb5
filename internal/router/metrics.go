package router

import (
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// RouteStats reports each route's live sessions and long-lived streams, for
// the metrics scrape (metrics.SetRouteSource). Counting at scrape time keeps
// session and stream handling free of metric updates.
func (rt *Router) RouteStats() []metrics.RouteStats {
	routes := rt.current().Routes
	byPath := make(map[string]*metrics.RouteStats, len(routes))
	out := make([]metrics.RouteStats, len(routes))
	for i, r := range routes {
		out[i].Route = r.Path
		byPath[r.Path] = &out[i]
	}
	for _, s := range rt.sessions.All() {
		st := byPath[s.Route().Path]
		if st == nil {
			continue
		}
		st.Sessions++
		if s.StreamOpen() {
			st.Standalone++
		}
	}
	rt.core.EachListener(func(s *core.Session, _ *mcp.ListenFilter) {
		if st := byPath[s.Route().Path]; st != nil {
			st.Listen++
		}
	})
	return out
}
