package config

import "github.com/mcpgw/mcpgw/internal/config/strictyaml"

// UpstreamAuth says how an upstream's requests are authorized for the
// calling principal (upstreams.NAME.auth): exactly one of its members is
// set. Each acts for the caller, so each needs downstream authentication
// (a principal to act for).
type UpstreamAuth struct {
	// TokenExchange sends a token the gateway obtained for the caller by
	// exchanging the caller's validated token at an authorization server
	// (RFC 8693, upstream_exchange.go).
	TokenExchange *UpstreamTokenExchange `yaml:"token_exchange"`
	// PerUser sends each caller's own upstream OAuth token, obtained with
	// the authorization-code flow the user consents to in a browser
	// (upstream_peruser.go).
	PerUser *UpstreamPerUser `yaml:"per_user"`
}

// upstreamAuth validates upstreams.NAME.auth.
func (v *validator) upstreamAuth(p string, name string, u *Upstream, hasCmd bool) {
	a := u.Auth
	if a == nil {
		return
	}
	ap := strictyaml.JoinPath(p, "auth")
	switch countSet(a.TokenExchange != nil, a.PerUser != nil) {
	case 0:
		v.add(ap, "is empty; set token_exchange: (a token exchanged for each caller's, RFC 8693) or per_user: (each caller's own upstream OAuth authorization), or remove auth:")
		return
	case 2:
		v.add(ap, "sets both token_exchange and per_user, two credentials for one request; keep one")
	}
	if a.TokenExchange != nil {
		v.upstreamTokenExchange(strictyaml.JoinPath(ap, "token_exchange"), name, u, hasCmd)
	}
	if a.PerUser != nil {
		v.upstreamPerUser(strictyaml.JoinPath(ap, "per_user"), name, u, hasCmd)
	}
}
