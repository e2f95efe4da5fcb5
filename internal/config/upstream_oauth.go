package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// UpstreamOAuth makes the gateway obtain its own access token for an HTTP
// upstream with the OAuth 2.0 client-credentials grant (RFC 6749 section
// 4.4) and send it as "Authorization: Bearer" on every request to that
// upstream. The token is cached and refreshed before it expires. It is the
// gateway's credential, never the downstream caller's.
//
// Where the token comes from is one of: TokenURL (a token endpoint, used
// from the first request), Issuer (an authorization server whose RFC 8414
// metadata names the endpoint), or Discover (the authorization server the
// upstream's RFC 9728 protected-resource metadata names). With Issuer or
// Discover the gateway follows the MCP authorization flow: a request goes
// without a token until the upstream answers 401, whose WWW-Authenticate
// challenge (and protected-resource metadata) give the resource and the
// scopes to ask for.
type UpstreamOAuth struct {
	// TokenURL is the authorization server's token endpoint (https, or http
	// on a loopback host).
	TokenURL string `yaml:"token_url"`
	// Issuer is the authorization server's issuer identifier (https, or http
	// on a loopback host); its metadata must name exactly this issuer.
	Issuer string `yaml:"issuer"`
	// Discover takes the authorization server from the upstream's
	// protected-resource metadata. The client secret then goes to whichever
	// server the upstream names: prefer Issuer, which pins it.
	Discover bool `yaml:"discover"`
	// ClientID identifies the gateway to the authorization server.
	ClientID string `yaml:"client_id"`
	// ClientSecret (use ${ENV_VAR}) or ClientSecretFile (a file holding the
	// secret, read again for each token request so a rotated secret is
	// picked up): exactly one is set.
	ClientSecret     string `yaml:"client_secret"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// Scopes requested (the scope parameter); empty requests none.
	Scopes []string `yaml:"scopes"`
	// Resource is the RFC 8707 resource parameter: the upstream the token is
	// for. Default: with TokenURL the upstream's url; with Issuer or
	// Discover the resource the upstream's protected-resource metadata
	// publishes (else its url).
	Resource string `yaml:"resource"`
	// AuthMethod is how the client authenticates to the token endpoint:
	// client_secret_basic (HTTP Basic) or client_secret_post (form
	// parameters). Empty tries basic, then post.
	AuthMethod string `yaml:"auth_method"`
	// AllowAddresses lists the loopback, private or link-local addresses
	// (CIDRs or single addresses) that URLs the upstream names with
	// discover — its challenge's resource_metadata, the authorization
	// server it names and that server's endpoints — may lead to; others
	// are refused.
	AllowAddresses []string `yaml:"allow_addresses"`
}

// Token endpoint client authentication methods (RFC 7591 names).
const (
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
)

// upstreamOAuthDefaults fills in the resource parameter for a token_url
// client: the upstream's URL. A discovering client learns it from the
// upstream's metadata.
func upstreamOAuthDefaults(p string, u *Upstream, d *strictyaml.Decoder) {
	if u.OAuth != nil && u.OAuth.TokenURL != "" && !d.Set(strictyaml.JoinPath(strictyaml.JoinPath(p, "oauth"), "resource")) {
		u.OAuth.Resource = u.URL
	}
}

// Discovers reports whether the token endpoint is found by discovery
// (Issuer or Discover) rather than configured.
func (o *UpstreamOAuth) Discovers() bool { return o.TokenURL == "" && (o.Issuer != "" || o.Discover) }

// upstreamOAuth validates upstreams.NAME.oauth.
func (v *validator) upstreamOAuth(p string, u *Upstream, hasCmd bool) {
	o := u.OAuth
	op := strictyaml.JoinPath(p, "oauth")
	if o == nil {
		return
	}
	if hasCmd {
		v.add(op, "oauth applies only to url upstreams (the gateway sends the token on its HTTP requests); remove it, or pass a credential to the child with env:")
		return
	}
	for k := range u.Headers {
		if strings.EqualFold(k, "Authorization") {
			v.add(strictyaml.JoinPath(strictyaml.JoinPath(p, "headers"), k), "an Authorization header is set together with oauth:, which sends its own bearer token on every request; remove one of them")
		}
	}
	sources := countSet(o.TokenURL != "", o.Issuer != "", o.Discover)
	switch {
	case sources == 0:
		v.add(op, "token_url is not set, nor issuer or discover; set token_url (the token endpoint, e.g. https://idp.example.com/oauth2/token), issuer (the authorization server, whose metadata names the endpoint), or discover: true (the authorization server the upstream's protected-resource metadata names)")
	case sources > 1:
		v.add(op, "more than one of token_url, issuer and discover is set, three ways to find the token endpoint; keep one")
	}
	if o.TokenURL != "" {
		v.oauthServerURL(strictyaml.JoinPath(op, "token_url"), o.TokenURL, "https://idp.example.com/oauth2/token")
	}
	if o.Issuer != "" {
		v.issuerURL(strictyaml.JoinPath(op, "issuer"), o.Issuer)
	}
	if strings.TrimSpace(o.ClientID) == "" {
		v.add(op, "client_id is not set; give the client id the authorization server registered for the gateway, e.g. client_id: mcpgw")
	}
	v.clientSecret(op, o.ClientSecret, o.ClientSecretFile, true, "the client-credentials grant needs a confidential client")
	v.scopes(strictyaml.JoinPath(op, "scopes"), o.Scopes)
	if o.Resource != "" {
		// RFC 8707 section 2: an absolute URI without a fragment.
		r, err := url.Parse(o.Resource)
		switch {
		case err != nil || !r.IsAbs() || r.Host == "" && r.Opaque == "":
			v.add(strictyaml.JoinPath(op, "resource"), fmt.Sprintf("%q is not an absolute URI; write the upstream's resource identifier, e.g. https://api.example.com/mcp, or remove resource: for the default (the upstream url)", o.Resource))
		case r.Fragment != "":
			v.add(strictyaml.JoinPath(op, "resource"), fmt.Sprintf("%q has a #fragment, which a resource indicator must not (RFC 8707); remove it", o.Resource))
		}
	}
	switch o.AuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
	default:
		v.add(strictyaml.JoinPath(op, "auth_method"), fmt.Sprintf("%q is not a client authentication method; use %s or %s, or remove it to try both", o.AuthMethod, AuthMethodBasic, AuthMethodPost))
	}
	v.allowAddresses(strictyaml.JoinPath(op, "allow_addresses"), o.AllowAddresses)
}

// allowAddresses checks an allow_addresses list: addresses or CIDRs.
func (v *validator) allowAddresses(p string, list []string) {
	for i, a := range list {
		if !IsAllowAddress(a) {
			v.add(fmt.Sprintf("%s[%d]", p, i), fmt.Sprintf("%q is neither an address nor a CIDR prefix (e.g. 10.0.0.0/8, 127.0.0.1); list the internal addresses URLs the upstream names may lead to", a))
		}
	}
}

// oauthServerURL checks an authorization server URL the client secret is
// sent to (or that names where it goes): https, or http on a loopback host,
// and no user:password@. It reports whether the URL is usable.
func (v *validator) oauthServerURL(p, raw, example string) bool {
	if t, err := url.Parse(raw); err == nil && t.Scheme == "http" && t.Host != "" && !IsLoopbackHost(t.Hostname()) {
		v.add(p, fmt.Sprintf("%q is plain http, so the client secret and the tokens would cross the network in clear; use https (http is accepted only for a loopback host)", raw))
		return false
	}
	if !v.secureURL(p, raw, example) {
		return false
	}
	if t, _ := url.Parse(raw); t.User != nil {
		v.add(p, "has user:password@ in it; put the credentials in client_id and client_secret (or client_secret_file) instead")
		return false
	}
	return true
}

// issuerURL checks an authorization server's issuer identifier: an OAuth
// server URL (oauthServerURL) with no query (RFC 8414 section 2; a
// fragment oauthServerURL refuses).
func (v *validator) issuerURL(p, issuer string) {
	if !v.oauthServerURL(p, issuer, "https://idp.example.com") {
		return
	}
	if t, _ := url.Parse(issuer); t.RawQuery != "" {
		v.add(p, fmt.Sprintf("%q has a ?query, which an issuer identifier must not (RFC 8414); remove it", issuer))
	}
}

// clientSecret checks the client_secret / client_secret_file pair at p:
// never both; with required, one of them, why saying what needs it.
func (v *validator) clientSecret(p, secret, file string, required bool, why string) {
	switch {
	case secret != "" && file != "":
		v.add(p, "both client_secret and client_secret_file are set; keep client_secret_file (a file holding the secret) or client_secret: ${ENV_VAR}, not both")
	case required && secret == "" && file == "":
		if why != "" {
			why = " (" + why + ")"
		}
		v.add(p, "neither client_secret nor client_secret_file is set"+why+"; set client_secret_file: /run/secrets/NAME, or client_secret: ${ENV_VAR}")
	}
}

// IsAllowAddress reports whether s is an allow_addresses entry: a CIDR
// prefix or one address. internal/outbound, which imports only the
// standard library, reads the entries by the same rule (ParsePrefix; a
// test holds the two to it).
func IsAllowAddress(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
