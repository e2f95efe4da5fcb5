package config

import (
	"path/filepath"
	"strings"
)

// resolvePaths makes the relative file and directory paths of c absolute,
// against base, the config file's directory: a config then means the same
// whatever directory mcpgw was started in (systemd, a container, a shell).
// A command's program is resolved only when written as a path (./server,
// bin/server) and the upstream has no dir: a bare name is looked up on
// PATH, and a path under dir: is the child's, relative to its dir.
// Config.Parse, with no file, resolves nothing.
func (c *Config) resolvePaths(base string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			dirLike := strings.HasSuffix(*p, "/") // kept, for validation to name
			*p = filepath.Join(base, *p)
			if dirLike {
				*p += "/"
			}
		}
	}
	if s := c.Sessions; s != nil {
		abs(&s.KeyFile)
		if r := s.Redis; r != nil {
			abs(&r.PasswordFile)
			if r.TLS != nil {
				abs(&r.TLS.CAFile)
			}
		}
	}
	if c.Admin != nil {
		abs(&c.Admin.TokenFile)
	}
	if a := c.Auth; a != nil {
		for i := range a.APIKeys {
			abs(&a.APIKeys[i].KeyFile)
		}
		if a.Introspection != nil {
			abs(&a.Introspection.ClientSecretFile)
		}
	}
	if l := c.Login; l != nil {
		abs(&l.StateFile)
		abs(&l.KeyFile)
		if l.Provider != nil {
			abs(&l.Provider.ClientSecretFile)
		}
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		if u.OAuth != nil {
			abs(&u.OAuth.ClientSecretFile)
		}
		if u.Auth != nil && u.Auth.TokenExchange != nil {
			abs(&u.Auth.TokenExchange.ClientSecretFile)
		}
		if u.Auth != nil && u.Auth.PerUser != nil {
			abs(&u.Auth.PerUser.ClientSecretFile)
			if u.Auth.PerUser.Store != nil {
				abs(&u.Auth.PerUser.Store.File)
			}
		}
		if len(u.Command) > 0 && u.Dir == "" && strings.ContainsRune(u.Command[0], filepath.Separator) {
			abs(&u.Command[0])
		}
		abs(&u.Dir)
	}
	if c.Policy != nil && c.Policy.Pinning != nil {
		abs(&c.Policy.Pinning.LockFile)
	}
	for _, ic := range c.Interceptors {
		if ic != nil {
			abs(&ic.BearerTokenFile) // interceptors.go
		}
	}
	if a := c.Audit; a != nil && a.Output != AuditStdout && a.Output != AuditStderr &&
		!strings.EqualFold(a.Output, AuditStdout) && !strings.EqualFold(a.Output, AuditStderr) && a.Output != "-" {
		abs(&a.Output)
	}
}
