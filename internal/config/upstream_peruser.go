package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// UpstreamPerUser makes each caller's requests to an OAuth-protected HTTP
// upstream carry that caller's own access token for it: the gateway is an
// OAuth client (authorization code + PKCE) of the upstream's
// authorization server, and a caller without a token is sent (a URL-mode
// elicitation) to the gateway's page <public_url>/oauth/upstream/NAME/start,
// which takes the user's browser to the authorization server to sign in
// and consent. The tokens are kept encrypted with the session key ring
// (sessions.key_file), refreshed before they expire and dropped when the
// upstream refuses them.
type UpstreamPerUser struct {
	// Registration: exactly one of ClientID (a client the authorization
	// server registered for the gateway, with ClientSecret or
	// ClientSecretFile for a confidential one), DynamicRegistration (RFC
	// 7591, where the server allows it) or ClientMetadataURL (the URL of a
	// client ID metadata document the gateway is known by; it is the
	// client_id).
	ClientID            string `yaml:"client_id"`
	ClientSecret        string `yaml:"client_secret"`
	ClientSecretFile    string `yaml:"client_secret_file"`
	DynamicRegistration bool   `yaml:"dynamic_registration"`
	ClientMetadataURL   string `yaml:"client_metadata_url"`
	// Issuer pins the authorization server (https, or http on a loopback
	// host); Discover takes it from the upstream's protected-resource
	// metadata (RFC 9728). Exactly one is set.
	Issuer   string `yaml:"issuer"`
	Discover bool   `yaml:"discover"`
	// Scopes asked for instead of those the upstream's challenge or
	// metadata names (empty: those). The RFC 8707 resource is the one the
	// upstream's protected-resource metadata publishes.
	Scopes []string `yaml:"scopes"`
	// AuthMethod is the token endpoint client authentication:
	// client_secret_basic, client_secret_post or none (a public client).
	// Empty: basic with a secret, none without.
	AuthMethod string `yaml:"auth_method"`
	// LinkLifetime is how long a start link (and the authorization it
	// begins) stays usable (default 10m).
	LinkLifetime Duration `yaml:"link_lifetime"`
	// MaxTokens bounds how many principals' tokens are kept for this
	// upstream (default 10000); past it a new user is refused, clearly.
	MaxTokens int `yaml:"max_tokens"`
	// Store is where the tokens are kept (default: Redis when
	// sessions.redis is set, else a file under the state directory).
	Store *PerUserStore `yaml:"store"`
	// AllowAddresses lists the loopback, private or link-local addresses
	// (CIDRs or single addresses) that URLs the upstream names — its
	// challenge's resource_metadata, a discovered authorization server and
	// its endpoints — may lead to; others are refused (the upstream's own
	// URL and a pinned issuer are always reachable).
	AllowAddresses []string `yaml:"allow_addresses"`
	// MaxLinksPerPrincipal bounds the authorization links one principal
	// may have started and not finished within link_lifetime (default 10).
	MaxLinksPerPrincipal int `yaml:"max_links_per_principal"`
}

// PerUserStore is where per-user tokens are kept: exactly one of File (a
// file, written atomically with mode 0600) and Redis (sessions.redis).
type PerUserStore struct {
	File  string `yaml:"file"`
	Redis bool   `yaml:"redis"`
}

// Defaults of upstreams.NAME.auth.per_user.
const (
	DefaultPerUserLinkLifetime = 10 * time.Minute
	DefaultPerUserMaxTokens    = 10000
	// DefaultPerUserMaxLinksPerPrincipal bounds one principal's started,
	// unfinished authorizations.
	DefaultPerUserMaxLinksPerPrincipal = 10
	// AuthMethodNone is a public client's token endpoint authentication.
	AuthMethodNone = "none"
)

// perUserDefaults fills in a per_user section's lifetime, bound and store.
func perUserDefaults(p string, c *Config, u *Upstream, d *strictyaml.Decoder) {
	if u.Auth == nil || u.Auth.PerUser == nil {
		return
	}
	pu := u.Auth.PerUser
	pp := strictyaml.JoinPath(strictyaml.JoinPath(p, "auth"), "per_user")
	if !d.Set(strictyaml.JoinPath(pp, "link_lifetime")) {
		pu.LinkLifetime = Duration(DefaultPerUserLinkLifetime)
	}
	if !d.Set(strictyaml.JoinPath(pp, "max_tokens")) {
		pu.MaxTokens = DefaultPerUserMaxTokens
	}
	if !d.Set(strictyaml.JoinPath(pp, "max_links_per_principal")) {
		pu.MaxLinksPerPrincipal = DefaultPerUserMaxLinksPerPrincipal
	}
	if pu.Store == nil {
		if c.Sessions != nil && c.Sessions.Redis != nil {
			pu.Store = &PerUserStore{Redis: true}
		} else {
			pu.Store = &PerUserStore{File: DefaultPerUserStoreFile(strings.TrimPrefix(p, "upstreams."), os.LookupEnv)}
		}
	}
}

// DefaultPerUserStoreFile is the default token file of upstream name:
// tokens-NAME.json in the state directory (StateDir).
func DefaultPerUserStoreFile(name string, getenv func(string) (string, bool)) string {
	return filepath.Join(StateDir(getenv), "tokens-"+name+".json")
}

// StateDir is the directory where the gateway keeps what must outlive a
// restart when the config names no file for it (per-user tokens, the
// session key ring): $STATE_DIRECTORY (set by systemd's StateDirectory=);
// else $XDG_STATE_HOME/mcpgw; else ~/.local/state/mcpgw; else
// ./mcpgw-state.
func StateDir(getenv func(string) (string, bool)) string {
	dir := "mcpgw-state"
	if d, ok := getenv("STATE_DIRECTORY"); ok && d != "" {
		dir, _, _ = strings.Cut(d, ":") // systemd may list several
	} else if d, ok := getenv("XDG_STATE_HOME"); ok && d != "" {
		dir = filepath.Join(d, "mcpgw")
	} else if h, ok := getenv("HOME"); ok && h != "" {
		dir = filepath.Join(h, ".local", "state", "mcpgw")
	}
	return dir
}

// RedirectPath is the path of upstream name's OAuth callback; the
// redirect URI is public_url (without its trailing /) + this path.
func RedirectPath(name string) string { return "/oauth/upstream/" + name + "/callback" }

// StartPath is the path of upstream name's start page.
func StartPath(name string) string { return "/oauth/upstream/" + name + "/start" }

// TokenPath is the path where a caller revokes their own token (DELETE).
func TokenPath(name string) string { return "/oauth/upstream/" + name + "/token" }

// upstreamPerUser validates upstreams.NAME.auth.per_user.
func (v *validator) upstreamPerUser(pp, name string, u *Upstream, hasCmd bool) {
	pu := u.Auth.PerUser
	c := v.cfg
	if hasCmd {
		v.add(pp, "per_user applies only to url upstreams (the gateway sends each caller's token on its HTTP requests); remove it, or use a url: upstream")
		return
	}
	if !c.Auth.Enabled() {
		v.add(pp, "needs downstream authentication: a token is kept for each authenticated caller, and without auth every caller would be the same anonymous one; configure auth.oidc, auth.issuers or auth.api_keys")
	}
	if c.PublicURL == "" {
		v.add(pp, fmt.Sprintf("needs public_url, the URL users' browsers reach the gateway at: the authorization server redirects them back to <public_url>%s; set public_url, e.g. https://mcp.example.com", RedirectPath(name)))
	} else if t, err := url.Parse(c.PublicURL); err == nil && t.Scheme == "http" && !IsLoopbackHost(t.Hostname()) {
		v.add(pp, fmt.Sprintf("public_url %q is plain http, so authorization codes and the sign-in cookie would cross the network in clear; use https (http is accepted only for a loopback host)", c.PublicURL))
	}
	// The key ring that seals the links and the stored tokens is
	// sessions.key_file or, without it, the gateway's own ring in the
	// state directory beside the token file, which outlives a restart
	// too; a Redis store is shared by replicas, and sessions.redis
	// already requires key_file.
	// Registration: exactly one way.
	switch countSet(pu.ClientID != "", pu.DynamicRegistration, pu.ClientMetadataURL != "") {
	case 0:
		v.add(pp, "says nothing of how the gateway is registered with the authorization server; set client_id (with client_secret_file for a confidential client), dynamic_registration: true (RFC 7591), or client_metadata_url (a client ID metadata document)")
	case 1:
	default:
		v.add(pp, "sets more than one of client_id, dynamic_registration and client_metadata_url, three ways to register the gateway; keep one")
	}
	if pu.ClientID != "" && strings.TrimSpace(pu.ClientID) != pu.ClientID {
		v.add(strictyaml.JoinPath(pp, "client_id"), fmt.Sprintf("%q has leading or trailing white space; remove it", pu.ClientID))
	}
	v.clientSecret(pp, pu.ClientSecret, pu.ClientSecretFile, false, "")
	secret := pu.ClientSecret != "" || pu.ClientSecretFile != ""
	if secret && pu.ClientID == "" {
		v.add(pp, "a client secret is set without client_id; a secret belongs to a pre-registered client: add client_id, or remove the secret")
	}
	if pu.ClientMetadataURL != "" {
		t, err := url.Parse(pu.ClientMetadataURL)
		if err != nil || t.Scheme != "https" || t.Host == "" || t.Path == "" || t.Path == "/" || t.Fragment != "" || t.User != nil {
			v.add(strictyaml.JoinPath(pp, "client_metadata_url"), fmt.Sprintf("%q is not a client ID metadata document URL (https, with a path, no fragment or user:password@); write e.g. https://mcp.example.com/oauth/client.json", pu.ClientMetadataURL))
		}
	}
	switch countSet(pu.Issuer != "", pu.Discover) {
	case 0:
		v.add(pp, "says nothing of which authorization server to use; set issuer (pinned, e.g. https://github.com/login/oauth) or discover: true (the one the upstream's protected-resource metadata names)")
	case 2:
		v.add(pp, "both issuer and discover are set; keep issuer (pinned) or discover, not both")
	}
	if pu.Issuer != "" {
		v.issuerURL(strictyaml.JoinPath(pp, "issuer"), pu.Issuer)
	}
	if pu.Discover && secret {
		v.add(strictyaml.JoinPath(pp, "discover"), "with a client secret the authorization server must be pinned: discover would send the secret to whichever server the upstream names; set issuer instead")
	}
	v.scopes(strictyaml.JoinPath(pp, "scopes"), pu.Scopes)
	switch pu.AuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
		if pu.AuthMethod != "" && !secret {
			v.add(strictyaml.JoinPath(pp, "auth_method"), fmt.Sprintf("%s needs a client secret; set client_secret_file, or use auth_method: none (a public client)", pu.AuthMethod))
		}
	case AuthMethodNone:
		if secret {
			v.add(strictyaml.JoinPath(pp, "auth_method"), "none means a public client, yet a client secret is set; remove the secret, or use client_secret_basic or client_secret_post")
		}
	default:
		v.add(strictyaml.JoinPath(pp, "auth_method"), fmt.Sprintf("%q is not a client authentication method; use %s, %s or %s, or remove it", pu.AuthMethod, AuthMethodBasic, AuthMethodPost, AuthMethodNone))
	}
	if pu.LinkLifetime < Duration(time.Minute) || pu.LinkLifetime > Duration(time.Hour) {
		v.add(strictyaml.JoinPath(pp, "link_lifetime"), fmt.Sprintf("%s is not a link lifetime: a user needs at least 1m to sign in, and a link that lives past 1h is one more to leak; set e.g. 10m, or remove it for the default", pu.LinkLifetime.D()))
	}
	if pu.MaxTokens < 1 {
		v.add(strictyaml.JoinPath(pp, "max_tokens"), fmt.Sprintf("must be at least 1; remove it for the default (%d) or set e.g. 50000", DefaultPerUserMaxTokens))
	}
	if pu.MaxLinksPerPrincipal < 1 || pu.MaxLinksPerPrincipal > 1000 {
		v.add(strictyaml.JoinPath(pp, "max_links_per_principal"), fmt.Sprintf("%d is not a bound on one user's unfinished authorizations; set 1 to 1000, or remove it for the default (%d)", pu.MaxLinksPerPrincipal, DefaultPerUserMaxLinksPerPrincipal))
	}
	v.allowAddresses(strictyaml.JoinPath(pp, "allow_addresses"), pu.AllowAddresses)
	if s := pu.Store; s != nil {
		sp := strictyaml.JoinPath(pp, "store")
		switch countSet(s.File != "", s.Redis) {
		case 0:
			v.add(sp, "says nowhere where the tokens are kept; set file: /var/lib/mcpgw/tokens.json or redis: true, or remove store: for the default")
		case 2:
			v.add(sp, "both file and redis are set; keep one")
		}
		if s.Redis && (c.Sessions == nil || c.Sessions.Redis == nil) {
			v.add(strictyaml.JoinPath(sp, "redis"), "needs sessions.redis, the Redis it keeps the tokens in; configure it, or use file:")
		}
	}
}
