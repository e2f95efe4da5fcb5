package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// UpstreamTokenExchange makes the gateway exchange each caller's validated
// downstream token at an authorization server for a token the upstream
// accepts (OAuth 2.0 Token Exchange, RFC 8693), and send that on the
// caller's requests to the upstream. The downstream token goes only to the
// authorization server, as subject_token; never to the upstream. Exchanged
// tokens are cached per (principal, upstream, scopes) until shortly before
// they expire, and never shared between principals.
//
// The upstream's requests then run as the caller, so it gets one upstream
// connection per downstream session (per principal for stateless
// callers), bounded by max_sessions and max_sessions_per_principal. The
// shared connection (the catalog's lists) uses oauth: or an Authorization
// header if configured; otherwise lists, too, go through the caller's own
// connection.
type UpstreamTokenExchange struct {
	// TokenURL is the authorization server's token endpoint; Issuer its
	// issuer identifier, whose RFC 8414 metadata (exactly this issuer)
	// names the endpoint. Exactly one is set (https, or http on loopback).
	TokenURL string `yaml:"token_url"`
	Issuer   string `yaml:"issuer"`
	// ClientID and ClientSecret (use ${ENV_VAR}) or ClientSecretFile (read
	// again for each request, so a rotated secret is picked up) are the
	// gateway's client authentication at the token endpoint.
	ClientID         string `yaml:"client_id"`
	ClientSecret     string `yaml:"client_secret"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// AuthMethod: client_secret_basic (default) or client_secret_post.
	AuthMethod string `yaml:"auth_method"`
	// Audience is the audience parameter: the upstream's identifier at the
	// authorization server (the aud the exchanged token must carry).
	Audience string `yaml:"audience"`
	// Resource is the RFC 8707 resource parameter (default: the upstream url).
	Resource string `yaml:"resource"`
	// Scopes requested for the exchanged token.
	Scopes []string `yaml:"scopes"`
	// RequestedTokenType and SubjectTokenType are RFC 8693 token type URIs
	// (default urn:ietf:params:oauth:token-type:access_token for both).
	RequestedTokenType string `yaml:"requested_token_type"`
	SubjectTokenType   string `yaml:"subject_token_type"`
	// Actor sends the gateway's own token (client-credentials grant with
	// the same client at the same endpoint) as actor_token, so the issued
	// token says the gateway acts for the caller (delegation, an act claim)
	// rather than impersonating them.
	Actor bool `yaml:"actor"`
	// MaxCached bounds the exchanged tokens cached for this upstream (least
	// recently used evicted first; default 10000).
	MaxCached int `yaml:"max_cached"`
	// IDJAG makes the exchange Enterprise-Managed Authorization: the IdP
	// issues an ID-JAG, presented to the upstream's authorization server
	// with the JWT bearer grant (upstream_idjag.go).
	IDJAG *UpstreamIDJAG `yaml:"id_jag"`
}

// Token type identifiers (RFC 8693 section 3).
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
	// DefaultMaxCachedExchanges is token_exchange.max_cached's default.
	DefaultMaxCachedExchanges = 10000
)

// tokenExchangeDefaults fills in the resource (the upstream url), the token
// types and the cache bound.
func tokenExchangeDefaults(p string, u *Upstream, d *strictyaml.Decoder) {
	if u.Auth == nil || u.Auth.TokenExchange == nil {
		return
	}
	te := u.Auth.TokenExchange
	tp := strictyaml.JoinPath(strictyaml.JoinPath(p, "auth"), "token_exchange")
	if !d.Set(strictyaml.JoinPath(tp, "resource")) {
		te.Resource = u.URL
	}
	if !d.Set(strictyaml.JoinPath(tp, "requested_token_type")) {
		te.RequestedTokenType = TokenTypeAccessToken
	}
	if !d.Set(strictyaml.JoinPath(tp, "subject_token_type")) {
		te.SubjectTokenType = TokenTypeAccessToken
	}
	if !d.Set(strictyaml.JoinPath(tp, "max_cached")) {
		te.MaxCached = DefaultMaxCachedExchanges
	}
	if !d.Set(strictyaml.JoinPath(tp, "auth_method")) {
		te.AuthMethod = AuthMethodBasic
	}
	idJAGDefaults(tp, te, d) // upstream_idjag.go
}

// upstreamTokenExchange validates upstreams.NAME.auth.token_exchange.
func (v *validator) upstreamTokenExchange(tp, name string, u *Upstream, hasCmd bool) {
	te := u.Auth.TokenExchange
	if hasCmd {
		v.add(tp, "token_exchange applies only to url upstreams (the gateway sends the exchanged token on its HTTP requests); remove it, or give the child its credential with env:")
		return
	}
	if a := v.cfg.Auth; a == nil || (len(a.AllIssuers()) == 0 && a.Introspection == nil) {
		v.add(tp, "token_exchange exchanges each caller's validated bearer token, but auth: has no token issuer (oidc, issuers or introspection), so there is no token to exchange; configure auth.oidc (the issuer your callers' tokens come from), or remove token_exchange")
	}
	switch countSet(te.TokenURL != "", te.Issuer != "") {
	case 0:
		v.add(tp, "neither token_url nor issuer is set; set token_url (the token endpoint, e.g. https://idp.example.com/oauth2/token) or issuer (the authorization server, whose metadata names the endpoint)")
	case 2:
		v.add(tp, "both token_url and issuer are set, two ways to find the token endpoint; keep one")
	}
	if te.TokenURL != "" {
		v.oauthServerURL(strictyaml.JoinPath(tp, "token_url"), te.TokenURL, "https://idp.example.com/oauth2/token")
	}
	if te.Issuer != "" {
		v.issuerURL(strictyaml.JoinPath(tp, "issuer"), te.Issuer)
	}
	if strings.TrimSpace(te.ClientID) == "" {
		v.add(tp, "client_id is not set; give the client id the authorization server registered for the gateway (a client allowed to exchange tokens), e.g. client_id: mcpgw")
	}
	v.clientSecret(tp, te.ClientSecret, te.ClientSecretFile, true, "the gateway authenticates to the token endpoint as a confidential client")
	switch te.AuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
	default:
		v.add(strictyaml.JoinPath(tp, "auth_method"), fmt.Sprintf("%q is not a client authentication method; use %s or %s", te.AuthMethod, AuthMethodBasic, AuthMethodPost))
	}
	if strings.TrimSpace(te.Audience) != te.Audience {
		v.add(strictyaml.JoinPath(tp, "audience"), fmt.Sprintf("%q has surrounding whitespace; remove it", te.Audience))
	}
	if te.Resource != "" {
		r, err := url.Parse(te.Resource)
		switch {
		case err != nil || !r.IsAbs() || r.Host == "" && r.Opaque == "":
			v.add(strictyaml.JoinPath(tp, "resource"), fmt.Sprintf("%q is not an absolute URI; write the upstream's resource identifier, e.g. https://api.example.com/mcp, or remove resource: for the default (the upstream url)", te.Resource))
		case r.Fragment != "":
			v.add(strictyaml.JoinPath(tp, "resource"), fmt.Sprintf("%q has a #fragment, which a resource indicator must not (RFC 8707); remove it", te.Resource))
		}
	}
	v.scopes(strictyaml.JoinPath(tp, "scopes"), te.Scopes)
	for _, k := range []struct{ key, val string }{{"requested_token_type", te.RequestedTokenType}, {"subject_token_type", te.SubjectTokenType}} {
		if t, err := url.Parse(k.val); k.val != "" && (err != nil || !t.IsAbs()) {
			v.add(strictyaml.JoinPath(tp, k.key), fmt.Sprintf("%q is not a token type URI; use e.g. %s (RFC 8693 section 3), or remove it for that default", k.val, TokenTypeAccessToken))
		}
	}
	if te.IDJAG != nil {
		v.upstreamIDJAG(tp, te) // upstream_idjag.go: an ID token is its subject
	} else if te.SubjectTokenType == TokenTypeIDToken {
		v.add(strictyaml.JoinPath(tp, "subject_token_type"), "the subject token is the caller's bearer (access) token, not an ID token; use "+TokenTypeAccessToken+" or "+TokenTypeJWT)
	}
	if te.MaxCached < 1 {
		v.add(strictyaml.JoinPath(tp, "max_cached"), fmt.Sprintf("%d cannot hold a token; give at least 1 (default %d)", te.MaxCached, DefaultMaxCachedExchanges))
	}
}

type exchangePlain UpstreamTokenExchange

func (te UpstreamTokenExchange) redacted() exchangePlain {
	c := exchangePlain(te)
	c.ClientSecret = redactString(te.ClientSecret)
	return c
}

// MarshalJSON encodes the exchange settings with the client secret redacted.
func (te UpstreamTokenExchange) MarshalJSON() ([]byte, error) { return json.Marshal(te.redacted()) }

// String formats the exchange settings with the client secret redacted.
func (te UpstreamTokenExchange) String() string { return fmt.Sprintf("%+v", te.redacted()) }
