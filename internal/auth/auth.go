// Package auth owns who is calling mcpgw: the OAuth 2.1 resource server
// (bearer JWTs from configured OIDC issuers, verified with go-oidc against
// each issuer's discovered, cached JWKS), API keys for machines (kept only as
// SHA-256 hashes, compared in constant time), the Principal that results and
// travels with the request in its context, the typed reasons a request is
// refused, and the RFC 9728 Protected Resource Metadata and RFC 6750
// WWW-Authenticate challenges that tell a client how to authenticate.
//
// It never sends a credential anywhere: the downstream token is checked and
// dropped here (upstream credentials come from config, internal/client).
// Secrets never appear in errors or logs; errors carry a reason and a
// detail that is safe to log.
package auth

import (
	"context"
	"strings"

	"github.com/mcpgw/mcpgw/internal/principal"
)

// Principal is the authenticated caller of one request: the one
// principal.Principal, named here for auth's callers.
type Principal = principal.Principal

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the request's principal, or nil when the request is
// unauthenticated (authentication is off).
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Reason says why a request was refused.
type Reason string

// Reasons. Each maps to an HTTP status and an RFC 6750 error code (Error).
const (
	// NoCredentials: no Authorization header (or X-API-Key).
	NoCredentials Reason = "no_credentials"
	// TokenInQuery: a token was sent in the URL, where it leaks into logs.
	TokenInQuery Reason = "token_in_query"
	// BadRequest: an Authorization header that is not "Bearer <token>".
	BadRequest Reason = "bad_request"
	// Malformed: the bearer value is neither a known API key nor a
	// well-formed JWT, or its claims are unreadable.
	Malformed Reason = "malformed"
	// AlgorithmNotAllowed: the JWT's alg is not in the allowlist (none,
	// HS256, ...).
	AlgorithmNotAllowed Reason = "algorithm_not_allowed"
	// UnknownIssuer: the JWT's iss is not a configured issuer.
	UnknownIssuer Reason = "unknown_issuer"
	// BadSignature: no key of the issuer verifies the signature (a forged
	// token, or a kid the issuer does not publish).
	BadSignature Reason = "bad_signature"
	// Expired: exp is past (beyond the leeway), or missing.
	Expired Reason = "expired"
	// NotYetValid: nbf (or iat) is in the future beyond the leeway.
	NotYetValid Reason = "not_yet_valid"
	// WrongAudience: the token was issued for another resource.
	WrongAudience Reason = "wrong_audience"
	// InsufficientScope: the principal lacks a scope the route requires.
	InsufficientScope Reason = "insufficient_scope"
	// Unavailable: the issuer's discovery document or keys, or the token
	// introspection endpoint, cannot be reached, so the token cannot be
	// checked now.
	Unavailable Reason = "unavailable"
	// Inactive: the introspection endpoint says the token is not active.
	Inactive Reason = "inactive"
)

// Error is a refused request. Detail explains it for logs and the client;
// it never contains a token or key.
type Error struct {
	Reason Reason
	Detail string
	// Scopes lists the scopes needed, for InsufficientScope.
	Scopes []string
	// DPoP: the refusal is about DPoP (dpop.go), so it is answered with a
	// DPoP challenge; Nonce is a nonce to retry with (DPoP-Nonce).
	DPoP  bool
	Nonce string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "auth: " + string(e.Reason)
	}
	return "auth: " + string(e.Reason) + ": " + e.Detail
}

// Status is the HTTP status for the refusal.
func (e *Error) Status() int {
	switch e.Reason {
	case InsufficientScope:
		return 403
	case TokenInQuery, BadRequest:
		return 400
	case Unavailable:
		return 503
	}
	return 401
}

// Code is the RFC 6750 error code for the challenge ("" when the request
// carried no credentials, where RFC 6750 says to give none).
func (e *Error) Code() string {
	switch e.Reason {
	case NoCredentials, Unavailable:
		return ""
	case InsufficientScope:
		return "insufficient_scope"
	case TokenInQuery, BadRequest:
		return "invalid_request"
	case InvalidDPoPProof, UseDPoPNonce:
		return string(e.Reason)
	}
	return "invalid_token"
}

func errorf(r Reason, detail string) *Error { return &Error{Reason: r, Detail: detail} }

// quoteDetail shortens and cleans a value taken from an untrusted token
// (an issuer, an audience) before it goes into a message.
func quoteDetail(s string) string {
	const max = 100
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s)
}
