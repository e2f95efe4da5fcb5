package router

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// serveMetadata registers the RFC 9728 Protected Resource Metadata
// documents: one per route at /.well-known/oauth-protected-resource<route
// path>, and one for the gateway as a whole at the bare well-known path
// (which is also the document of a route at /). They are public, like the
// issuer's own discovery document.
func serveMetadata(mux chi.Router, publicURL string, g *core.Generation) {
	if g.Auth == nil || len(g.Auth.Issuers()) == 0 {
		return
	}
	docs := map[string][]byte{}
	var all []string
	for _, r := range g.Routes {
		for _, s := range r.Scopes {
			if !slices.Contains(all, s) {
				all = append(all, s)
			}
		}
	}
	docs[auth.WellKnownPath] = g.Auth.MetadataJSON("/", all)
	// When public_url has a path (the gateway behind a path prefix), the
	// documents are also served under it, as their advertised URLs say.
	var prefix string
	if u, err := url.Parse(publicURL); err == nil {
		prefix = strings.TrimSuffix(u.Path, "/")
	}
	for _, r := range g.Routes {
		doc := g.Auth.MetadataJSON(r.Path, r.Scopes)
		docs[auth.MetadataPath(r.Path)] = doc
		if prefix != "" {
			docs[auth.WellKnownPath+prefix+strings.TrimSuffix(r.Path, "/")] = doc
		}
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			edge.Error(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "no protected resource at "+strings.TrimPrefix(r.URL.Path, auth.WellKnownPath))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(doc)
	}
	mux.Get(auth.WellKnownPath, h)
	mux.Get(auth.WellKnownPath+"/*", h)
}
