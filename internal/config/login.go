package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Login makes mcpgw the OAuth authorization server its clients see
// (internal/login, docs/login.md): clients register with it and sign in
// through it; it delegates the sign-in to Provider, where it is one
// confidential client, and issues tokens of its own.
type Login struct {
	// Provider is the company's OpenID provider users sign in at.
	Provider *LoginProvider `yaml:"provider"`
	// AccessTokenTTL is the life of the gateway's access tokens (default
	// 5m); RefreshTokenTTL that of a refresh token family (default 720h);
	// SessionTTL that of the browser session cookie (default 12h).
	AccessTokenTTL  Duration `yaml:"access_token_ttl"`
	RefreshTokenTTL Duration `yaml:"refresh_token_ttl"`
	SessionTTL      Duration `yaml:"session_ttl"`
	// DynamicRegistration serves RFC 7591 registration (default true);
	// ClientMetadataDocuments accepts an https URL as client_id (a Client
	// ID Metadata Document, default true).
	DynamicRegistration     *bool `yaml:"dynamic_registration"`
	ClientMetadataDocuments *bool `yaml:"client_metadata_documents"`
	// Clients are pre-registered public clients.
	Clients []*LoginClient `yaml:"clients"`
	// Bounds: registered clients kept (MaxClients), how long an unused
	// dynamically registered client is kept (ClientIdleExpiry), how many
	// registrations one source address may make a minute
	// (RegistrationsPerMinute), the grants kept — consents and refresh
	// token families — (MaxGrants), one user's refresh token families
	// (MaxGrantsPerUser: past it their oldest ends), and the sign-ins
	// under way (MaxPending).
	MaxClients             int      `yaml:"max_clients"`
	ClientIdleExpiry       Duration `yaml:"client_idle_expiry"`
	RegistrationsPerMinute int      `yaml:"registrations_per_minute"`
	MaxGrants              int      `yaml:"max_grants"`
	MaxGrantsPerUser       int      `yaml:"max_grants_per_user"`
	MaxPending             int      `yaml:"max_pending"`
	// MaxPendingPerSource bounds the sign-ins one source address has
	// under way (they are begun without a credential).
	MaxPendingPerSource int `yaml:"max_pending_per_source"`
	// StateFile keeps clients, consents and refresh tokens (default
	// login-state.json in the state directory); KeyFile the signing and
	// cookie keys (default login-keys.json there).
	StateFile string `yaml:"state_file"`
	KeyFile   string `yaml:"key_file"`
	// InsecureClientMetadataLoopback lets a Client ID Metadata Document
	// be fetched over http from 127.0.0.1 (tests only).
	InsecureClientMetadataLoopback bool `yaml:"insecure_client_metadata_loopback"`
}

// LoginProvider is the OpenID provider the gateway delegates sign-in to.
type LoginProvider struct {
	// Issuer is the provider's issuer URL (OpenID discovery, or RFC 8414).
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecretFile (or ClientSecret: ${ENV}) are the
	// gateway's registration there; its redirect URI is
	// <public_url>/oauth/callback.
	ClientID         string `yaml:"client_id"`
	ClientSecret     string `yaml:"client_secret"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// Scopes asked of the provider (default openid profile email).
	Scopes []string `yaml:"scopes"`
	// ScopeMap adds provider scopes for a scope a client asks of the
	// gateway.
	ScopeMap map[string][]string `yaml:"scope_map"`
	// SendResource passes the client's RFC 8707 resource on to the
	// provider (default false: Entra ID rejects it, and the gateway's own
	// token is what carries the audience).
	SendResource bool `yaml:"send_resource"`
	// GroupsClaim is the ID token (or userinfo) claim holding the user's
	// groups (default groups).
	GroupsClaim string `yaml:"groups_claim"`
	// Prompt is sent as prompt= to the provider (e.g. select_account).
	Prompt string `yaml:"prompt"`
}

// LoginClient is a pre-registered public client of the gateway.
type LoginClient struct {
	ClientID     string   `yaml:"client_id"`
	Name         string   `yaml:"name"`
	RedirectURIs []string `yaml:"redirect_uris"`
}

// Defaults of login:.
const (
	DefaultLoginAccessTokenTTL         = 5 * time.Minute
	DefaultLoginRefreshTokenTTL        = 720 * time.Hour
	DefaultLoginSessionTTL             = 12 * time.Hour
	DefaultLoginMaxClients             = 10000
	DefaultLoginClientIdleExpiry       = 720 * time.Hour
	DefaultLoginRegistrationsPerMinute = 10
	DefaultLoginMaxGrants              = 100000
	DefaultLoginMaxGrantsPerUser       = 100
	DefaultLoginMaxPending             = 1000
	DefaultLoginMaxPendingPerSource    = 100
	DefaultLoginGroupsClaim            = "groups"
)

// DefaultLoginScopes are asked of the provider unless login.provider.scopes.
var DefaultLoginScopes = []string{"openid", "profile", "email"}

// LoginCallbackPath is the provider's redirect URI under public_url.
const LoginCallbackPath = "/oauth/callback"

// DynamicRegistrationOn reports login.dynamic_registration (default on).
func (l *Login) DynamicRegistrationOn() bool {
	return l.DynamicRegistration == nil || *l.DynamicRegistration
}

// ClientMetadataDocumentsOn reports login.client_metadata_documents
// (default on).
func (l *Login) ClientMetadataDocumentsOn() bool {
	return l.ClientMetadataDocuments == nil || *l.ClientMetadataDocuments
}

func loginDefaults(c *Config, d *strictyaml.Decoder) {
	l := c.Login
	if l == nil {
		return
	}
	// Signing in through the gateway is a way to authenticate: the routes
	// require credentials even when auth: names no other.
	if c.Auth == nil {
		c.Auth = &Auth{}
	}
	c.Auth.login = true
	set := func(k string) bool { return d.Set("login." + k) }
	if !set("access_token_ttl") {
		l.AccessTokenTTL = Duration(DefaultLoginAccessTokenTTL)
	}
	if !set("refresh_token_ttl") {
		l.RefreshTokenTTL = Duration(DefaultLoginRefreshTokenTTL)
	}
	if !set("session_ttl") {
		l.SessionTTL = Duration(DefaultLoginSessionTTL)
	}
	if !set("max_clients") {
		l.MaxClients = DefaultLoginMaxClients
	}
	if !set("client_idle_expiry") {
		l.ClientIdleExpiry = Duration(DefaultLoginClientIdleExpiry)
	}
	if !set("registrations_per_minute") {
		l.RegistrationsPerMinute = DefaultLoginRegistrationsPerMinute
	}
	if !set("max_grants") {
		l.MaxGrants = DefaultLoginMaxGrants
	}
	if !set("max_grants_per_user") {
		l.MaxGrantsPerUser = DefaultLoginMaxGrantsPerUser
	}
	if !set("max_pending") {
		l.MaxPending = DefaultLoginMaxPending
	}
	if !set("max_pending_per_source") {
		l.MaxPendingPerSource = DefaultLoginMaxPendingPerSource
	}
	if p := l.Provider; p != nil {
		if !set("provider.scopes") {
			p.Scopes = append([]string(nil), DefaultLoginScopes...)
		}
		if !set("provider.groups_claim") {
			p.GroupsClaim = DefaultLoginGroupsClaim
		}
	}
}

// login validates login:.
func (v *validator) login() {
	l := v.cfg.Login
	if l == nil {
		return
	}
	if v.cfg.PublicURL == "" {
		v.add("login", "needs public_url: it is the issuer clients see and where the provider sends users back (<public_url>"+LoginCallbackPath+"); set public_url, e.g. https://mcp.example.com")
	} else if t, err := url.Parse(v.cfg.PublicURL); err == nil && t.Scheme == "http" && !IsLoopbackHost(t.Hostname()) {
		v.add("login", fmt.Sprintf("public_url %q is plain http, so codes, tokens and the sign-in cookie would cross the network in clear; use https (http is accepted only for a loopback host)", v.cfg.PublicURL))
	}
	p := l.Provider
	if p == nil {
		v.add("login", "provider is not set; name the OpenID provider users sign in at: provider: {issuer: https://login.example.com, client_id: mcpgw, client_secret_file: /run/secrets/mcpgw-client}")
	} else {
		pp := "login.provider"
		if p.Issuer == "" {
			v.add(pp, "issuer is not set; give the provider's issuer URL, e.g. https://login.microsoftonline.com/TENANT/v2.0")
		} else {
			v.issuerURL(pp+".issuer", p.Issuer)
		}
		if strings.TrimSpace(p.ClientID) == "" || strings.TrimSpace(p.ClientID) != p.ClientID {
			v.add(pp+".client_id", "is not set (or has surrounding whitespace); give the client id the provider issued for the gateway")
		}
		v.clientSecret(pp, p.ClientSecret, p.ClientSecretFile, true, "the gateway is a confidential client of the provider")
		v.scopes(pp+".scopes", p.Scopes)
		for k, list := range p.ScopeMap {
			v.scopes(pp+".scope_map."+k, append([]string{k}, list...))
		}
		if g := p.GroupsClaim; strings.TrimSpace(g) == "" || strings.HasPrefix(g, ".") || strings.HasSuffix(g, ".") || strings.Contains(g, "..") {
			v.add(pp+".groups_claim", fmt.Sprintf("%q is not a claim name or dotted path; write e.g. groups or realm_access.roles", g))
		}
	}
	between := func(k string, d Duration, lo, hi time.Duration, def time.Duration) {
		if d.D() < lo || d.D() > hi {
			v.add("login."+k, fmt.Sprintf("%s is out of range; give %s to %s, or remove it for the default (%s)", d.D(), lo, hi, def))
		}
	}
	between("access_token_ttl", l.AccessTokenTTL, 30*time.Second, time.Hour, DefaultLoginAccessTokenTTL)
	between("refresh_token_ttl", l.RefreshTokenTTL, time.Minute, 90*24*time.Hour, DefaultLoginRefreshTokenTTL)
	between("session_ttl", l.SessionTTL, time.Minute, 7*24*time.Hour, DefaultLoginSessionTTL)
	between("client_idle_expiry", l.ClientIdleExpiry, time.Hour, 365*24*time.Hour, DefaultLoginClientIdleExpiry)
	atLeastOne := func(k string, n, def int) {
		if n < 1 {
			v.add("login."+k, fmt.Sprintf("must be at least 1; remove it for the default (%d)", def))
		}
	}
	atLeastOne("max_clients", l.MaxClients, DefaultLoginMaxClients)
	atLeastOne("registrations_per_minute", l.RegistrationsPerMinute, DefaultLoginRegistrationsPerMinute)
	atLeastOne("max_grants", l.MaxGrants, DefaultLoginMaxGrants)
	atLeastOne("max_pending", l.MaxPending, DefaultLoginMaxPending)
	atLeastOne("max_grants_per_user", l.MaxGrantsPerUser, DefaultLoginMaxGrantsPerUser)
	atLeastOne("max_pending_per_source", l.MaxPendingPerSource, DefaultLoginMaxPendingPerSource)
	seen := map[string]bool{}
	for i, c := range l.Clients {
		cp := fmt.Sprintf("login.clients[%d]", i)
		if c == nil || strings.TrimSpace(c.ClientID) == "" {
			v.add(cp, "client_id is not set; give the id the client will send")
			continue
		}
		if seen[c.ClientID] {
			v.add(cp+".client_id", fmt.Sprintf("%q is listed twice; keep one", c.ClientID))
		}
		seen[c.ClientID] = true
		if len(c.RedirectURIs) == 0 {
			v.add(cp, "redirect_uris is empty; list where the client receives codes, e.g. http://127.0.0.1/callback")
		}
		for j, r := range c.RedirectURIs {
			if msg := RedirectURIProblem(r); msg != "" {
				v.add(fmt.Sprintf("%s.redirect_uris[%d]", cp, j), msg)
			}
		}
	}
}

// RedirectURIProblem says what is wrong with a client's redirect URI, ""
// when nothing: https, or http on a loopback address (RFC 8252 section
// 7.3), or a private-use scheme with a dot (RFC 8252 section 7.1); never a
// fragment.
func RedirectURIProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return fmt.Sprintf("%q is not an absolute URI; write e.g. http://127.0.0.1/callback or https://app.example.com/callback", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Sprintf("%q has a #fragment, which a redirect URI must not (RFC 6749 section 3.1.2)", raw)
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Sprintf("%q has no host", raw)
		}
	case "http":
		if h := u.Hostname(); h != "127.0.0.1" && h != "::1" && h != "localhost" {
			return fmt.Sprintf("%q is plain http on a non-loopback host, where a code could be read in transit; use https, or http://127.0.0.1:PORT/ for a native app", raw)
		}
	default:
		if !strings.Contains(u.Scheme, ".") {
			return fmt.Sprintf("%q uses the scheme %q; a native app's private-use scheme must be a reversed domain name (e.g. com.example.app:/callback, RFC 8252 section 7.1)", raw, u.Scheme)
		}
	}
	return ""
}
