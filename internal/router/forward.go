package router

import (
	"net/http"
	"slices"

	"github.com/mcpgw/mcpgw/internal/config"
)

// forwardedNames are the caller request headers some upstream of route rc
// forwards (upstreams.NAME.forward_headers), canonical and sorted: the
// route's authentication reads them into each request's principal
// (edge.Guard.Forward), and only those upstreams' transports send them.
func forwardedNames(cfg *config.Config, rc *config.Route) []string {
	ups := rc.Upstreams
	if len(ups) == 0 {
		for name := range cfg.Upstreams {
			ups = append(ups, name)
		}
	}
	var names []string
	for _, name := range ups {
		u := cfg.Upstreams[name]
		if u == nil {
			continue
		}
		for _, f := range u.ForwardHeaders {
			if n := http.CanonicalHeaderKey(f.Name); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}
