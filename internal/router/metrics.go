package router

import "github.com/mcpgw/mcpgw/internal/metrics"

// RouteStats reports each route's live sessions and long-lived streams, for
// the metrics scrape (metrics.SetRouteSource). Counting at scrape time keeps
// session and stream handling free of metric updates.
func (rt *Router) RouteStats() []metrics.RouteStats {
	routes := rt.current().routes
	byPath := make(map[string]*metrics.RouteStats, len(routes))
	out := make([]metrics.RouteStats, len(routes))
	for i, r := range routes {
		out[i].Route = r.path
		byPath[r.path] = &out[i]
	}
	for _, s := range rt.sessions.all() {
		st := byPath[s.route().path]
		if st == nil {
			continue
		}
		st.Sessions++
		s.mu.Lock()
		if s.streamOpen {
			st.Standalone++
		}
		s.mu.Unlock()
	}
	rt.listenersMu.Lock()
	for s := range rt.listeners {
		if st := byPath[s.route().path]; st != nil {
			st.Listen++
		}
	}
	rt.listenersMu.Unlock()
	return out
}
