// Package oauthclient owns the gateway's OAuth 2.1 authorization-code client
// for an upstream MCP server's per-user authorization, written to the MCP
// authorization spec (2025-11-25, 2026-07-28): discovery of the protected
// resource (RFC 9728, from the 401's WWW-Authenticate or the well-known
// URLs) and of its authorization server (RFC 8414 / OpenID Connect, exact
// issuer comparison); client registration (pre-registered, a client ID
// metadata document, or RFC 7591 dynamic registration, remembered per
// authorization server and redone when the server changes); scope
// selection (challenge, else scopes_supported, else none; offline_access
// where offered; the union on step-up); PKCE S256; the RFC 8707 resource
// in the authorization and token requests; token endpoint authentication;
// the RFC 9207 iss check of the authorization response; refresh.
//
// It also owns what every upstream OAuth client shares — the challenge
// parser, the metadata discovery, the resource and endpoint checks — which
// the client-credentials and token-exchange sources of internal/credentials
// use too.
//
// A caller (the gateway's /oauth/upstream/<name>/start and callback pages)
// does:
//
//	flow, err := c.Begin(ctx, oauthclient.Request{UpstreamURL: u, Challenge: h.Values("WWW-Authenticate"), RedirectURI: cb})
//	// keep flow (bound to the user's state), send the user to flow.AuthURL
//	tok, err := c.Complete(ctx, flow, callbackQuery)
//	tok, err = c.Refresh(ctx, tok.Grant, tok.RefreshToken)
//
// A Flow carries no client secret: secrets stay in the Client's
// registrations.
package oauthclient

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Token endpoint authentication methods (RFC 7591 section 2, RFC 8414).
const (
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
	AuthMethodNone  = "none"
)

// ScopeOfflineAccess asks for a refresh token where the authorization
// server lists it (SEP-2207).
const ScopeOfflineAccess = "offline_access"

// Config is how the client presents itself to authorization servers.
type Config struct {
	// Name names what the client acts for in errors ("upstream \"gh\"").
	Name string
	// ClientName is the client_name of a dynamic registration.
	ClientName string
	// ApplicationType is the application_type of a dynamic registration:
	// "web" (the default: the gateway's redirect URI is a web page) or
	// "native".
	ApplicationType string
	// Preregistered are client credentials issued out of band, by
	// authorization server issuer (exactly as its metadata names it); the
	// key "" applies to any server.
	Preregistered map[string]Credentials
	// MetadataDocumentURL is the https URL of the client's ID metadata
	// document, used as the client_id with servers that say
	// client_id_metadata_document_supported.
	MetadataDocumentURL string
	// NoDynamicRegistration: never register dynamically (RFC 7591); a
	// server the pre-registered client or the metadata document does not
	// cover is refused.
	NoDynamicRegistration bool
	// Offline asks for refresh tokens: offline_access in the scope where
	// the server lists it, refresh_token among a registration's
	// grant_types.
	Offline bool
	// Registrations remembers dynamic registrations; nil keeps them in
	// memory (at most MaxRegistrations).
	Registrations RegistrationStore
	// MaxRegistrations bounds the in-memory registrations (default 256).
	MaxRegistrations int
	// MaxScopes bounds the scopes one authorization request asks for
	// (default 64), however many the challenges name.
	MaxScopes int
	// Timeout bounds each request to an authorization server (default
	// DefaultTimeout).
	Timeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// DPoP, when set, binds the tokens asked for to its key (RFC 9449):
	// token requests carry its proofs, and a token answer must be
	// token_type DPoP.
	DPoP *DPoPKey
}

// Credentials are a pre-registered client's.
type Credentials struct {
	ClientID     string
	ClientSecret string
	// AuthMethod is how to authenticate at the token endpoint; empty: the
	// server's choice among client_secret_basic and client_secret_post
	// (none without a secret).
	AuthMethod string
}

// Client runs authorization-code flows. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	disc *Discoverer
	log  *zap.Logger
	regs RegistrationStore
	// regMu serialises registering with one server, so concurrent flows
	// share one registration.
	regMu sync.Mutex

	discMu      sync.Mutex
	discoveries map[string]*discovered // recent discoveries, bounded
}

// New returns a client that uses hc (which must not follow redirects to
// unexpected places on its own; metadata and token requests do not
// redirect) and logs to log.
func New(cfg Config, hc *http.Client, log *zap.Logger) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.ApplicationType == "" {
		cfg.ApplicationType = "web"
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "mcpgw"
	}
	if cfg.MaxScopes <= 0 {
		cfg.MaxScopes = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	regs := cfg.Registrations
	if regs == nil {
		n := cfg.MaxRegistrations
		if n <= 0 {
			n = 256
		}
		regs = NewMemoryRegistrations(n)
	}
	return &Client{cfg: cfg, http: hc, disc: &Discoverer{HTTP: hc, Timeout: cfg.Timeout}, log: log, regs: regs, discoveries: map[string]*discovered{}}
}

// Request starts one authorization.
type Request struct {
	// UpstreamURL is the MCP server's URL (the protected resource).
	UpstreamURL string
	// Challenge is the WWW-Authenticate values of the upstream's 401 (or
	// 403 insufficient_scope). nil: Begin asks the upstream for one (an
	// unauthenticated ping, as an MCP client's first request would get
	// it), unless NoProbe.
	Challenge []string
	// NoProbe: with no Challenge, discover from the well-known URLs alone.
	NoProbe bool
	// RedirectURI is where the authorization server sends the user back
	// (the gateway's callback page), registered exactly.
	RedirectURI string
	// State is the state parameter to send (the caller's own signed,
	// expiring state); empty: a random one.
	State string
	// Previous are the scopes the subject's last authorization for this
	// upstream asked for: a re-authorization asks for their union with
	// the new ones (SEP-2350).
	Previous []string
	// Issuer pins the authorization server (exactly as its metadata names
	// it): the resource must name it, and a challenge's resource_metadata
	// on another origin than the upstream is not fetched. Empty: the
	// first server the resource names.
	Issuer string
	// Scopes, when set, are asked for instead of the challenge's or the
	// resource's scopes_supported (an operator's choice); offline_access
	// and the union with Previous still apply.
	Scopes []string
}

// Flow is one authorization in progress: what the callback needs, to be
// kept bound to the user's state. It holds no client secret.
type Flow struct {
	AuthURL     string `json:"auth_url"`     // where to send the user
	State       string `json:"state"`        // the state parameter sent
	Verifier    string `json:"verifier"`     // the PKCE code verifier
	RedirectURI string `json:"redirect_uri"` // the redirect URI sent
	// IssRequired: the server advertised RFC 9207 iss support, so the
	// authorization response must carry iss.
	IssRequired bool  `json:"iss_required,omitempty"`
	Grant       Grant `json:"grant"`
}

// Grant is where and as whom tokens are requested (and refreshed) for one
// authorization: the server, the client, the resource, the scopes.
type Grant struct {
	Issuer        string   `json:"issuer"`
	TokenEndpoint string   `json:"token_endpoint"`
	ClientID      string   `json:"client_id"`
	AuthMethod    string   `json:"auth_method"`
	Resource      string   `json:"resource"`
	Scopes        []string `json:"scopes,omitempty"` // asked for
	RedirectURI   string   `json:"redirect_uri"`
}

// Token is what the token endpoint issued.
type Token struct {
	AccessToken  string
	RefreshToken string
	Expiry       time.Time // zero: the server said nothing
	// Scopes are the granted scopes: the response's scope, else the ones
	// asked for.
	Scopes []string
	Grant  Grant
}

// Error is a flow that could not be started or completed: it names the
// upstream, the step, and the authorization server's error and
// description when it answered one — never a token or secret.
type Error struct {
	Name        string // Config.Name
	Step        string // discovery, registration, authorization, token, refresh
	Cause       string
	Code        string // the OAuth error code, when the server answered one
	Description string // its error_description
	// Reauthorize: the grant cannot be used any more (the server's
	// invalid_grant, or a client the gateway no longer knows): the subject
	// must authorize again.
	Reauthorize bool
}

func (e *Error) Error() string {
	s := fmt.Sprintf("upstream %q: OAuth %s failed: %s", e.Name, e.Step, e.Cause)
	if e.Code != "" {
		s += fmt.Sprintf(" (the authorization server answered %q", e.Code)
		if e.Description != "" {
			s += fmt.Sprintf(": %q", e.Description)
		}
		s += ")"
	}
	return s
}

// IsInvalidGrant reports whether err means the grant is gone: the
// server's invalid_grant (the code or refresh token is no longer good), or
// a grant whose client the gateway no longer knows (a dynamic registration
// not kept across a restart). Drop the tokens and authorize again.
func IsInvalidGrant(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == "invalid_grant" || e.Reauthorize)
}

func (c *Client) fail(step, format string, args ...any) *Error {
	return &Error{Name: c.cfg.Name, Step: step, Cause: fmt.Sprintf(format, args...)}
}

// randomString is n random bytes, base64url without padding.
func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("oauthclient: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
