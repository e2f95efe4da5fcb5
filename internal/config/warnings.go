package config

import (
	"fmt"
	"maps"
	"net"
	"slices"
)

// Warnings are what a valid config does that an operator may not expect:
// nothing here refuses the config (mcpgw validate exits 0 and prints them,
// the gateway logs them at start and on reload). Each names the key and
// the change that silences it.
func (c *Config) Warnings() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Auth.Enabled() && c.severalPrincipals() {
		exposed := map[string]bool{}
		for _, r := range c.Routes {
			for _, n := range c.RouteUpstreams(r) {
				exposed[n] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
			u := c.Upstreams[name]
			if u == nil || u.Stateful || !exposed[name] || (u.Transport != TransportStdio && len(u.Command) == 0) {
				continue
			}
			out = append(out, fmt.Sprintf("upstreams.%s: one stdio child serves every client and every principal, so whatever it keeps (open browser pages, memory, files, a login) is shared between users; set stateful: true to give each session its own child, or leave it shared if it keeps nothing", name))
		}
	}
	if c.Login == nil {
		for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
			if u := c.Upstreams[name]; u != nil && u.Auth != nil && u.Auth.PerUser != nil {
				out = append(out, fmt.Sprintf("upstreams.%s.auth.per_user: without login: the gateway cannot tell who a browser's user is, so whoever opens a start link is linked to that link's gateway user (a leaked link makes one user's calls run as another's upstream account: the confused deputy); configure login: (docs/login.md) so a link opens only in its own user's signed-in browser", name))
			}
		}
	}
	if a := c.Admin; a != nil && a.TokenFile == "" {
		if h, _, err := net.SplitHostPort(a.Listen); err == nil && !IsLoopbackHost(h) {
			out = append(out, fmt.Sprintf("admin.listen: %q is not loopback and admin.token_file is not set, so whoever reaches the port reads the catalog before policy, the redacted config and the status page; set token_file, or keep the port on a private network", a.Listen))
		}
	}
	return out
}

// severalPrincipals reports whether more than one principal can call the
// gateway: any token issuer or introspection, or API keys acting as
// different principals.
func (c *Config) severalPrincipals() bool {
	a := c.Auth
	if len(a.AllIssuers()) > 0 || a.Introspection != nil {
		return true
	}
	seen := map[string]bool{}
	for _, k := range a.APIKeys {
		p := k.Principal
		if p == "" {
			p = k.Name
		}
		seen[p] = true
	}
	return len(seen) > 1
}
