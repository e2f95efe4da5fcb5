package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
)

// provider is the company's OpenID provider, for which the gateway is a
// confidential client. Its metadata is discovered on first use (OpenID
// discovery, else RFC 8414) and kept; a failure is retried at most every
// retryAfter.
type provider struct {
	cfg    *config.LoginProvider
	secret string
	client *http.Client // no redirects (internal/outbound)
	now    func() time.Time

	mu      sync.Mutex
	meta    *providerMeta
	lastTry time.Time
	lastErr error
}

type providerMeta struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	UserinfoEndpoint      string   `json:"userinfo_endpoint"`
	JWKSURI               string   `json:"jwks_uri"`
	AuthMethods           []string `json:"token_endpoint_auth_methods_supported"`
	IDTokenAlgs           []string `json:"id_token_signing_alg_values_supported"`

	verifier *oidc.IDTokenVerifier
}

const (
	providerTimeout = 10 * time.Second
	retryAfter      = 5 * time.Second
	maxProviderDoc  = 1 << 20
)

func (p *provider) metadata(ctx context.Context) (*providerMeta, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta != nil {
		return p.meta, nil
	}
	if p.lastErr != nil && p.now().Sub(p.lastTry) < retryAfter {
		return nil, p.lastErr
	}
	p.lastTry = p.now()
	m, err := p.discover(ctx)
	if err != nil {
		p.lastErr = fmt.Errorf("the sign-in provider %s cannot be discovered: %w", p.cfg.Issuer, err)
		return nil, p.lastErr
	}
	ks := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), p.client), m.JWKSURI)
	// The provider's own algorithms (Keycloak or Okta may sign with
	// ES256; go-oidc alone expects RS256), among the asymmetric ones only:
	// never none or an HMAC keyed by the client secret.
	var algs []string
	for _, a := range m.IDTokenAlgs {
		if slices.Contains(config.DefaultAlgorithms, a) {
			algs = append(algs, a)
		}
	}
	if len(algs) == 0 {
		algs = config.DefaultAlgorithms // the document is silent: whatever the keys are
	}
	m.verifier = oidc.NewVerifier(m.Issuer, ks, &oidc.Config{ClientID: p.cfg.ClientID, Now: p.now, SupportedSigningAlgs: algs})
	p.meta, p.lastErr = m, nil
	return m, nil
}

// discover reads the provider's metadata: OpenID discovery first (every
// provider named in docs/login.md serves it), then RFC 8414.
func (p *provider) discover(ctx context.Context) (*providerMeta, error) {
	iss := p.cfg.Issuer
	u, err := url.Parse(iss)
	if err != nil {
		return nil, err
	}
	candidates := []string{strings.TrimSuffix(iss, "/") + "/.well-known/openid-configuration"}
	candidates = append(candidates, u.Scheme+"://"+u.Host+"/.well-known/oauth-authorization-server"+strings.TrimSuffix(u.Path, "/"))
	var errs []error
	for _, at := range candidates {
		m, err := p.fetchMeta(ctx, at)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m.Issuer != iss && strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(iss, "/") {
			return nil, fmt.Errorf("%s names the issuer %q, not %q; set login.provider.issuer to exactly what the provider says", at, m.Issuer, iss)
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" || m.JWKSURI == "" {
			return nil, fmt.Errorf("%s lacks authorization_endpoint, token_endpoint or jwks_uri", at)
		}
		return m, nil
	}
	return nil, errors.Join(errs...)
}

func (p *provider) fetchMeta(ctx context.Context, at string) (*providerMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", at, resp.Status)
	}
	var m providerMeta
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProviderDoc)).Decode(&m); err != nil {
		return nil, fmt.Errorf("GET %s: %w", at, err)
	}
	return &m, nil
}

// oauth2Config is the gateway's registration at the provider.
func (p *provider) oauth2Config(m *providerMeta, redirect string, scopes []string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader // client_secret_basic: the default of RFC 8414
	if len(m.AuthMethods) > 0 && !slices.Contains(m.AuthMethods, "client_secret_basic") && slices.Contains(m.AuthMethods, "client_secret_post") {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     p.cfg.ClientID,
		ClientSecret: p.secret,
		RedirectURL:  redirect,
		Scopes:       scopes,
		Endpoint:     oauth2.Endpoint{AuthURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint, AuthStyle: style},
	}
}

// identity is what the gateway keeps of a sign-in: the ID token's (and
// userinfo's) claims, never the provider's tokens.
func (p *provider) identity(ctx context.Context, m *providerMeta, tok *oauth2.Token, nonce string) (*User, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the provider returned no ID token; add openid to login.provider.scopes")
	}
	idt, err := m.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the provider's ID token does not verify: %w", err)
	}
	if idt.Nonce != nonce {
		return nil, errors.New("the provider's ID token carries another nonce")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, err
	}
	if claimAt(claims, p.cfg.GroupsClaim) == nil && m.UserinfoEndpoint != "" {
		// Some providers (Okta's org server, Keycloak without the mapper
		// on the ID token) put groups in userinfo only.
		if info := p.userinfo(ctx, m, tok, idt.Subject); info != nil {
			for k, v := range info {
				if _, ok := claims[k]; !ok {
					claims[k] = v
				}
			}
		}
	}
	u := &User{Subject: idt.Subject, Issuer: idt.Issuer}
	u.Name, _ = claims["name"].(string)
	u.Email, _ = claims["email"].(string)
	// Entra ID names the account in preferred_username (often without an
	// email, and with an opaque pairwise sub): the consent page shows it.
	// It is not an email address the provider vouches for, so it is kept
	// apart from Email.
	u.Username, _ = claims["preferred_username"].(string)
	u.Groups = stringList(claimAt(claims, p.cfg.GroupsClaim))
	return u, nil
}

// userinfo asks the provider's userinfo endpoint; nil on any failure (it
// only adds claims) or when it names another subject.
func (p *provider) userinfo(ctx context.Context, m *providerMeta, tok *oauth2.Token, sub string) map[string]any {
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.UserinfoEndpoint, nil)
	if err != nil {
		return nil
	}
	tok.SetAuthHeader(req)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var info map[string]any
	if json.NewDecoder(io.LimitReader(resp.Body, maxProviderDoc)).Decode(&info) != nil || info["sub"] != sub {
		return nil
	}
	return info
}

// claimAt reads a claim by its full name, else by a dotted path.
func claimAt(claims map[string]any, path string) any {
	if v, ok := claims[path]; ok {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

// stringList reads a string or a list of strings.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
