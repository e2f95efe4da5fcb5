package config

import (
	"fmt"
	"strings"
)

// Introspection is an RFC 7662 token introspection endpoint: a bearer
// token that is not a JWT of a configured issuer (an opaque token) is sent
// there, and accepted when the answer is active, unexpired and for this
// gateway. Answers are cached per token until the token's exp.
type Introspection struct {
	// URL of the introspection endpoint (https, or http on a loopback host).
	URL string `yaml:"url"`
	// ClientID and ClientSecret (use ${ENV_VAR}) or ClientSecretFile
	// authenticate the gateway to the endpoint (HTTP Basic).
	ClientID         string `yaml:"client_id"`
	ClientSecret     string `yaml:"client_secret"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// Audience the token must be for (its aud). Empty means the gateway's
	// canonical resource URI: public_url, or public_url + the route path.
	Audience string `yaml:"audience"`
	// GroupsClaim is the member of the answer holding the caller's groups,
	// as for an issuer (default groups).
	GroupsClaim string `yaml:"groups_claim"`
}

// introspection validates auth.introspection.
func (v *validator) introspection() {
	a := v.cfg.Auth
	if a == nil || a.Introspection == nil {
		return
	}
	in := a.Introspection
	p := "auth.introspection"
	if in.URL == "" {
		v.add(p, "url is not set; give the authorization server's introspection endpoint, e.g. https://idp.example.com/oauth2/introspect")
	} else {
		v.secureURL(p+".url", in.URL, "https://idp.example.com/oauth2/introspect")
	}
	if strings.TrimSpace(in.ClientID) == "" {
		v.add(p, "client_id is not set; the endpoint authenticates the gateway: give the client id it registered for the gateway, e.g. client_id: mcpgw")
	}
	v.clientSecret(p, in.ClientSecret, in.ClientSecretFile, true, "")
	if strings.TrimSpace(in.Audience) != in.Audience {
		v.add(p+".audience", fmt.Sprintf("%q has surrounding whitespace; remove it", in.Audience))
	}
	if in.Audience == "" && v.cfg.PublicURL == "" {
		v.add(p, "token introspection is configured but neither public_url nor audience is set, so no token could be checked for being issued for this gateway; set public_url to the URL clients reach the gateway at (e.g. https://mcp.example.com), or audience:")
	}
	if g := in.GroupsClaim; g != "" && (strings.TrimSpace(g) != g || strings.HasPrefix(g, ".") || strings.HasSuffix(g, ".") || strings.Contains(g, "..")) {
		v.add(p+".groups_claim", fmt.Sprintf("%q is not a claim name or dotted path; write e.g. groups or realm_access.roles", g))
	}
}
