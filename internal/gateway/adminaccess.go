package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// Who may read the admin listener (issue 27.4). Its answers — the catalog
// before policy, hidden tools included, the config, metrics — are for
// operators, so every request passes the MCP listener's Host and Origin
// checks in their admin form (edge.NewAdminChecks: DNS rebinding and
// cross-site pages are refused on any listen address), and with
// admin.token_file the status page, /status/*, /debug/* and any other path
// need the token. /healthz and /readyz stay open for probes, and /metrics
// for scrapers unless admin.protect_metrics. The access is rebuilt by
// every reload: allowed_hosts apply and the token file is reread (rotate by
// rewriting the file and reloading).

// minAdminToken keeps a guessable token out of admin.token_file.
const minAdminToken = 16

// adminAccess is one config generation's admin access rules.
type adminAccess struct {
	checks         *edge.Checks
	token          *[sha256.Size]byte // SHA-256 of the token; nil: none needed
	protectMetrics bool
}

// newAdminAccess builds the admin access rules of cfg for a listener at
// listen, reading admin.token_file.
func newAdminAccess(cfg *config.Config, listen string) (*adminAccess, error) {
	a := cfg.Admin
	if a == nil {
		a = &config.Admin{}
	}
	acc := &adminAccess{checks: edge.NewAdminChecks(listen, a.AllowedHosts), protectMetrics: a.ProtectMetrics}
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("admin.token_file: %w; create it, e.g. `openssl rand -base64 32 > %s`, or remove token_file", err, a.TokenFile)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < minAdminToken || strings.ContainsAny(tok, " \t\r\n") {
			return nil, fmt.Errorf("admin.token_file %s: the token must be one line of at least %d characters without spaces; write one with `openssl rand -base64 32 > %s`", a.TokenFile, minAdminToken, a.TokenFile)
		}
		h := sha256.Sum256([]byte(tok))
		acc.token = &h
	}
	return acc, nil
}

// open reports whether path is served without the token.
func (acc *adminAccess) open(path string) bool {
	switch path {
	case "/healthz", "/readyz":
		return true
	case "/metrics":
		return !acc.protectMetrics
	}
	return false
}

// authorized reports whether r carries the token: as a bearer token, or as
// the password of Basic authentication (any user name), which is what a
// browser can send for the status page and its links.
func (acc *adminAccess) authorized(r *http.Request) bool {
	var given string
	if _, pw, ok := r.BasicAuth(); ok {
		given = pw
	} else if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		given = strings.TrimSpace(tok)
	} else {
		return false
	}
	// Hashing first makes the comparison constant-time whatever the length.
	h := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(h[:], acc.token[:]) == 1
}

// guardAdmin wraps the admin endpoints in the access rules in force.
func (g *Gateway) guardAdmin(next http.Handler) http.Handler {
	log := g.log.Named("admin")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acc := g.adminAccess.Load()
		if acc == nil { // the handler used without the listener: checks only
			acc = &adminAccess{checks: edge.NewAdminChecks("", nil)}
		}
		acc.checks.Middleware(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if acc.token != nil && !acc.open(r.URL.Path) && !acc.authorized(r) {
				log.Debug("admin request without the admin token refused", zap.String("path", r.URL.Path))
				h := w.Header()
				h.Add("WWW-Authenticate", `Basic realm="mcpgw admin", charset="UTF-8"`)
				h.Add("WWW-Authenticate", `Bearer realm="mcpgw admin"`)
				h.Set("Cache-Control", "no-store")
				http.Error(w, "mcpgw admin: "+r.URL.Path+" needs the admin token (admin.token_file): send Authorization: Bearer TOKEN, or TOKEN as the Basic password", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})).ServeHTTP(w, r)
	})
}
