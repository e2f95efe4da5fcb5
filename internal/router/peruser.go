package router

import (
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// servePerUser registers the pages of per-user upstream authorization
// (package peruser): GET start and callback, which a user's browser
// visits without any gateway credential (each trusts only what it
// sealed), and DELETE token, behind the same authentication as the
// routes that expose the upstream, for a caller to revoke their own
// token. As with the metadata documents, a public_url with a path serves
// them under that path too.
func (rt *Router) servePerUser(mux chi.Router, cfg *config.Config, g *core.Generation) {
	if len(rt.opts.PerUser) == 0 {
		return
	}
	prefixes := []string{""}
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for name, src := range rt.opts.PerUser {
		// The token endpoint authenticates like the first route exposing
		// the upstream (its resource, its scopes).
		guard := edge.Guard{Auth: g.Auth, Route: config.TokenPath(name), Log: rt.log, Metrics: rt.opts.Metrics}
		for _, r := range g.Routes {
			if slices.Contains(cfg.RouteUpstreams(routeConfig(cfg, r.Path)), name) {
				guard.Resource, guard.Scopes = r.Resource, r.Scopes
				break
			}
		}
		if guard.Resource == "" && g.Auth != nil {
			guard.Resource = g.Auth.Resource("/")
		}
		for _, p := range prefixes {
			mux.Get(p+config.StartPath(name), src.ServeStart)
			mux.Get(p+config.RedirectPath(name), src.ServeCallback)
			mux.With(guard.Authenticate).Delete(p+config.TokenPath(name), src.ServeRevoke)
		}
	}
}

// routeConfig is the config of the route at path.
func routeConfig(cfg *config.Config, path string) *config.Route {
	for _, r := range cfg.Routes {
		if r != nil && r.Path == path {
			return r
		}
	}
	return nil
}
