package credentials

// Upstream credentials from the OAuth 2.0 client-credentials grant
// (config upstreams.NAME.oauth): the gateway's own token, never the
// downstream caller's, sent as "Authorization: Bearer" on every request to
// that upstream (POST, GET stream, DELETE, legacy SSE).
//
// With oauth.token_url the token is fetched before the first request. With
// oauth.issuer or oauth.discover the gateway follows the MCP authorization
// flow (discovery.go): a request goes without a token until the
// upstream answers 401, whose challenge and protected-resource metadata say
// which resource and scopes to ask which authorization server for. In every
// mode a 401 gets a new token and a 403 insufficient_scope naming scopes
// not yet asked for gets them added ("step-up"); the request is then sent
// once more — it had not been processed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

const (
	// tokenFetchTimeout bounds one request to a token endpoint or a
	// metadata document.
	tokenFetchTimeout = 30 * time.Second
	// tokenRefreshMargin is how long before its expiry a token is replaced:
	// at most this, and at most a quarter of the token's lifetime (so a
	// short-lived token is still reused for most of its life).
	tokenRefreshMargin = 30 * time.Second
	// maxScopes bounds the scopes a token request asks for, however many
	// an upstream's challenges name.
	maxScopes = 64
)

// sharedClient is the HTTP client for an upstream's shared connection:
// base, or for an upstream with oauth: a client of its own whose
// transport adds the upstream's access token over base's transport.
func sharedClient(ctx context.Context, name string, cfg *config.Upstream, base *http.Client, env Env) *http.Client {
	if cfg.OAuth == nil || cfg.URL == "" {
		return base
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	log := env.Logger.With(zap.String("upstream", name))
	if cfg.OAuth.Discover {
		log.Info("upstream OAuth: the authorization server is taken from the upstream's protected-resource metadata, and the client secret goes to it; set oauth.issuer instead to pin it")
	}
	tokens := newUpstreamTokens(ctx, name, cfg.URL, cfg.OAuth, oauthHTTPClient(name, cfg, rt), log, env.Now)
	return &http.Client{
		Transport:     &oauthTransport{origin: originOf(cfg.URL), tokens: tokens, base: rt},
		CheckRedirect: base.CheckRedirect,
		Timeout:       base.Timeout,
	}
}

// oauthHTTPClient is the client of an upstream's token and metadata
// requests: it follows no redirect (the client secret goes only where it
// was sent); with discover, where the authorization server and its
// endpoints are whatever the upstream names, it also connects to no
// internal address but the upstream's own and oauth.allow_addresses.
func oauthHTTPClient(name string, cfg *config.Upstream, rt http.RoundTripper) *http.Client {
	if !cfg.OAuth.Discover {
		return outbound.NoRedirects(&http.Client{Transport: rt, Timeout: tokenFetchTimeout})
	}
	key := "upstreams." + name + ".oauth.allow_addresses"
	g, err := outbound.NewGuard(cfg.OAuth.AllowAddresses, key)
	if err != nil { // config validation refuses it; fail closed anyway
		g, _ = outbound.NewGuard(nil, key)
	}
	return outbound.Client(g.Trust(cfg.URL), tokenFetchTimeout)
}

// TokenError is a failure to obtain an upstream's access token. It names
// the upstream and the token endpoint, never the client secret.
type TokenError struct {
	Upstream string
	TokenURL string
	Cause    string
	// Grant names the grant when it is not client credentials.
	Grant string
}

func (e *TokenError) Error() string {
	grant := "OAuth client credentials"
	if e.Grant != "" {
		grant = e.Grant
	}
	return fmt.Sprintf("upstream %q: cannot obtain an access token from %s (%s): %s; check upstreams.%s.oauth and the authorization server",
		e.Upstream, e.TokenURL, grant, e.Cause, e.Upstream)
}

// upstreamTokens is an upstream's token source: a cache with
// oauth2.ReuseTokenSource semantics (one token shared by every request and
// connection, replaced shortly before it expires) over the grant, and the
// answers to the upstream's challenges.
type upstreamTokens struct {
	fetch *tokenFetcher
	disc  *discovery // nil with token_url: the endpoint is configured
	now   func() time.Time

	mu    sync.Mutex
	cache oauth2.TokenSource // nil while the token endpoint is unknown

	chMu       sync.Mutex // one challenge (and discovery) at a time
	discovered bool       // disc has run successfully
}

func newUpstreamTokens(ctx context.Context, upstream, upstreamURL string, cfg *config.UpstreamOAuth, hc *http.Client, log *zap.Logger, now func() time.Time) *upstreamTokens {
	if now == nil {
		now = time.Now
	}
	f := &tokenFetcher{ctx: ctx, upstream: upstream, cfg: cfg, client: hc, readFile: os.ReadFile, scopes: slices.Clone(cfg.Scopes), now: now}
	if cfg.PrivateKeyFile != "" {
		f.key = &oauthclient.KeyFile{Path: cfg.PrivateKeyFile, KeyID: cfg.KeyID}
	}
	if cfg.DPoP {
		k, err := oauthclient.NewDPoPKey(now)
		if err != nil { // crypto/rand failing: nothing can be signed
			log.Error("upstream OAuth: cannot generate the DPoP key; token requests will fail", zap.Error(err))
		}
		f.dpop, f.dpopErr = k, err
	}
	t := &upstreamTokens{fetch: f, now: now}
	if cfg.Discovers() {
		t.disc = &discovery{upstream: upstream, url: upstreamURL, cfg: cfg, client: hc, log: log}
		return t
	}
	f.grant = grant{tokenURL: cfg.TokenURL, resource: cfg.Resource, style: authStyle(cfg.AuthMethod)}
	t.reset()
	return t
}

// reset drops the cached token. tokenFetcher moves each token's expiry
// forward by the refresh margin itself, so the cache replaces a token at
// its (moved) expiry.
func (t *upstreamTokens) reset() {
	t.mu.Lock()
	t.cache = &reuseToken{src: t.fetch, now: t.now}
	t.mu.Unlock()
}

// reuseToken is oauth2.ReuseTokenSource on an injected clock (oauth2's
// reads the wall clock): one token until its expiry, and one fetch at a
// time, which the others wait for.
type reuseToken struct {
	src oauth2.TokenSource
	now func() time.Time

	mu  sync.Mutex
	tok *oauth2.Token
}

func (r *reuseToken) Token() (*oauth2.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.tok; t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || r.now().Before(t.Expiry)) {
		return t, nil
	}
	t, err := r.src.Token()
	if err != nil {
		return nil, err
	}
	r.tok = t
	return t, nil
}

// Token returns the cached token, fetching one when there is none or it is
// about to expire; nil (and no error) while the token endpoint is not known
// yet (a discovering client before the upstream's first challenge).
func (t *upstreamTokens) Token() (*oauth2.Token, error) {
	t.mu.Lock()
	src := t.cache
	t.mu.Unlock()
	if src == nil {
		return nil, nil
	}
	return src.Token()
}

// rejected drops the cached token if it is still access (the upstream
// answered 401 to it: revoked, or the upstream's keys rotated), so the next
// request gets a new one; with none cached yet it starts the cache. A 401
// to a request that carried no token keeps a token fetched meanwhile.
func (t *upstreamTokens) rejected(access string) {
	t.mu.Lock()
	none := t.cache == nil
	t.mu.Unlock()
	if none || (access != "" && t.fetch.current() == access) {
		t.reset()
	}
}

// challenge handles an upstream's 401 or 403 to a request that carried
// token used ("" for none). It reports whether the request should be sent
// again (with the token Token now returns), or why no token can be had.
func (t *upstreamTokens) challenge(ctx context.Context, status int, h http.Header, used string) (bool, error) {
	ch := oauthclient.ParseChallenge(h.Values("WWW-Authenticate"))
	t.chMu.Lock()
	defer t.chMu.Unlock()
	switch status {
	case http.StatusUnauthorized:
		var offered []string
		// Run discovery for the first challenge, and again when a token
		// was refused (the upstream may have moved to another server).
		if t.disc != nil && (!t.discovered || used != "") {
			g, scopes, err := t.disc.run(ctx, ch)
			if err != nil {
				return false, err
			}
			t.fetch.setGrant(g)
			t.discovered, offered = true, scopes
		}
		t.fetch.chooseScopes(ch.Scopes, offered)
		t.rejected(used)
		return true, nil
	case http.StatusForbidden:
		if !ch.InsufficientScope() || !t.fetch.addScopes(ch.Scopes) {
			return false, nil // nothing more to ask for: the refusal stands
		}
		t.reset()
		return true, nil
	}
	return false, nil
}

// grant is where and how a token is requested.
type grant struct {
	tokenURL string
	style    oauth2.AuthStyle
	resource string
	// issuer is the authorization server's (discovered; "" with
	// token_url), signingAlgs its token_endpoint_auth_signing_alg_values_supported.
	issuer      string
	signingAlgs []string
}

func authStyle(method string) oauth2.AuthStyle {
	switch method {
	case config.AuthMethodBasic:
		return oauth2.AuthStyleInHeader
	case config.AuthMethodPost:
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}

// tokenFetcher runs the client-credentials grant.
type tokenFetcher struct {
	ctx      context.Context // the upstream's: its end ends a pending token request
	upstream string
	cfg      *config.UpstreamOAuth
	client   *http.Client
	readFile func(string) ([]byte, error)
	now      func() time.Time     // the expiry's clock
	key      *oauthclient.KeyFile // private_key_file; nil without
	dpop     *oauthclient.DPoPKey // oauth.dpop; nil without
	dpopErr  error                // why there is no dpop key though asked for

	mu     sync.Mutex
	grant  grant
	scopes []string // asked for: the config's, or the upstream's, plus step-ups
	last   string   // the access token last issued
}

func (f *tokenFetcher) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *tokenFetcher) setGrant(g grant) {
	f.mu.Lock()
	f.grant = g
	f.mu.Unlock()
}

// chooseScopes picks the scopes for a token after a 401 when the config
// names none (MCP's scope selection): the challenge's scope, else the
// protected resource's scopes_supported, else none. Scopes asked for
// before are kept (a re-authorization asks for their union).
func (f *tokenFetcher) chooseScopes(challenged, supported []string) {
	if len(f.cfg.Scopes) > 0 {
		return
	}
	if len(challenged) == 0 {
		f.mu.Lock()
		empty := len(f.scopes) == 0
		f.mu.Unlock()
		if !empty {
			return
		}
		challenged = supported
	}
	f.addScopes(challenged)
}

// addScopes adds scopes not yet asked for and reports whether there were any.
func (f *tokenFetcher) addScopes(scopes []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	added := false
	for _, s := range scopes {
		if !slices.Contains(f.scopes, s) && len(f.scopes) < maxScopes {
			f.scopes = append(f.scopes, s)
			added = true
		}
	}
	return added
}

func (f *tokenFetcher) fail(tokenURL, format string, args ...any) error {
	e := &TokenError{Upstream: f.upstream, TokenURL: tokenURL, Cause: fmt.Sprintf(format, args...)}
	if f.cfg.AssertionFile != "" {
		e.Grant = "OAuth JWT bearer grant with oauth.assertion_file"
	}
	return e
}

// Token asks the token endpoint for a new token.
func (f *tokenFetcher) Token() (*oauth2.Token, error) {
	f.mu.Lock()
	g, scopes := f.grant, slices.Clone(f.scopes)
	f.mu.Unlock()
	if f.dpopErr != nil {
		return nil, f.fail(g.tokenURL, "no DPoP key (oauth.dpop): %v", f.dpopErr)
	}
	if usesJOSE(f.cfg) {
		return f.joseToken(g, scopes)
	}
	secret, err := f.secret(g.tokenURL)
	if err != nil {
		return nil, err
	}
	cc := clientcredentials.Config{
		ClientID:     f.cfg.ClientID,
		ClientSecret: secret,
		TokenURL:     g.tokenURL,
		Scopes:       scopes,
		AuthStyle:    g.style,
	}
	if g.resource != "" {
		cc.EndpointParams = url.Values{"resource": {g.resource}} // RFC 8707
	}
	start := f.now()
	tok, err := cc.Token(context.WithValue(f.ctx, oauth2.HTTPClient, f.client))
	wall := time.Now() // just after oauth2 dated the expiry on the wall clock
	if err != nil {
		return nil, f.fail(g.tokenURL, "%s", describeTokenError(err))
	}
	if typ := tok.TokenType; typ != "" && !strings.EqualFold(typ, "bearer") {
		return nil, f.fail(g.tokenURL, "the token endpoint issued a %q token, but mcpgw sends only Bearer tokens", typ)
	}
	if !tok.Expiry.IsZero() {
		// Its life, from f.now's start (the request's time counts as used).
		tok.Expiry = useUntil(start, start.Add(tok.Expiry.Sub(wall)))
	}
	f.mu.Lock()
	f.last = tok.AccessToken
	f.mu.Unlock()
	return tok, nil
}

// secret is the client secret: client_secret, or client_secret_file's
// content, read on every request so a rotated secret is picked up.
func (f *tokenFetcher) secret(tokenURL string) (string, error) {
	if f.cfg.ClientSecretFile == "" {
		return f.cfg.ClientSecret, nil
	}
	b, err := f.readFile(f.cfg.ClientSecretFile)
	if err != nil {
		return "", f.fail(tokenURL, "cannot read oauth.client_secret_file: %v", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", f.fail(tokenURL, "oauth.client_secret_file %s is empty", f.cfg.ClientSecretFile)
	}
	return secret, nil
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
// origin, and to nothing else: a redirect elsewhere goes out without it.
// The caller's own Authorization header never goes out (invariant 5).
type oauthTransport struct {
	origin string
	tokens *upstreamTokens
	base   http.RoundTripper
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL.String()) != t.origin {
		return t.base.RoundTrip(req)
	}
	resp, used, err := t.send(req, req.Body)
	if err == nil && nonceChallenge(resp, t.tokens.fetch.dpop, req.URL.String()) {
		// The upstream wants its DPoP nonce in the proof: once more with
		// it (RFC 9449 section 9), if the body can be re-made.
		if body, ok := remake(req); ok {
			drain(resp)
			resp, used, err = t.send(req, body)
		}
	}
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	// A body already read cannot be sent again unless it can be re-made.
	body := io.ReadCloser(http.NoBody)
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return resp, nil
		}
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	again, cerr := t.tokens.challenge(req.Context(), resp.StatusCode, resp.Header, used)
	if !again && cerr == nil {
		body.Close()
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if cerr != nil {
		body.Close()
		return nil, cerr
	}
	resp, _, err = t.send(req, body)
	return resp, err
}

// send sends a copy of req with the current token (if one is known) and
// body, and says which token it carried.
func (t *oauthTransport) send(req *http.Request, body io.ReadCloser) (*http.Response, string, error) {
	tok, err := t.tokens.Token()
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, "", err
	}
	r := req.Clone(req.Context())
	r.Body = body
	r.Header.Del("Authorization")
	r.Header.Del("DPoP") // only the gateway's own proof goes out
	used := ""
	if tok != nil {
		used = tok.AccessToken
		if err := presentToken(r, used, t.tokens.fetch.dpop); err != nil {
			closeBody(body)
			return nil, "", err
		}
	}
	resp, err := t.base.RoundTrip(r)
	return resp, used, err
}

// originOf is scheme://host[:port] of a URL, lower-cased.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// useUntil is when a token asked for at start and expiring at expiry
// stops being used: tokenRefreshMargin before its expiry, and at most a
// quarter of its life before (so a short-lived token is still reused
// for most of its life). Every token this package caches follows it.
func useUntil(start, expiry time.Time) time.Time {
	life := expiry.Sub(start)
	return expiry.Add(-min(tokenRefreshMargin, max(life/4, 0)))
}
