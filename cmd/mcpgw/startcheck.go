package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// startChecks is what mcpgw run checks of the files a config names before
// it serves, checked without starting anything, so that validate refuses
// what run would refuse: key and secret files exist, can be read and hold
// something; session keys and the pinning lock parse as run parses them;
// the audit log can be written. Every problem is reported, each naming its
// key. Nothing is created or written.
func startChecks(cfg *config.Config) []string {
	var out []string
	add := func(key, format string, args ...any) {
		out = append(out, key+": "+fmt.Sprintf(format, args...))
	}
	// secret reads a file holding one secret, as run does.
	secret := func(key, path string) {
		if path == "" {
			return
		}
		b, err := os.ReadFile(path)
		switch {
		case err != nil:
			add(key, "%v; create it or fix the path", err)
		case strings.TrimSpace(string(b)) == "":
			add(key, "%s is empty; put the secret in it", path)
		}
	}
	if s := cfg.Sessions; s != nil {
		if s.KeyFile != "" {
			data, err := os.ReadFile(s.KeyFile)
			if err == nil {
				_, err = sessions.ParseSessionKeys(data)
			}
			if err != nil {
				add("sessions.key_file", "%v; create it with one key per line, e.g. `openssl rand -base64 32 > %s`", err, s.KeyFile)
			}
		}
		if r := s.Redis; r != nil {
			secret("sessions.redis.password_file", r.PasswordFile)
			if r.TLS != nil && r.TLS.CAFile != "" {
				pem, err := os.ReadFile(r.TLS.CAFile)
				switch {
				case err != nil:
					add("sessions.redis.tls.ca_file", "%v", err)
				case !x509.NewCertPool().AppendCertsFromPEM(pem):
					add("sessions.redis.tls.ca_file", "%s holds no PEM certificate; give the CA that signs Redis' certificate", r.TLS.CAFile)
				}
			}
		}
	}
	if a := cfg.Admin; a != nil {
		secret("admin.token_file", a.TokenFile)
	}
	if a := cfg.Auth; a != nil {
		for i, k := range a.APIKeys {
			secret(fmt.Sprintf("auth.api_keys[%d].key_file", i), k.KeyFile)
		}
		if in := a.Introspection; in != nil {
			secret("auth.introspection.client_secret_file", in.ClientSecretFile)
		}
	}
	if l := cfg.Login; l != nil {
		if l.Provider != nil {
			secret("login.provider.client_secret_file", l.Provider.ClientSecretFile)
		}
		if l.KeyFile != "" {
			if data, err := os.ReadFile(l.KeyFile); err == nil {
				if _, err := sessions.ParseSessionKeys(data); err != nil {
					add("login.key_file", "%v; one base64 32-byte key per line, newest first (e.g. `openssl rand -base64 32`), or remove it to have the gateway keep its own", err)
				}
			} else if !errors.Is(err, fs.ErrNotExist) {
				add("login.key_file", "%v", err)
			}
		}
		if l.StateFile != "" {
			if err := writable(l.StateFile, true); err != nil {
				add("login.state_file", "%v", err)
			}
		}
	}
	names := make([]string, 0, len(cfg.Upstreams))
	for name := range cfg.Upstreams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		u := cfg.Upstreams[name]
		if u == nil {
			continue
		}
		p := "upstreams." + name
		if u.OAuth != nil {
			secret(p+".oauth.client_secret_file", u.OAuth.ClientSecretFile)
		}
		if u.Auth != nil && u.Auth.TokenExchange != nil {
			secret(p+".auth.token_exchange.client_secret_file", u.Auth.TokenExchange.ClientSecretFile)
		}
		if u.Auth != nil && u.Auth.PerUser != nil {
			pu := u.Auth.PerUser
			secret(p+".auth.per_user.client_secret_file", pu.ClientSecretFile)
			if pu.Store != nil && pu.Store.File != "" {
				if err := writable(pu.Store.File, true); err != nil {
					add(p+".auth.per_user.store.file", "%v", err)
				}
			}
		}
		if u.Dir != "" {
			if fi, err := os.Stat(u.Dir); err != nil || !fi.IsDir() {
				add(p+".dir", "%s is not a directory the child can start in; create it or fix the path", u.Dir)
			}
		}
	}
	if cfg.Policy != nil {
		if _, err := policy.NewPinner(cfg.Policy.Pinning); err != nil {
			out = append(out, err.Error())
		}
	}
	if a := cfg.Audit; a != nil && a.Output != "" && a.Output != "stdout" && a.Output != "stderr" {
		if err := writable(a.Output, false); err != nil {
			add("audit.output", "%v", err)
		}
	}
	return out
}

// writable reports why a file that is written (and created if missing)
// could not be: the file, or else the directory it would be created in,
// must be writable by this process. With mkdir, as for a store that makes
// its directories, the nearest directory that exists must be.
func writable(path string, mkdir bool) error {
	err := unix.Access(path, unix.W_OK)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(path)
		for mkdir && dir != filepath.Dir(dir) {
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				break
			}
			dir = filepath.Dir(dir)
		}
		if err = unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("%s cannot be created: directory %s: %w; create the directory, writable by mcpgw", path, dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return nil
}
