package router

import (
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgw/mcpgw/internal/config"
)

// serveLogin mounts the gateway's authorization server (package login):
// its /oauth/ endpoints, under public_url's path too when it has one, and
// its metadata at the well-known paths. Like the per-user pages they are
// reached without a gateway credential.
func (rt *Router) serveLogin(mux chi.Router, cfg *config.Config) {
	l := rt.opts.Login
	if l == nil {
		return
	}
	l.Update(cfg) // the routes it issues tokens for
	prefixes := []string{""}
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for _, p := range prefixes {
		for _, path := range l.Paths() {
			mux.Handle(p+path, l)
		}
	}
	for _, path := range l.WellKnownPaths() {
		mux.Handle(path, l)
	}
}

// allowedOrigins are allowed_origins plus, with login:, the gateway's own
// origin: its consent and approval pages post forms from there.
func (rt *Router) allowedOrigins(cfg *config.Config) []string {
	if rt.opts.Login == nil {
		return cfg.AllowedOrigins
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" {
		return cfg.AllowedOrigins
	}
	return append(slices.Clone(cfg.AllowedOrigins), u.Scheme+"://"+u.Host)
}
