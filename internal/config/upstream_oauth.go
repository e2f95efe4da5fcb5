package config

import (
	"fmt"
	"net/url"
	"strings"
)

// UpstreamOAuth makes the gateway obtain its own access token for an HTTP
// upstream with the OAuth 2.0 client-credentials grant (RFC 6749 section
// 4.4) and send it as "Authorization: Bearer" on every request to that
// upstream. The token is cached and refreshed before it expires. It is the
// gateway's credential, never the downstream caller's.
type UpstreamOAuth struct {
	// TokenURL is the authorization server's token endpoint (https, or http
	// on a loopback host).
	TokenURL string `yaml:"token_url"`
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
	// for. Default: the upstream's url.
	Resource string `yaml:"resource"`
	// AuthMethod is how the client authenticates to the token endpoint:
	// client_secret_basic (HTTP Basic) or client_secret_post (form
	// parameters). Empty tries basic, then post.
	AuthMethod string `yaml:"auth_method"`
}

// Token endpoint client authentication methods (RFC 7591 names).
const (
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
)

// upstreamOAuthDefaults fills in the resource parameter: the upstream's URL.
func upstreamOAuthDefaults(p string, u *Upstream, d *decoder) {
	if u.OAuth != nil && !d.set[joinPath(joinPath(p, "oauth"), "resource")] {
		u.OAuth.Resource = u.URL
	}
}

// upstreamOAuth validates upstreams.NAME.oauth.
func (v *validator) upstreamOAuth(p string, u *Upstream, hasCmd bool) {
	o := u.OAuth
	op := joinPath(p, "oauth")
	if o == nil {
		return
	}
	if hasCmd {
		v.add(op, "oauth applies only to url upstreams (the gateway sends the token on its HTTP requests); remove it, or pass a credential to the child with env:")
		return
	}
	for k := range u.Headers {
		if strings.EqualFold(k, "Authorization") {
			v.add(joinPath(joinPath(p, "headers"), k), "an Authorization header is set together with oauth:, which sends its own bearer token on every request; remove one of them")
		}
	}
	if o.TokenURL == "" {
		v.add(op, "token_url is not set; give the authorization server's token endpoint, e.g. https://idp.example.com/oauth2/token")
	} else if t, err := url.Parse(o.TokenURL); err == nil && t.Scheme == "http" && t.Host != "" && !IsLoopbackHost(t.Hostname()) {
		v.add(joinPath(op, "token_url"), fmt.Sprintf("%q is plain http, so the client secret and the tokens would cross the network in clear; use https (http is accepted only for a loopback host)", o.TokenURL))
	} else if v.secureURL(joinPath(op, "token_url"), o.TokenURL, "https://idp.example.com/oauth2/token") {
		if t, _ := url.Parse(o.TokenURL); t.User != nil {
			v.add(joinPath(op, "token_url"), "has user:password@ in it; put the credentials in client_id and client_secret (or client_secret_file) instead")
		}
	}
	if strings.TrimSpace(o.ClientID) == "" {
		v.add(op, "client_id is not set; give the client id the authorization server registered for the gateway, e.g. client_id: mcpgw")
	}
	switch {
	case o.ClientSecret != "" && o.ClientSecretFile != "":
		v.add(op, "both client_secret and client_secret_file are set; keep client_secret_file (a file holding the secret) or client_secret: ${ENV_VAR}, not both")
	case o.ClientSecret == "" && o.ClientSecretFile == "":
		v.add(op, "neither client_secret nor client_secret_file is set (the client-credentials grant needs a confidential client); set client_secret_file: /run/secrets/NAME, or client_secret: ${ENV_VAR}")
	}
	v.scopes(joinPath(op, "scopes"), o.Scopes)
	if o.Resource != "" {
		// RFC 8707 section 2: an absolute URI without a fragment.
		r, err := url.Parse(o.Resource)
		switch {
		case err != nil || !r.IsAbs() || r.Host == "" && r.Opaque == "":
			v.add(joinPath(op, "resource"), fmt.Sprintf("%q is not an absolute URI; write the upstream's resource identifier, e.g. https://api.example.com/mcp, or remove resource: for the default (the upstream url)", o.Resource))
		case r.Fragment != "":
			v.add(joinPath(op, "resource"), fmt.Sprintf("%q has a #fragment, which a resource indicator must not (RFC 8707); remove it", o.Resource))
		}
	}
	switch o.AuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
	default:
		v.add(joinPath(op, "auth_method"), fmt.Sprintf("%q is not a client authentication method; use %s or %s, or remove it to try both", o.AuthMethod, AuthMethodBasic, AuthMethodPost))
	}
}
