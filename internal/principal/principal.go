// Package principal holds the one Principal: who is calling, as
// authentication established it (internal/auth makes it), as the access
// policy and its conditions judge it (internal/policy, policy/cond), as
// the audit records it and as state is bound to it (sessions, parked
// calls, per-user upstream tokens, rate-limit buckets). It is a leaf:
// it imports no other gateway package, so every one of those can use it
// without an arrow running upwards (policy never imports auth's HTTP
// middleware to learn who is asking). It also carries, per request, the
// caller headers a route forwards upstream by opt-in (WithForwarded).
//
// Key is the one identity key. Its format is stored — in the per-user
// token store (credentials/peruser), in sealed session ids and in the
// fleet's Redis — so it never changes: a change would orphan every stored
// token and end every session at an upgrade.
package principal

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// Principal is the authenticated caller of one request. The zero value
// (and nil, where a pointer is passed) is anonymous.
type Principal struct {
	// Subject is the token's sub, the API key's configured principal, or
	// the client certificate's field named by
	// auth.client_certificates.principal.
	Subject string
	// Issuer is the token's iss; empty for an API key or a certificate.
	Issuer string
	// ClientID is the OAuth client the token was issued to (client_id, or
	// azp); empty for an API key.
	ClientID string
	// Scopes granted by the token (scope string or scp array), or configured
	// for the API key.
	Scopes []string
	// Groups from the issuer's groups claim, or configured for the API key.
	Groups []string
	// APIKey is the name of the auth.api_keys entry used; empty for a token.
	APIKey string
	// Certificate is the client-certificate field the subject was read
	// from (auth.client_certificates.principal, e.g. common_name); empty
	// for a token or an API key.
	Certificate string
	// Expiry is when the token expires; zero for an API key.
	Expiry time.Time
	// Claims are all of a JWT's claims as encoding/json decodes them, for
	// policy conditions (principal.claims); nil for API keys and
	// introspected tokens. Shared between requests: read only.
	Claims map[string]any
	// PreparedClaims are Claims made ready for policy conditions
	// (NewClaims): converted on first use and kept, so that a token's
	// claims are converted once, not per decision. nil means "convert
	// Claims" at each decision.
	PreparedClaims *Claims
	// bearer is the validated bearer token the principal was read from
	// ("" for an API key). It travels with the principal so that every
	// context a call is re-derived in keeps it; only an upstream token
	// exchange reads it (BearerToken), as the subject token it presents to
	// an authorization server. It is never logged nor sent upstream.
	bearer string
	// forwarded are the caller's request headers that some upstream of
	// the route forwards by explicit opt-in (upstreams.NAME.
	// forward_headers), read by the edge per request (WithForwarded). Only
	// the upstream transport of a connection of this principal's reads
	// them; they are never logged.
	forwarded http.Header
	// dpopJKT is the key thumbprint this request proved possession of (a
	// DPoP-bound token with its proof, internal/auth/dpop.go); "" otherwise.
	dpopJKT string
}

// WithForwarded returns a copy of p carrying the values of the headers
// names (canonical) that h has; p itself when h has none of them (p may
// be shared between requests, so it is never changed).
func (p *Principal) WithForwarded(h http.Header, names []string) *Principal {
	if p == nil {
		return nil
	}
	var fwd http.Header
	for _, n := range names {
		if vs := h.Values(n); len(vs) > 0 {
			if fwd == nil {
				fwd = make(http.Header, len(names))
			}
			fwd[n] = slices.Clone(vs)
		}
	}
	if fwd == nil && p.forwarded == nil {
		return p
	}
	cp := *p
	cp.forwarded = fwd
	return &cp
}

// Forwarded returns the values of the forwarded request header name
// (canonical) the principal's request carried, nil when none.
func (p *Principal) Forwarded(name string) []string {
	if p == nil {
		return nil
	}
	return p.forwarded[name]
}

// ForwardedNames are the names of the forwarded headers the principal's
// request carried, sorted, for audit records (never their values).
func (p *Principal) ForwardedNames() []string {
	if p == nil || len(p.forwarded) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(p.forwarded))
}

// WithDPoPKey returns a copy of p that proved possession of the DPoP key
// with thumbprint jkt on this request (p may be shared: never changed).
// Only authentication makes it.
func (p *Principal) WithDPoPKey(jkt string) *Principal {
	c := *p
	c.dpopJKT = jkt
	return &c
}

// DPoPBound reports whether p proved possession of its token's DPoP key
// on this request.
func (p *Principal) DPoPBound() bool { return p != nil && p.dpopJKT != "" }

// SetBearerToken records the validated bearer token p was read from; only
// authentication sets it.
func (p *Principal) SetBearerToken(token string) { p.bearer = token }

// BearerToken is the validated bearer token the principal authenticated
// with, "" for an API key or nil. Only an RFC 8693 exchange may use it
// (credentials.Subject.Token); it must never reach an upstream.
func (p *Principal) BearerToken() string {
	if p == nil {
		return ""
	}
	return p.bearer
}

// anonymous reports whether p names nobody.
func (p *Principal) anonymous() bool {
	return p == nil || (p.APIKey == "" && p.Subject == "" && p.Issuer == "" && p.Certificate == "")
}

// Key identifies the principal for binding state to it (sessions, parked
// calls, per-user upstream tokens, rate-limit buckets): issuer and
// subject for a token, the subject for a certificate, the key name for
// an API key; "" for anonymous. Two tokens of one user share a key; a
// user, a certificate and an API key never do. The format is stored:
// see the package comment, and KeyOf for the inverse of String.
func (p *Principal) Key() string {
	switch {
	case p.anonymous():
		return ""
	case p.APIKey != "":
		return keyAPIKey + p.APIKey
	case p.Certificate != "":
		return keyCert + p.Subject
	}
	return keyOIDC + p.Issuer + "\x00" + p.Subject
}

// The prefixes of Key's forms.
const (
	keyAPIKey = "apikey\x00"
	keyCert   = "cert\x00"
	keyOIDC   = "oidc\x00"
)

// String names the principal for logs ("alice@https://idp.example.com",
// "apikey:ci", "cert:CN"). It holds no secret.
func (p *Principal) String() string {
	switch {
	case p.anonymous():
		return "anonymous"
	case p.APIKey != "":
		return "apikey:" + p.APIKey
	case p.Certificate != "":
		return "cert:" + p.Subject
	default:
		return p.Subject + "@" + p.Issuer
	}
}

// KeyOf is the Key of the principal that String names as s, for the CLI:
// "apikey:NAME" for an API key, "SUB@ISSUER" for a token (the issuer is
// the URL after the last "@http").
func KeyOf(s string) (string, error) {
	if name, ok := strings.CutPrefix(s, "apikey:"); ok && name != "" {
		return (&Principal{APIKey: name}).Key(), nil
	}
	if i := strings.LastIndex(s, "@http"); i > 0 {
		return (&Principal{Subject: s[:i], Issuer: s[i+1:]}).Key(), nil
	}
	return "", fmt.Errorf("%q names no principal; write SUB@ISSUER (e.g. alice@https://login.example.com/, as the gateway logs it) or apikey:NAME", s)
}

// NameOfKey is how logs name the principal of key (the inverse of KeyOf):
// "SUB@ISSUER" or "apikey:NAME"; any other key with its separators as
// spaces.
func NameOfKey(key string) string {
	parts := strings.Split(key, "\x00")
	switch {
	case len(parts) == 2 && parts[0]+"\x00" == keyAPIKey:
		return "apikey:" + parts[1]
	case len(parts) == 3 && parts[0]+"\x00" == keyOIDC:
		return parts[2] + "@" + parts[1]
	}
	return strings.ReplaceAll(key, "\x00", " ")
}

// Describe lists what the principal carries, for the policy's
// explanations ("subject alice issuer https://… groups eng,ops").
func (p Principal) Describe() string {
	var parts []string
	add := func(k string, v []string) {
		if len(v) > 0 && (len(v) > 1 || v[0] != "") {
			parts = append(parts, fmt.Sprintf("%s %s", k, strings.Join(v, ",")))
		}
	}
	add("subject", []string{p.Subject})
	add("issuer", []string{p.Issuer})
	add("client", []string{p.ClientID})
	add("api key", []string{p.APIKey})
	add("groups", p.Groups)
	add("scopes", p.Scopes)
	if len(parts) == 0 {
		return "anonymous"
	}
	return strings.Join(parts, " ")
}

// HasScope reports whether the principal was granted scope s.
func (p *Principal) HasScope(s string) bool { return p != nil && slices.Contains(p.Scopes, s) }

// MissingScopes returns the scopes of required the principal lacks, in
// order.
func (p *Principal) MissingScopes(required []string) []string {
	var out []string
	for _, s := range required {
		if !p.HasScope(s) {
			out = append(out, s)
		}
	}
	return out
}

// InGroup reports whether the principal belongs to group g.
func (p *Principal) InGroup(g string) bool { return p != nil && slices.Contains(p.Groups, g) }

// Claims are token claims made ready for policy conditions. The
// conversion is made on first use and kept: a token's claims are the same
// for every request it comes with. Safe for concurrent use.
type Claims struct {
	m    map[string]any
	once sync.Once
	s    *structpb.Struct
	err  error
}

// NewClaims returns claims (as encoding/json decodes them; nil is none)
// for Principal.PreparedClaims. m must not change afterwards.
func NewClaims(m map[string]any) *Claims { return &Claims{m: m} }

// Struct is the claims as CEL is given them, or why they cannot be: then
// every condition fails (closed), as the claims cannot be judged.
func (c *Claims) Struct() (*structpb.Struct, error) {
	c.once.Do(func() {
		c.s, c.err = structpb.NewStruct(c.m)
		if c.err != nil {
			c.err = fmt.Errorf("principal.claims: %w", c.err)
		}
	})
	return c.s, c.err
}
