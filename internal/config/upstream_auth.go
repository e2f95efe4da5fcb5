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
}

// upstreamAuth validates upstreams.NAME.auth.
func (v *validator) upstreamAuth(p string, name string, u *Upstream, hasCmd bool) {
	a := u.Auth
	if a == nil {
		return
	}
	ap := strictyaml.JoinPath(p, "auth")
	if countSet(a.TokenExchange != nil) == 0 {
		v.add(ap, "is empty; set token_exchange: (a token exchanged for each caller's, RFC 8693), or remove auth:")
		return
	}
	if a.TokenExchange != nil {
		v.upstreamTokenExchange(strictyaml.JoinPath(ap, "token_exchange"), name, u, hasCmd)
	}
}
