// Package credentials owns what an upstream request carries, and for whom:
// the credential kinds an upstream can be configured with (none, a static
// header, the gateway's own client-credentials token, a token exchanged
// for the caller's (RFC 8693), the caller's own per-user OAuth token), the
// Source interface each kind's provider implements, and the error that
// sends a user to authorize the gateway first.
//
// It also implements the kinds themselves, but per_user (peruser): an
// upstream's Upstream (NewUpstream, upstream.go) is what the host builds
// for each upstream and uses — the client of its shared connection, which
// carries the gateway's own client-credentials token (clientcredentials.go;
// private_key_jwt, JWT bearer assertions and DPoP in clientassertion.go;
// discovery of the authorization server in discovery.go), and the Source
// and HTTP client of each acting-for connection: the token exchange
// (exchange.go, with ID-JAG in idjag.go), forwarded headers (forward.go),
// or the per-user Source the host is given. The errors callers see
// (CredentialError, ExchangeError, TokenError, DiscoveryError) name the
// upstream and the fix, never a token.
//
// The caller's downstream token never goes upstream (DESIGN.md invariant
// 5): a Source may present it to an authorization server as the subject of
// an exchange, and nothing else.
package credentials

import (
	"context"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/auth"
)

// Kind names how an upstream request is authorized. Audit records and
// metrics carry it; it never carries the credential itself.
type Kind string

// The credential kinds.
const (
	KindNone              Kind = "none"               // nothing added
	KindStatic            Kind = "static"             // a header from config
	KindClientCredentials Kind = "client_credentials" // the gateway's own token (upstreams.NAME.oauth)
	KindExchanged         Kind = "exchanged"          // RFC 8693, for the caller
	KindPerUser           Kind = "per_user"           // the caller's own upstream authorization
	KindForwarded         Kind = "forwarded"          // the caller's own headers (forward_headers), nothing else
)

// Subject is whom an upstream request acts for.
type Subject struct {
	// Principal is the caller authenticated downstream; nil when
	// authentication is off (then only KindNone, KindStatic and
	// KindClientCredentials make sense, and acting-for sources refuse).
	Principal *auth.Principal
	// Token is the caller's validated downstream bearer token. Only an
	// exchange reads it (as subject_token, sent to the authorization
	// server); it is never sent to an upstream.
	Token string
}

// Key is the cache and binding key of the subject (auth.Principal.Key):
// credentials obtained for one key are never used for another.
func (s Subject) Key() string { return s.Principal.Key() }

// Source provides the access token an upstream's requests carry for a
// subject. Implementations cache per subject and are safe for concurrent
// use.
type Source interface {
	// Kind says what the source provides, for audit and metrics.
	Kind() Kind
	// Token returns the bearer token to send to the upstream for s. An
	// error is either *AuthorizationRequiredError (the subject must
	// authorize the gateway first) or a failure that names the upstream
	// and the authorization server's error, never a token.
	Token(ctx context.Context, s Subject) (string, error)
	// Refused tells the source that the upstream answered 401 to token
	// sent for s: the source drops it (and may refresh) so the next Token
	// does not return it again.
	Refused(ctx context.Context, s Subject, token string)
}

// ScopeEscalator is what a Source implements when the subject can be sent
// to authorize again for more scopes ("step-up"): the per-user source. The
// upstream transport tells it of a 403 whose Bearer challenge is
// error="insufficient_scope".
type ScopeEscalator interface {
	// InsufficientScope is told that the upstream answered 403
	// insufficient_scope to token, sent for s; challenge is the response's
	// WWW-Authenticate values. It returns *AuthorizationRequiredError whose
	// link asks for the union of the scopes already asked for and the
	// challenged ones (SEP-2350), or nil when a new authorization cannot
	// help (the challenged scopes were already asked for: asking again
	// would loop) so the upstream's refusal stands, or another error
	// naming the upstream. The stored token is kept until the new
	// authorization replaces it (it still serves what it was granted for).
	InsufficientScope(ctx context.Context, s Subject, token string, challenge []string) error
}

// AuthorizationRequiredError says the subject has no usable authorization
// for the upstream: the user must visit URL (the gateway's own start page,
// bound to the subject) and consent. The router answers it with a
// URL-mode elicitation (-32042) for clients that declared elicitation.url,
// and otherwise with a tool error whose text carries the link.
type AuthorizationRequiredError struct {
	Upstream string
	// URL is where the user authorizes the gateway (absolute).
	URL string
	// ElicitationID identifies this authorization request; the
	// notifications/elicitation/complete the gateway sends when the flow
	// finishes carries it.
	ElicitationID string
}

func (e *AuthorizationRequiredError) Error() string {
	return fmt.Sprintf("upstream %q needs your authorization: open %s, sign in and consent, then retry", e.Upstream, e.URL)
}

type subjectKey struct{}

// WithSubject returns ctx carrying s, for the upstream transport that
// asks a Source for the subject's token.
func WithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject ctx carries, if any.
func SubjectFrom(ctx context.Context) (Subject, bool) {
	s, ok := ctx.Value(subjectKey{}).(Subject)
	return s, ok
}

// SubjectOf is whom a request acts for: the Subject ctx carries if any,
// else the authenticated principal in ctx with the bearer token it was
// validated from (which travels with the principal, so every context a
// call is re-derived in keeps it).
func SubjectOf(ctx context.Context) Subject {
	if s, ok := SubjectFrom(ctx); ok {
		return s
	}
	p := auth.FromContext(ctx)
	return Subject{Principal: p, Token: p.BearerToken()}
}
