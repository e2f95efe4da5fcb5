package peruser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

// Client is the OAuth 2.1 authorization-code client the source drives;
// OAuthClient implements it with internal/credentials/oauthclient. What a
// flow and a grant carry is opaque here: the source only seals it (the
// flow in the user's browser cookie, the grant with the tokens).
type Client interface {
	// Begin starts an authorization whose state parameter is state and
	// whose redirect URI is redirectURI; step, when not nil, makes it a
	// step-up (a new authorization for the scopes an upstream's 403
	// insufficient_scope named).
	Begin(ctx context.Context, state, redirectURI string, step *StepUp) (*Flow, error)
	// Complete checks the callback's query (state, iss, code or error)
	// against f and redeems the code.
	Complete(ctx context.Context, f *Flow, query url.Values) (*Token, error)
	// Refresh uses a refresh token under grant (Token.Grant of the token
	// it came with). An error wrapping ErrInvalidGrant means the grant is
	// gone: the user must authorize again.
	Refresh(ctx context.Context, grant json.RawMessage, refreshToken string) (*Token, error)
}

// StepUp is what a re-authorization for more scopes starts from.
type StepUp struct {
	// Challenge is the WWW-Authenticate values of the upstream's 403.
	Challenge []string
	// Previous are the scopes the subject's current authorization asked
	// for or was granted; the new one asks for their union with the
	// challenged ones (SEP-2350).
	Previous []string
}

// Flow is one authorization in progress.
type Flow struct {
	// AuthURL is where the user's browser goes (the authorization
	// server's endpoint, with the request).
	AuthURL string
	// Data is what Complete needs (PKCE verifier, grant), no secret.
	Data json.RawMessage
}

// Token is what a token endpoint answered.
type Token struct {
	AccessToken  string
	RefreshToken string
	// Expiry of the access token (zero: the server did not say).
	Expiry time.Time
	// Grant is where and as whom to refresh it.
	Grant json.RawMessage
	// Scopes are those asked for and those granted (a step-up asks for
	// them again, with the new ones).
	Scopes []string
}

// ErrInvalidGrant is the token endpoint's invalid_grant: the code or
// refresh token is not (or no longer) valid.
var ErrInvalidGrant = errors.New("invalid_grant")

// OAuthClient is Client over oauthclient for one upstream.
type OAuthClient struct {
	c           *oauthclient.Client
	upstreamURL string
	issuer      string // pinned; "" when discovered
	name        string
	scopes      []string // asked for instead of what the upstream's challenge or metadata says
	dpop        *oauthclient.DPoPKey
}

// NewOAuthClient returns the client of upstream name (at upstreamURL)
// configured by cfg; regs keeps its dynamic registrations (nil: in
// memory, lost at a restart). The client secret file is read now: a
// rotated secret needs a restart.
func NewOAuthClient(name, upstreamURL string, cfg *config.UpstreamPerUser, regs oauthclient.RegistrationStore, hc *http.Client, log *zap.Logger, now func() time.Time) (*OAuthClient, error) {
	oc := oauthclient.Config{Name: name, ClientName: "mcpgw", MetadataDocumentURL: cfg.ClientMetadataURL, Offline: true, NoDynamicRegistration: !cfg.DynamicRegistration, Now: now, Registrations: regs}
	if cfg.ClientID != "" {
		secret := cfg.ClientSecret
		if cfg.ClientSecretFile != "" {
			b, err := os.ReadFile(cfg.ClientSecretFile)
			if err != nil {
				return nil, fmt.Errorf("upstreams.%s.auth.per_user.client_secret_file: %w", name, err)
			}
			secret = strings.TrimSpace(string(b))
		}
		// Keyed by the pinned issuer: the secret goes to no other server.
		oc.Preregistered = map[string]oauthclient.Credentials{cfg.Issuer: {ClientID: cfg.ClientID, ClientSecret: secret, AuthMethod: cfg.AuthMethod}}
	}
	if hc == nil {
		// No redirects; and what the upstream names (its resource_metadata,
		// a discovered authorization server and its endpoints) reaches no
		// internal address unless allowed. The upstream and the pinned
		// issuer are the operator's, so trusted.
		g, err := outbound.NewGuard(cfg.AllowAddresses, "upstreams."+name+".auth.per_user.allow_addresses")
		if err != nil {
			return nil, err
		}
		hc = outbound.Client(g.Trust(upstreamURL, cfg.Issuer), oauthclient.DefaultTimeout)
	}
	if cfg.DPoP {
		k, err := oauthclient.NewDPoPKey(now)
		if err != nil {
			return nil, fmt.Errorf("upstreams.%s.auth.per_user.dpop: generating the key: %w", name, err)
		}
		oc.DPoP = k
	}
	return &OAuthClient{c: oauthclient.New(oc, hc, log), upstreamURL: upstreamURL, issuer: cfg.Issuer, name: name, scopes: cfg.Scopes, dpop: oc.DPoP}, nil
}

// DPoPKey is the key the client's tokens are bound to (nil: they are
// bearer tokens).
func (o *OAuthClient) DPoPKey() *oauthclient.DPoPKey { return o.dpop }

// ForgetDiscoveries makes the next Begin discover the upstream's
// authorization server anew (Source.Refused calls it).
func (o *OAuthClient) ForgetDiscoveries() { o.c.ForgetDiscoveries() }

// Begin implements Client.
func (o *OAuthClient) Begin(ctx context.Context, state, redirectURI string, step *StepUp) (*Flow, error) {
	// Configured scopes replace those the challenge or metadata name; a
	// step-up asks for the challenged ones with the previous (which
	// include the configured ones).
	req := oauthclient.Request{UpstreamURL: o.upstreamURL, RedirectURI: redirectURI, State: state, Scopes: o.scopes, Issuer: o.issuer}
	if step != nil {
		req.Challenge, req.Previous, req.Scopes = step.Challenge, step.Previous, nil
	}
	f, err := o.c.Begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if o.issuer != "" && f.Grant.Issuer != o.issuer {
		return nil, fmt.Errorf("upstream %q: its protected-resource metadata names authorization server %q, not the pinned auth.per_user.issuer %q; not authorizing there", o.name, f.Grant.Issuer, o.issuer)
	}
	auth := f.AuthURL
	f.AuthURL = "" // not needed again: kept out of the cookie
	data, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return &Flow{AuthURL: auth, Data: data}, nil
}

// Complete implements Client.
func (o *OAuthClient) Complete(ctx context.Context, f *Flow, query url.Values) (*Token, error) {
	var flow oauthclient.Flow
	if err := json.Unmarshal(f.Data, &flow); err != nil {
		return nil, fmt.Errorf("upstream %q: the flow kept for this authorization is unreadable", o.name)
	}
	t, err := o.c.Complete(ctx, &flow, query)
	return o.token(t, err)
}

// Refresh implements Client.
func (o *OAuthClient) Refresh(ctx context.Context, grant json.RawMessage, refreshToken string) (*Token, error) {
	var g oauthclient.Grant
	if err := json.Unmarshal(grant, &g); err != nil {
		return nil, fmt.Errorf("%w: upstream %q: the stored grant is unreadable", ErrInvalidGrant, o.name)
	}
	t, err := o.c.Refresh(ctx, g, refreshToken)
	return o.token(t, err)
}

func (o *OAuthClient) token(t *oauthclient.Token, err error) (*Token, error) {
	if oauthclient.IsInvalidGrant(err) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	if err != nil {
		return nil, err
	}
	g, err := json.Marshal(t.Grant)
	if err != nil {
		return nil, err
	}
	return &Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Expiry: t.Expiry, Grant: g, Scopes: union(t.Grant.Scopes, t.Scopes)}, nil
}

// union is a's scopes then b's not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
