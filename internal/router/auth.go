package router

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Authentication on the MCP listener. Every endpoint of a route (POST, GET
// and DELETE on the route, and the legacy <route>/sse and <route>/message)
// runs authenticate as chi middleware after the edge checks and before the
// handler, so a request is refused before its body is read. The principal
// then travels in the request context, and sessions remember the principal
// that created them (owner): a session id presented with another
// principal's credentials is answered 404, as if it did not exist.

// authenticate is the middleware for the endpoints of rte. Without an
// authenticator (no auth configured: validation allows that only on a
// loopback listener or with insecure_no_auth) it passes requests through.
func (rt *Router) authenticate(rte *route) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		a := rte.gen.auth
		if a == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := a.Authenticate(r, rte.resource)
			if err == nil {
				err = auth.Authorize(p, rte.scopes)
			}
			if err != nil {
				rt.refuse(w, r, rte, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}

// refuse answers a request that failed authentication: the status and
// WWW-Authenticate challenge RFC 6750 and RFC 9728 prescribe, and a
// JSON-RPC error body MCP clients can show.
func (rt *Router) refuse(w http.ResponseWriter, r *http.Request, rte *route, err error) {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		ae = &auth.Error{Reason: auth.Malformed, Detail: "the credential could not be checked"}
	}
	fields := []zap.Field{zap.String("route", rte.path), zap.String("reason", string(ae.Reason)), zap.String("detail", ae.Detail), zap.String("remote", r.RemoteAddr)}
	switch ae.Reason {
	case auth.NoCredentials:
		rt.logger(r.Context()).Debug("request without credentials refused", fields...)
	case auth.Unavailable:
		rt.logger(r.Context()).Warn("cannot check tokens: the issuer is unreachable", fields...)
		w.Header().Set("Retry-After", "10")
	default:
		rt.logger(r.Context()).Info("request refused by authentication", fields...)
	}
	w.Header().Set("WWW-Authenticate", rte.gen.auth.Challenge(ae, rte.path, rte.scopes))
	msg := "unauthorized: " + ae.Detail
	switch ae.Status() {
	case http.StatusForbidden:
		msg = "forbidden: " + ae.Detail
	case http.StatusServiceUnavailable:
		msg = "authentication is unavailable: " + ae.Detail
	case http.StatusBadRequest:
		msg = "bad request: " + ae.Detail
	}
	httpError(w, ae.Status(), jsonrpc.CodeInvalidRequest, msg)
}

// ownedBy reports whether the request's principal is the session's owner.
// A mismatch is logged without the session id, which is a bearer value.
func (rt *Router) ownedBy(sess *Session, r *http.Request) bool {
	p := auth.FromContext(r.Context())
	if sess.owner == p.Key() {
		return true
	}
	rt.logger(r.Context()).Warn("session used with another principal's credentials; refused as not found",
		zap.String("route", sess.route().path), zap.Stringer("principal", p))
	return false
}

// principalTag is a short, non-reversible tag of a principal key, for
// state handed to clients (bridge requestState).
func principalTag(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

// serveMetadata registers the RFC 9728 Protected Resource Metadata
// documents: one per route at /.well-known/oauth-protected-resource<route
// path>, and one for the gateway as a whole at the bare well-known path
// (which is also the document of a route at /). They are public, like the
// issuer's own discovery document.
func (rt *Router) serveMetadata(mux chi.Router, cfg *config.Config, g *generation) {
	if g.auth == nil || len(g.auth.Issuers()) == 0 {
		return
	}
	docs := map[string][]byte{}
	var all []string
	for _, r := range g.routes {
		for _, s := range r.scopes {
			if !containsString(all, s) {
				all = append(all, s)
			}
		}
	}
	docs[auth.WellKnownPath] = g.auth.MetadataJSON("/", all)
	// When public_url has a path (the gateway behind a path prefix), the
	// documents are also served under it, as their advertised URLs say.
	var prefix string
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		prefix = strings.TrimSuffix(u.Path, "/")
	}
	for _, r := range g.routes {
		doc := g.auth.MetadataJSON(r.path, r.scopes)
		docs[auth.MetadataPath(r.path)] = doc
		if prefix != "" {
			docs[auth.WellKnownPath+prefix+strings.TrimSuffix(r.path, "/")] = doc
		}
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			httpError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "no protected resource at "+strings.TrimPrefix(r.URL.Path, auth.WellKnownPath))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(doc)
	}
	mux.Get(auth.WellKnownPath, h)
	mux.Get(auth.WellKnownPath+"/*", h)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
