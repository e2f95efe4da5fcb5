package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Introspection is an RFC 7662 token introspection endpoint: a bearer
// token that is not a JWT of a configured issuer (an opaque token) is sent
// there, and accepted when the answer is active, unexpired and for this
// gateway. An answer is cached per token for at most CacheTTL (and never
// past the token's exp): that is how long a revoked token stays accepted.
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
	// CacheTTL is how long an active answer is reused before the endpoint
	// is asked again: the delay before a revoked token is refused. 0 asks
	// on every request.
	CacheTTL Duration `yaml:"cache_ttl"`
}

// DefaultIntrospectionCacheTTL bounds how long a revoked opaque token stays
// accepted, while a client sending a token with every request still costs
// one introspection a minute.
const DefaultIntrospectionCacheTTL = time.Minute

// MaxIntrospectionCacheTTL keeps the revocation delay one an operator can
// defend: past an hour, a revoked token is as good as unrevocable.
const MaxIntrospectionCacheTTL = time.Hour

func introspectionDefaults(c *Config, d *strictyaml.Decoder) {
	if c.Auth != nil && c.Auth.Introspection != nil && !d.Set("auth.introspection.cache_ttl") {
		c.Auth.Introspection.CacheTTL = Duration(DefaultIntrospectionCacheTTL)
	}
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
	if ttl := in.CacheTTL.D(); ttl < 0 || ttl > MaxIntrospectionCacheTTL {
		v.add(p+".cache_ttl", fmt.Sprintf("%s is out of range; give 0 to %s (default %s): it is how long a revoked token stays accepted", in.CacheTTL, MaxIntrospectionCacheTTL, DefaultIntrospectionCacheTTL))
	}
	if g := in.GroupsClaim; g != "" && (strings.TrimSpace(g) != g || strings.HasPrefix(g, ".") || strings.HasSuffix(g, ".") || strings.Contains(g, "..")) {
		v.add(p+".groups_claim", fmt.Sprintf("%q is not a claim name or dotted path; write e.g. groups or realm_access.roles", g))
	}
}
