package edge

import (
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// Authentication on the MCP listener. Every endpoint of a route (POST, GET
// and DELETE on the route, and the HTTP+SSE <route>/sse and <route>/message)
// runs Authenticate as chi middleware after the edge checks and before the
// handler, so a request is refused before its body is read. The principal
// then travels in the request context, and sessions remember the principal
// that created them (owner): a session id presented with another
// principal's credentials is answered 404, as if it did not exist.

// Guard is what authenticating one route needs: the authenticator, the
// route's path, its canonical resource URI (the token audience) and the
// scopes every caller needs.
type Guard struct {
	Auth     *auth.Authenticator // nil: authentication off
	Route    string
	Resource string
	Scopes   []string
	// RequireDPoP refuses all but DPoP-bound tokens proven on the request
	// (the route's require_dpop); its challenges are DPoP ones.
	RequireDPoP bool
	Log         *zap.Logger // fallback for requests without their own logger
	// Metrics counts refusals by reason (mcpgw_auth_failures_total; nil: none).
	Metrics *metrics.Metrics
	// Forward are the request headers (canonical) some upstream of the
	// route forwards from its caller (upstreams.NAME.forward_headers):
	// read into the request's principal, which carries them to that
	// upstream's own connection for this caller.
	Forward []string
}

// Authenticate is the middleware for the endpoints of one route. Without an
// authenticator (no auth configured: validation allows that only on a
// loopback listener or with insecure_no_auth) it passes requests through.
func (g Guard) Authenticate(next http.Handler) http.Handler {
	if g.Auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := g.Auth.Authenticate(r, g.Resource)
		if err == nil && g.RequireDPoP {
			err = auth.RequireDPoP(p)
		}
		if err == nil {
			err = auth.Authorize(p, g.Scopes)
		}
		if err != nil {
			g.Refuse(w, r, err)
			return
		}
		if len(g.Forward) > 0 {
			p = p.WithForwarded(r.Header, g.Forward)
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// Refuse answers a request that failed authentication: the status and
// WWW-Authenticate challenge RFC 6750 and RFC 9728 prescribe, and a
// JSON-RPC error body MCP clients can show.
func (g Guard) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		ae = &auth.Error{Reason: auth.Malformed, Detail: "the credential could not be checked"}
	}
	g.Metrics.AuthFailure(string(ae.Reason)) // a fixed set (auth.Reason), never from the request
	fields := []zap.Field{zap.String("route", g.Route), zap.String("reason", string(ae.Reason)), zap.String("detail", ae.Detail), zap.String("remote", r.RemoteAddr)}
	log := Logger(r.Context(), g.Log)
	switch ae.Reason {
	case auth.NoCredentials:
		log.Debug("request without credentials refused", fields...)
	case auth.Unavailable:
		log.Warn("cannot check tokens: the issuer is unreachable", fields...)
		w.Header().Set("Retry-After", "10")
	default:
		log.Info("request refused by authentication", fields...)
	}
	switch {
	case g.RequireDPoP:
		// Only DPoP is accepted here: its challenge alone (RFC 9449 7.1).
		w.Header().Set("WWW-Authenticate", g.Auth.DPoPChallenge(ae, g.Route))
	case ae.DPoP:
		// A refusal about DPoP: the Bearer challenge says where to
		// authorize, the DPoP one what went wrong.
		w.Header().Set("WWW-Authenticate", g.Auth.Challenge(&auth.Error{Reason: auth.NoCredentials}, g.Route, g.Scopes))
		w.Header().Add("WWW-Authenticate", g.Auth.DPoPChallenge(ae, g.Route))
	default:
		w.Header().Set("WWW-Authenticate", g.Auth.Challenge(ae, g.Route, g.Scopes))
	}
	if ae.Nonce != "" {
		w.Header().Set("DPoP-Nonce", ae.Nonce)
	}
	msg := "unauthorized: " + ae.Detail
	switch ae.Status() {
	case http.StatusForbidden:
		msg = "forbidden: " + ae.Detail
	case http.StatusServiceUnavailable:
		msg = "authentication is unavailable: " + ae.Detail
	case http.StatusBadRequest:
		msg = "bad request: " + ae.Detail
	}
	Error(w, ae.Status(), jsonrpc.CodeInvalidRequest, msg)
}

// OwnedBy reports whether the request's principal is owner, the Key of the
// principal that created a session on route. A mismatch is logged without
// the session id, which is a bearer value.
func OwnedBy(r *http.Request, owner, route string, log *zap.Logger) bool {
	p := auth.FromContext(r.Context())
	if owner == p.Key() {
		return true
	}
	Logger(r.Context(), log).Warn("session used with another principal's credentials; refused as not found",
		zap.String("route", route), zap.Stringer("principal", p))
	return false
}
