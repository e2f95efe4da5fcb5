package host

// Upstream credentials from the OAuth 2.0 client-credentials grant
// (config upstreams.NAME.oauth): the gateway's own token, never the
// downstream caller's, sent as "Authorization: Bearer" on every request to
// that upstream (POST, GET stream, DELETE, legacy SSE).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpgw/mcpgw/internal/config"
)

const (
	// tokenFetchTimeout bounds one request to a token endpoint.
	tokenFetchTimeout = 30 * time.Second
	// tokenRefreshMargin is how long before its expiry a token is replaced:
	// at most this, and at most a quarter of the token's lifetime (so a
	// short-lived token is still reused for most of its life).
	tokenRefreshMargin = 30 * time.Second
)

// upstreamHTTPClient is the HTTP client for an upstream's requests: the
// shared one, or for an upstream with oauth: a client of its own whose
// transport adds the upstream's access token over the shared transport.
func (h *Host) upstreamHTTPClient(ctx context.Context, name string, cfg *config.Upstream) *http.Client {
	base := h.opts.HTTPClient
	if cfg.OAuth == nil || cfg.URL == "" {
		return base
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tokens := newUpstreamTokens(ctx, name, cfg.OAuth, &http.Client{Transport: rt, Timeout: tokenFetchTimeout})
	return &http.Client{
		Transport: &oauthTransport{
			origin: originOf(cfg.URL),
			tokens: tokens,
			base:   rt,
			auth:   &oauth2.Transport{Source: tokens, Base: rt},
		},
		CheckRedirect: base.CheckRedirect,
		Timeout:       base.Timeout,
	}
}

// TokenError is a failure to obtain an upstream's access token. It names
// the upstream and the token endpoint, never the client secret.
type TokenError struct {
	Upstream string
	TokenURL string
	Cause    string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("upstream %q: cannot obtain an access token from %s (OAuth client credentials): %s; check upstreams.%s.oauth and the authorization server",
		e.Upstream, e.TokenURL, e.Cause, e.Upstream)
}

// upstreamTokens is an upstream's token source: a cache with
// oauth2.ReuseTokenSource semantics (one token shared by every request and
// connection, replaced shortly before it expires) over the grant.
type upstreamTokens struct {
	fetch *tokenFetcher

	mu    sync.Mutex
	cache oauth2.TokenSource
}

func newUpstreamTokens(ctx context.Context, upstream string, cfg *config.UpstreamOAuth, hc *http.Client) *upstreamTokens {
	t := &upstreamTokens{fetch: &tokenFetcher{ctx: ctx, upstream: upstream, cfg: cfg, client: hc, readFile: os.ReadFile}}
	t.reset()
	return t
}

// reset drops the cached token. tokenFetcher moves each token's expiry
// forward by the refresh margin itself, so the reuse source's own early
// expiry is set to (practically) nothing.
func (t *upstreamTokens) reset() {
	t.cache = oauth2.ReuseTokenSourceWithExpiry(nil, t.fetch, time.Nanosecond)
}

// Token returns the cached token, fetching one when there is none or it is
// about to expire.
func (t *upstreamTokens) Token() (*oauth2.Token, error) {
	t.mu.Lock()
	src := t.cache
	t.mu.Unlock()
	return src.Token()
}

// rejected drops the cached token if it is still access (the upstream
// answered 401 to it: revoked, or the upstream's keys rotated), so the next
// request gets a new one.
func (t *upstreamTokens) rejected(access string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fetch.current() == access {
		t.reset()
	}
}

// tokenFetcher runs the client-credentials grant.
type tokenFetcher struct {
	ctx      context.Context // the host's: Close ends a pending token request
	upstream string
	cfg      *config.UpstreamOAuth
	client   *http.Client
	readFile func(string) ([]byte, error)

	mu   sync.Mutex
	last string // the access token last issued
}

func (f *tokenFetcher) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *tokenFetcher) fail(format string, args ...any) error {
	return &TokenError{Upstream: f.upstream, TokenURL: f.cfg.TokenURL, Cause: fmt.Sprintf(format, args...)}
}

// Token asks the token endpoint for a new token.
func (f *tokenFetcher) Token() (*oauth2.Token, error) {
	secret := f.cfg.ClientSecret
	if f.cfg.ClientSecretFile != "" {
		// Read on every request, so a rotated secret is picked up.
		b, err := f.readFile(f.cfg.ClientSecretFile)
		if err != nil {
			return nil, f.fail("cannot read oauth.client_secret_file: %v", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, f.fail("oauth.client_secret_file %s is empty", f.cfg.ClientSecretFile)
		}
	}
	cc := clientcredentials.Config{
		ClientID:     f.cfg.ClientID,
		ClientSecret: secret,
		TokenURL:     f.cfg.TokenURL,
		Scopes:       f.cfg.Scopes,
	}
	switch f.cfg.AuthMethod {
	case config.AuthMethodBasic:
		cc.AuthStyle = oauth2.AuthStyleInHeader
	case config.AuthMethodPost:
		cc.AuthStyle = oauth2.AuthStyleInParams
	}
	if f.cfg.Resource != "" {
		cc.EndpointParams = url.Values{"resource": {f.cfg.Resource}} // RFC 8707
	}
	start := time.Now()
	tok, err := cc.Token(context.WithValue(f.ctx, oauth2.HTTPClient, f.client))
	if err != nil {
		return nil, f.fail("%s", describeTokenError(err))
	}
	if typ := tok.TokenType; typ != "" && !strings.EqualFold(typ, "bearer") {
		return nil, f.fail("the token endpoint issued a %q token, but mcpgw sends only Bearer tokens", typ)
	}
	if !tok.Expiry.IsZero() {
		life := tok.Expiry.Sub(start)
		tok.Expiry = tok.Expiry.Add(-min(tokenRefreshMargin, max(life/4, 0)))
	}
	f.mu.Lock()
	f.last = tok.AccessToken
	f.mu.Unlock()
	return tok, nil
}

// describeTokenError says what the token endpoint answered, without its
// raw body.
func describeTokenError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		s := fmt.Sprintf("the token endpoint answered HTTP %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			s += " " + re.ErrorCode
			if re.ErrorDescription != "" {
				s += " (" + re.ErrorDescription + ")"
			}
		}
		return s
	}
	return err.Error()
}

// oauthTransport adds the upstream's token to requests for the upstream's
// origin (oauth2.Transport), and to nothing else: a redirect elsewhere goes
// out without it. A 401 from the upstream drops the token it rejected.
type oauthTransport struct {
	origin string
	tokens *upstreamTokens
	base   http.RoundTripper
	auth   *oauth2.Transport
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL.String()) != t.origin {
		return t.base.RoundTrip(req)
	}
	resp, err := t.auth.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && resp.Request != nil {
		if tok, ok := strings.CutPrefix(resp.Request.Header.Get("Authorization"), "Bearer "); ok {
			t.tokens.rejected(tok)
		}
	}
	return resp, err
}

// originOf is scheme://host[:port] of a URL, lower-cased.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}
