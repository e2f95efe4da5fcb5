package config

import "github.com/mcpgw/mcpgw/internal/config/strictyaml"

// UpstreamAuth says how an upstream's requests are authorized for the
// calling principal (upstreams.NAME.auth): exactly one of its members is
// set. Each acts for the caller, so each needs downstream authentication
// (a principal to act for).
type UpstreamAuth struct {
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
	if countSet(a.PerUser != nil) == 0 {
		v.add(ap, "is empty; set per_user: (each caller's own upstream OAuth authorization), or remove auth:")
		return
	}
	if a.PerUser != nil {
		v.upstreamPerUser(strictyaml.JoinPath(ap, "per_user"), name, u, hasCmd)
	}
}
