package peruser

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
)

// Client is the OAuth 2.1 authorization-code client the source drives.
// The library internal/credentials/oauthclient implements it in full
// (registration, discovery, token endpoint authentication); BasicClient
// is the small one this package carries until then.
type Client interface {
	// AuthCodeURL is the authorization request to send the browser to:
	// response_type=code, client_id, redirect_uri, state, scope, resource
	// and the PKCE S256 challenge of verifier.
	AuthCodeURL(ctx context.Context, state, verifier, redirectURI string) (string, error)
	// Exchange redeems code at the token endpoint. iss is the callback's
	// iss parameter (RFC 9207; empty when absent), which the client checks
	// against its issuer where the server says it sends one.
	Exchange(ctx context.Context, code, verifier, redirectURI, iss string) (*Token, error)
	// Refresh uses a refresh token. An error wrapping ErrInvalidGrant
	// means the grant is gone (revoked, expired): the user must authorize
	// again.
	Refresh(ctx context.Context, refreshToken string) (*Token, error)
}

// Token is what a token endpoint answered.
type Token struct {
	AccessToken  string
	RefreshToken string
	// Expiry of the access token (zero: the server did not say).
	Expiry time.Time
	// RefreshExpiry of the refresh token, when the server says
	// (refresh_expires_in, a common extension; zero otherwise).
	RefreshExpiry time.Time
}

// ErrInvalidGrant is the token endpoint's invalid_grant: the code or
// refresh token is not (or no longer) valid.
var ErrInvalidGrant = errors.New("invalid_grant")

// maxOAuthBody bounds a metadata document or token response.
const maxOAuthBody = 64 << 10

// BasicClient is a confidential or public client with a pre-registered
// client_id (or a client ID metadata document URL as its client_id) of a
// pinned issuer, or of the one the upstream's RFC 9728 metadata names.
// Endpoints are discovered (RFC 8414, then OpenID Connect discovery) on
// first use and kept.
type BasicClient struct {
	cfg      *config.UpstreamPerUser
	upstream string // its url: where RFC 9728 discovery starts
	name     string
	hc       *http.Client
	clock    func() time.Time

	mu   sync.Mutex
	meta *serverMetadata
}

// serverMetadata is the part of RFC 8414 metadata the client reads.
type serverMetadata struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	AuthMethods           []string `json:"token_endpoint_auth_methods_supported"`
	ISSParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// NewBasicClient returns the client of upstream name (at upstreamURL)
// configured by cfg. hc nil: a client with a 10s timeout.
func NewBasicClient(name, upstreamURL string, cfg *config.UpstreamPerUser, hc *http.Client, clock func() time.Time) (*BasicClient, error) {
	if cfg.DynamicRegistration {
		return nil, fmt.Errorf("upstream %q: auth.per_user.dynamic_registration needs the oauthclient library, not yet in this build; register the gateway with the authorization server and set client_id", name)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if clock == nil {
		clock = time.Now
	}
	return &BasicClient{cfg: cfg, upstream: upstreamURL, name: name, hc: hc, clock: clock}, nil
}

func (c *BasicClient) clientID() string {
	if c.cfg.ClientMetadataURL != "" {
		return c.cfg.ClientMetadataURL
	}
	return c.cfg.ClientID
}

func (c *BasicClient) secret() (string, error) {
	if c.cfg.ClientSecretFile != "" {
		b, err := os.ReadFile(c.cfg.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("auth.per_user.client_secret_file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return c.cfg.ClientSecret, nil
}

func (c *BasicClient) fail(format string, args ...any) error {
	return fmt.Errorf("upstream %q: authorization server: %s", c.name, fmt.Sprintf(format, args...))
}

// metadata discovers the authorization server once.
func (c *BasicClient) metadata(ctx context.Context) (*serverMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	issuer := c.cfg.Issuer
	if issuer == "" {
		var err error
		if issuer, err = c.discoverIssuer(ctx); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, c.fail("issuer %q: %v", issuer, err)
	}
	path := strings.TrimSuffix(u.Path, "/")
	origin := u.Scheme + "://" + u.Host
	for _, at := range []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
	} {
		var m serverMetadata
		found, err := c.fetch(ctx, at, &m)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		switch {
		case m.Issuer != issuer:
			return nil, c.fail("the metadata at %s names issuer %q, not %q (RFC 8414 section 3.3); check auth.per_user.issuer", at, m.Issuer, issuer)
		case m.AuthorizationEndpoint == "" || m.TokenEndpoint == "":
			return nil, c.fail("the metadata at %s names no authorization_endpoint or token_endpoint", at)
		case !slices.Contains(m.CodeChallengeMethods, "S256"):
			return nil, c.fail("the metadata at %s does not list S256 in code_challenge_methods_supported, and MCP clients must use PKCE S256; the server cannot be used", at)
		}
		for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint} {
			if err := secureURL(e); err != nil {
				return nil, c.fail("endpoint %q %v", e, err)
			}
		}
		c.meta = &m
		return c.meta, nil
	}
	return nil, c.fail("no authorization server metadata for issuer %q (RFC 8414 or OpenID Connect discovery)", issuer)
}

// discoverIssuer reads the upstream's RFC 9728 protected-resource
// metadata (at its path, then at the root) for its authorization server.
func (c *BasicClient) discoverIssuer(ctx context.Context) (string, error) {
	u, err := url.Parse(c.upstream)
	if err != nil {
		return "", c.fail("upstream url: %v", err)
	}
	origin := u.Scheme + "://" + u.Host
	cands := []string{origin + "/.well-known/oauth-protected-resource"}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		cands = append([]string{origin + "/.well-known/oauth-protected-resource" + p}, cands...)
	}
	for _, at := range cands {
		var prm struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		found, err := c.fetch(ctx, at, &prm)
		if err != nil {
			return "", err
		}
		if !found {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return "", c.fail("the protected resource metadata at %s names no authorization_servers; set auth.per_user.issuer", at)
		}
		if err := secureURL(prm.AuthorizationServers[0]); err != nil {
			return "", c.fail("the protected resource metadata at %s names authorization server %q, which %v", at, prm.AuthorizationServers[0], err)
		}
		return prm.AuthorizationServers[0], nil
	}
	return "", c.fail("the upstream publishes no protected resource metadata (asked %s); set auth.per_user.issuer", strings.Join(cands, ", "))
}

// fetch GETs a JSON document; false for 404/410.
func (c *BasicClient) fetch(ctx context.Context, at string, v any) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return false, c.fail("%s: %v", at, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, c.fail("GET %s: %v", at, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, c.fail("GET %s answered HTTP %d", at, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxOAuthBody+1))
	if err != nil || len(b) > maxOAuthBody {
		return false, c.fail("GET %s: unreadable or larger than %d bytes", at, maxOAuthBody)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, c.fail("the document at %s is not JSON: %v", at, err)
	}
	return true, nil
}

// AuthCodeURL implements Client.
func (c *BasicClient) AuthCodeURL(ctx context.Context, state, verifier, redirectURI string) (string, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(m.AuthorizationEndpoint)
	if err != nil {
		return "", c.fail("authorization_endpoint %q: %v", m.AuthorizationEndpoint, err)
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", c.clientID())
	q.Set("redirect_uri", redirectURI)
	q.Set("state", state)
	q.Set("code_challenge", challengeOf(verifier))
	q.Set("code_challenge_method", "S256")
	if len(c.cfg.Scopes) > 0 {
		q.Set("scope", strings.Join(c.cfg.Scopes, " "))
	}
	if c.cfg.Resource != "" {
		q.Set("resource", c.cfg.Resource)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// challengeOf is the PKCE S256 code challenge of verifier (RFC 7636 4.2).
func challengeOf(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Exchange implements Client.
func (c *BasicClient) Exchange(ctx context.Context, code, verifier, redirectURI, iss string) (*Token, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	// RFC 9207: a server that says it sends iss must have sent its own;
	// one that sent any must have sent its own.
	switch {
	case iss != "" && iss != m.Issuer:
		return nil, c.fail("the callback's iss %q is not the issuer %q (RFC 9207): the answer came from another authorization server (a mix-up attack?); not redeemed", iss, m.Issuer)
	case iss == "" && m.ISSParameterSupported:
		return nil, c.fail("the callback carries no iss although the server's metadata says it sends one (RFC 9207); not redeemed")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	return c.token(ctx, m, form)
}

// Refresh implements Client.
func (c *BasicClient) Refresh(ctx context.Context, refreshToken string) (*Token, error) {
	m, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	return c.token(ctx, m, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}})
}

// token POSTs to the token endpoint with the client's authentication.
func (c *BasicClient) token(ctx context.Context, m *serverMetadata, form url.Values) (*Token, error) {
	if c.cfg.Resource != "" {
		form.Set("resource", c.cfg.Resource)
	}
	secret, err := c.secret()
	if err != nil {
		return nil, err
	}
	method := c.cfg.AuthMethod
	if method == "" {
		method = config.AuthMethodNone
		if secret != "" {
			method = config.AuthMethodBasic
			if len(m.AuthMethods) > 0 && !slices.Contains(m.AuthMethods, config.AuthMethodBasic) && slices.Contains(m.AuthMethods, config.AuthMethodPost) {
				method = config.AuthMethodPost
			}
		}
	}
	if method != config.AuthMethodBasic {
		form.Set("client_id", c.clientID())
	}
	if method == config.AuthMethodPost {
		form.Set("client_secret", secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, c.fail("token endpoint: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if method == config.AuthMethodBasic {
		req.SetBasicAuth(url.QueryEscape(c.clientID()), url.QueryEscape(secret)) // RFC 6749 2.3.1
	}
	now := c.clock()
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.fail("token endpoint: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxOAuthBody+1))
	if err != nil || len(b) > maxOAuthBody {
		return nil, c.fail("token endpoint answer unreadable or larger than %d bytes", maxOAuthBody)
	}
	var tr struct {
		AccessToken      string          `json:"access_token"`
		TokenType        string          `json:"token_type"`
		ExpiresIn        json.Number     `json:"expires_in"`
		RefreshToken     string          `json:"refresh_token"`
		RefreshExpiresIn json.Number     `json:"refresh_expires_in"`
		Error            string          `json:"error"`
		ErrorDescription string          `json:"error_description"`
		Extra            json.RawMessage `json:"-"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, c.fail("token endpoint answered HTTP %d, not JSON", resp.StatusCode)
	}
	if tr.Error != "" || resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("token endpoint answered HTTP %d %s", resp.StatusCode, tr.Error)
		if tr.ErrorDescription != "" {
			msg += ": " + tr.ErrorDescription
		}
		if tr.Error == "invalid_grant" {
			return nil, fmt.Errorf("%w (%s)", ErrInvalidGrant, c.fail("%s", msg))
		}
		return nil, c.fail("%s", msg)
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, c.fail("token endpoint answered no bearer access_token (token_type %q)", tr.TokenType)
	}
	t := &Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken}
	if s, err := strconv.ParseInt(tr.ExpiresIn.String(), 10, 64); err == nil && s > 0 {
		t.Expiry = now.Add(time.Duration(s) * time.Second)
	}
	if s, err := strconv.ParseInt(tr.RefreshExpiresIn.String(), 10, 64); err == nil && s > 0 {
		t.RefreshExpiry = now.Add(time.Duration(s) * time.Second)
	}
	return t, nil
}

// secureURL accepts https URLs, and http ones on a loopback host.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return errors.New("is not an absolute http(s) URL")
	case u.Scheme == "http" && !config.IsLoopbackHost(u.Hostname()):
		return errors.New("is plain http on a host that is not loopback")
	}
	return nil
}
