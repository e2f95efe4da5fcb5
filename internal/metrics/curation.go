package metrics

import "github.com/prometheus/client_golang/prometheus"

// newCuratedNames is mcpgw_curated_tool_names: the per-name metrics label
// a call by the route's own name for its tool (what policy, pinning and
// audit name); on a route with tool curation (docs/curation.md) callers
// use a curated name, which this info metric maps to it, so a query
// joins the two.
func newCuratedNames(reg prometheus.Registerer) *prometheus.GaugeVec {
	return factory{reg}.gaugeVec("curated_tool_names",
		"1 for each tool a route lists under a curated name (routes[].tools.curate, upstreams.NAME.curate): tool is the curated name callers use, upstream_tool the route's own name for it, which the per-name metrics (mcpgw_tool_calls_total's tool), policy, pinning and audit carry. Join on (route) with tool renamed to upstream_tool.",
		"route", "tool", "upstream_tool")
}

// SetCuratedNames replaces route's curated names (a curated name → the
// route's own name for its tool); nil or empty clears them. Bounded by
// the config: one series per rename rule.
func (m *Metrics) SetCuratedNames(route string, names map[string]string) {
	if m == nil {
		return
	}
	m.curated.DeletePartialMatch(prometheus.Labels{"route": route})
	for curated, own := range names {
		m.curated.WithLabelValues(route, curated, own).Set(1)
	}
}

// ResetCuratedNames forgets every route's curated names (a new config
// generation sets its own).
func (m *Metrics) ResetCuratedNames() {
	if m != nil {
		m.curated.Reset()
	}
}
