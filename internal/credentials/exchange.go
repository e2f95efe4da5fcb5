package credentials

// RFC 8693 token exchange for an upstream (upstreams.NAME.auth.
// token_exchange): the caller's validated downstream token is presented to
// the authorization server as subject_token, and the token it issues for
// the upstream (audience, RFC 8707 resource, scopes) goes upstream in its
// place. The downstream token itself never reaches the upstream
// (DESIGN.md invariant 5).
//
// Issued tokens are cached per (principal key, scopes) — this source
// serves one upstream — until shortly before expires_in, in a bounded LRU;
// concurrent misses of one key share one exchange; nothing cached for one
// principal is ever returned for another.

import (
	"cmp"
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

const (
	// grantTokenExchange is RFC 8693's grant_type.
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// exchangeNoExpiry is how long a token issued without expires_in is
	// reused: briefly, since its lifetime is unknown.
	exchangeNoExpiry = time.Minute
	// refusalMemory is how long an authorization server's refusal of one
	// subject token is repeated without asking again: a principal the IdP
	// will not exchange for would otherwise cost one IdP request per call.
	// Short, so a permission granted at the IdP takes effect soon.
	refusalMemory = 10 * time.Second
	// maxDescription bounds how much of an authorization server's
	// error_description reaches the caller.
	maxDescription = 300
)

// ExchangeError is an exchange the authorization server refused or did
// not answer usably. It names the upstream, the endpoint and the server's
// error and error_description; never a token.
type ExchangeError struct {
	Upstream, TokenURL string
	Status             int    // HTTP status of the answer (0: none)
	Code               string // the OAuth error code, when the server gave one
	Description        string // its error_description, cut short
	Cause              string // what went wrong otherwise
}

func (e *ExchangeError) Error() string {
	what := e.Cause
	if e.Code != "" {
		what = fmt.Sprintf("the authorization server refused the exchange (HTTP %d): %s", e.Status, e.Code)
		if e.Description != "" {
			what += ": " + e.Description
		}
	}
	return fmt.Sprintf("upstream %q: cannot obtain a token for you by token exchange at %s: %s; check upstreams.%s.auth.token_exchange and your permissions at the authorization server",
		e.Upstream, e.TokenURL, what, e.Upstream)
}

// exchangeSource is the Source of token_exchange.
type exchangeSource struct {
	ctx      context.Context // the upstream's: its end ends pending exchanges
	upstream string
	upURL    string
	cfg      *config.UpstreamTokenExchange
	client   *http.Client // to the authorization server
	metrics  *metrics.Metrics
	log      *zap.Logger
	now      func() time.Time
	readFile func(string) ([]byte, error)

	endpointMu sync.Mutex
	endpoint   string // the token endpoint (token_url, or from issuer metadata)

	actorMu sync.Mutex
	actor   oauth2.TokenSource // the gateway's own token, for actor_token

	flight   singleflight.Group
	cache    tokenLRU
	refusals refusalCache

	jag *idJAGServer // with id_jag (idjag.go); nil without
}

func newExchangeSource(ctx context.Context, name, upstreamURL string, cfg *config.UpstreamTokenExchange, hc *http.Client, m *metrics.Metrics, log *zap.Logger) *exchangeSource {
	max := cfg.MaxCached
	if max <= 0 {
		max = config.DefaultMaxCachedExchanges
	}
	s := &exchangeSource{
		ctx: ctx, upstream: name, upURL: upstreamURL, cfg: cfg, client: hc, metrics: m, log: log,
		now: time.Now, readFile: os.ReadFile, endpoint: cfg.TokenURL,
		cache:    tokenLRU{max: max, items: map[string]*list.Element{}, order: list.New()},
		refusals: refusalCache{max: max, items: map[string]refusal{}},
	}
	if cfg.IDJAG != nil {
		s.jag = &idJAGServer{client: idJAGClient(name, upstreamURL, cfg.IDJAG)}
	}
	return s
}

func (s *exchangeSource) Kind() Kind { return KindExchanged }

// cacheKey binds a token to the principal and the scopes it was issued
// for (the upstream is this source's own).
func (s *exchangeSource) cacheKey(sub Subject) string {
	return sub.Key() + "\x00" + strings.Join(s.cfg.Scopes, " ")
}

// Token returns the caller's exchanged token, exchanging on a miss.
func (s *exchangeSource) Token(ctx context.Context, sub Subject) (string, error) {
	if sub.Principal == nil {
		return "", &ExchangeError{Upstream: s.upstream, TokenURL: s.tokenURLForErrors(),
			Cause: "the request is not authenticated, so there is no caller to act for; configure auth.oidc"}
	}
	if sub.Token == "" {
		return "", &ExchangeError{Upstream: s.upstream, TokenURL: s.tokenURLForErrors(),
			Cause: fmt.Sprintf("the caller %s authenticated without a bearer token (an API key?), so there is nothing to exchange; call with an OAuth token from the configured issuer", sub.Principal)}
	}
	key := s.cacheKey(sub)
	if tok, ok := s.cache.get(key, s.now()); ok {
		return tok, nil
	}
	if err := s.refusals.get(key, sub.Token, s.now()); err != nil {
		s.metrics.TokenExchange(s.upstream, metrics.ExchangeRefusedRecently)
		return "", err
	}
	// One exchange per key at a time; it runs on the upstream's context
	// (bounded), so one caller giving up does not fail the others waiting.
	ch := s.flight.DoChan(key, func() (any, error) {
		if tok, ok := s.cache.get(key, s.now()); ok {
			return tok, nil
		}
		tok, exp, err := s.exchange(sub)
		if err != nil {
			var ee *ExchangeError
			if errors.As(err, &ee) && ee.Code != "" {
				// The server looked at this token and said no: asking
				// again at once would hear the same.
				s.refusals.put(key, sub.Token, ee, s.now())
			}
			return "", err
		}
		s.refusals.drop(key)
		n, evicted := s.cache.put(key, tok, exp)
		s.metrics.ExchangeCache(s.upstream, n, evicted)
		return tok, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Refused drops the subject's cached token if it is still token (the
// upstream answered 401 to it), so the next Token exchanges again.
func (s *exchangeSource) Refused(_ context.Context, sub Subject, token string) {
	n := s.cache.drop(s.cacheKey(sub), token)
	s.metrics.ExchangeCache(s.upstream, n, 0)
}

func (s *exchangeSource) tokenURLForErrors() string {
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	if s.endpoint != "" {
		return s.endpoint
	}
	return s.cfg.Issuer
}

// tokenURL is the token endpoint: token_url, or the one the issuer's
// metadata names (fetched once, exact issuer match).
func (s *exchangeSource) tokenURL(ctx context.Context) (string, error) {
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	if s.endpoint != "" {
		return s.endpoint, nil
	}
	d := &discovery{upstream: s.upstream, url: s.upURL, cfg: &config.UpstreamOAuth{Issuer: s.cfg.Issuer}, client: s.client, log: s.log}
	m, _, err := d.serverMetadata(ctx, s.cfg.Issuer)
	if err != nil {
		return "", err
	}
	s.endpoint = m.TokenEndpoint
	return s.endpoint, nil
}

func (s *exchangeSource) secret() (string, error) {
	if s.cfg.ClientSecretFile == "" {
		return s.cfg.ClientSecret, nil
	}
	b, err := s.readFile(s.cfg.ClientSecretFile)
	if err != nil {
		return "", fmt.Errorf("cannot read token_exchange.client_secret_file: %v", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("token_exchange.client_secret_file %s is empty", s.cfg.ClientSecretFile)
	}
	return secret, nil
}

// exchangeForm is the RFC 8693 request body, without client authentication.
func exchangeForm(cfg *config.UpstreamTokenExchange, subjectToken, actorToken string) url.Values {
	f := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {subjectToken},
		"subject_token_type": {cmp.Or(cfg.SubjectTokenType, config.TokenTypeAccessToken)},
	}
	if t := cmp.Or(cfg.RequestedTokenType, config.TokenTypeAccessToken); t != "" {
		f.Set("requested_token_type", t)
	}
	if cfg.Audience != "" {
		f.Set("audience", cfg.Audience)
	}
	if cfg.Resource != "" {
		f.Set("resource", cfg.Resource)
	}
	if len(cfg.Scopes) > 0 {
		f.Set("scope", strings.Join(cfg.Scopes, " "))
	}
	if actorToken != "" {
		f.Set("actor_token", actorToken)
		f.Set("actor_token_type", config.TokenTypeAccessToken)
	}
	return f
}

// exchange asks the authorization server for the subject's token and
// returns it with the time to stop using it.
func (s *exchangeSource) exchange(sub Subject) (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(s.ctx, tokenFetchTimeout)
	defer cancel()
	endpoint, err := s.tokenURL(ctx)
	if err != nil {
		s.metrics.TokenExchange(s.upstream, metrics.ExchangeError)
		return "", time.Time{}, err
	}
	fail := func(e *ExchangeError) (string, time.Time, error) {
		e.Upstream, e.TokenURL = s.upstream, endpoint
		outcome := metrics.ExchangeError
		if e.Code != "" {
			outcome = metrics.ExchangeRefused
		}
		s.metrics.TokenExchange(s.upstream, outcome)
		s.log.Info("token exchange failed", zap.String("principal", sub.Principal.String()), zap.Int("status", e.Status), zap.String("error", e.Code), zap.String("cause", e.Cause))
		return "", time.Time{}, e
	}
	secret, err := s.secret()
	if err != nil {
		return fail(&ExchangeError{Cause: err.Error()})
	}
	actor := ""
	if s.cfg.Actor {
		tok, err := s.actorToken(ctx, endpoint, secret)
		if err != nil {
			return fail(&ExchangeError{Cause: "cannot obtain the gateway's own token for actor_token: " + describeTokenError(err)})
		}
		actor = tok
	}
	method := oauthclient.AuthMethodBasic
	if s.cfg.AuthMethod == config.AuthMethodPost {
		method = oauthclient.AuthMethodPost
	}
	form := exchangeForm(s.cfg, sub.Token, actor)
	asTokenURL := ""
	if s.jag != nil {
		// The ID-JAG is for the upstream's authorization server: its
		// issuer is the audience (unless configured).
		issuer, tu, err := s.idJAGServer(ctx)
		if err != nil {
			return fail(&ExchangeError{Cause: err.Error()})
		}
		if s.cfg.Audience == "" {
			form.Set("audience", issuer)
		}
		asTokenURL = tu
	}
	start := s.now()
	out, err := oauthclient.PostToken(ctx, s.client, oauthclient.TokenPost{
		Endpoint: endpoint, ClientID: s.cfg.ClientID, Secret: secret, AuthMethod: method,
		Form: form,
	})
	var unreadable *oauthclient.UnreadableAnswerError
	switch {
	case errors.As(err, &unreadable):
		return fail(&ExchangeError{Status: unreadable.Status, Cause: fmt.Sprintf("the token endpoint's answer (HTTP %d) could not be read or is larger than %d bytes", unreadable.Status, oauthclient.MaxDocumentBytes)})
	case err != nil:
		return fail(&ExchangeError{Cause: "the token endpoint is unreachable: " + unwrapURLError(err).Error()})
	}
	if out.Status != http.StatusOK {
		if out.NotJSON == nil && out.Code != "" {
			return fail(&ExchangeError{Status: out.Status, Code: out.Code, Description: printable(out.Description)})
		}
		return fail(&ExchangeError{Status: out.Status, Cause: fmt.Sprintf("the token endpoint answered HTTP %d without an OAuth error", out.Status)})
	}
	switch {
	case out.NotJSON != nil:
		return fail(&ExchangeError{Status: out.Status, Cause: "the token endpoint's answer is not a JSON object"})
	case out.AccessToken == "":
		return fail(&ExchangeError{Status: out.Status, Cause: "the token endpoint's answer has no access_token"})
	case s.jag != nil && out.IssuedTokenType != config.TokenTypeIDJAG:
		return fail(&ExchangeError{Status: out.Status, Cause: fmt.Sprintf("the IdP issued a %q, not the ID-JAG asked for", printable(out.IssuedTokenType))})
	case s.jag != nil:
		// The ID-JAG (token_type N_A) goes to the upstream's
		// authorization server; its answer is what is cached.
		start = s.now()
		if out, err = s.redeemIDJAG(ctx, out.AccessToken, asTokenURL); err != nil {
			return fail(&ExchangeError{Cause: err.Error()})
		}
	case !strings.EqualFold(out.TokenType, "bearer"):
		return fail(&ExchangeError{Status: out.Status, Cause: fmt.Sprintf("the token endpoint issued a %q token, but mcpgw sends only Bearer tokens upstream (set requested_token_type to an access token type)", printable(out.TokenType))})
	}
	life := exchangeNoExpiry
	if out.ExpiresIn != "" {
		secs, ok := out.Seconds()
		if !ok {
			return fail(&ExchangeError{Status: out.Status, Cause: fmt.Sprintf("the token endpoint's expires_in %q is not a positive number of seconds", printable(out.ExpiresIn))})
		}
		life = time.Duration(secs) * time.Second
	}
	s.metrics.TokenExchange(s.upstream, metrics.ExchangeOK)
	return out.AccessToken, useUntil(start, start.Add(life)), nil
}

// actorToken is the gateway's own client-credentials token at the same
// endpoint with the same client, cached until shortly before it expires.
func (s *exchangeSource) actorToken(ctx context.Context, endpoint, secret string) (string, error) {
	s.actorMu.Lock()
	if s.actor == nil {
		style := oauth2.AuthStyleInHeader
		if s.cfg.AuthMethod == config.AuthMethodPost {
			style = oauth2.AuthStyleInParams
		}
		cc := &clientcredentials.Config{ClientID: s.cfg.ClientID, ClientSecret: secret, TokenURL: endpoint, AuthStyle: style}
		s.actor = oauth2.ReuseTokenSourceWithExpiry(nil, cc.TokenSource(context.WithValue(s.ctx, oauth2.HTTPClient, s.client)), tokenRefreshMargin)
	}
	src := s.actor
	s.actorMu.Unlock()
	tok, err := src.Token()
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// printable cuts an authorization server's text to a bounded, printable
// line for an error message.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxDescription {
		s = s[:maxDescription] + "..."
	}
	return s
}

// unwrapURLError drops net/http's "Post URL:" wrapping (the URL is named
// by the caller).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// tokenLRU is a bounded cache of exchanged tokens by key, least recently
// used evicted first; an expired entry is never returned.
type tokenLRU struct {
	mu    sync.Mutex
	max   int
	items map[string]*list.Element
	order *list.List // front: most recently used
}

type lruEntry struct {
	key, token string
	until      time.Time
}

func (c *tokenLRU) get(key string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.items[key]
	if el == nil {
		return "", false
	}
	e := el.Value.(*lruEntry)
	if !now.Before(e.until) {
		c.order.Remove(el)
		delete(c.items, key)
		return "", false
	}
	c.order.MoveToFront(el)
	return e.token, true
}

// put stores a token and returns the entries held and how many were
// evicted to make room.
func (c *tokenLRU) put(key, token string, until time.Time) (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[key]; el != nil {
		e := el.Value.(*lruEntry)
		e.token, e.until = token, until
		c.order.MoveToFront(el)
		return len(c.items), 0
	}
	evicted := 0
	for len(c.items) >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).key)
		evicted++
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, token: token, until: until})
	return len(c.items), evicted
}

// drop forgets key's token if it is still token, and returns the entries held.
func (c *tokenLRU) drop(key, token string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.items[key]; el != nil && el.Value.(*lruEntry).token == token {
		c.order.Remove(el)
		delete(c.items, key)
	}
	return len(c.items)
}

// refusalCache remembers, briefly, that the authorization server refused
// to exchange a subject token. An entry holds only a digest of the token it
// is for, so a renewed downstream token is asked about afresh. Bounded by
// max entries: a full cache first sheds expired entries, then any one.
type refusalCache struct {
	mu    sync.Mutex
	max   int
	items map[string]refusal
}

type refusal struct {
	token [sha256.Size]byte
	err   *ExchangeError
	until time.Time
}

// get returns the remembered refusal of token under key, if still fresh.
func (c *refusalCache) get(key, token string, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.items[key]
	if !ok {
		return nil
	}
	if !now.Before(r.until) || r.token != sha256.Sum256([]byte(token)) {
		delete(c.items, key)
		return nil
	}
	return r.err
}

func (c *refusalCache) put(key, token string, err *ExchangeError, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; !ok && len(c.items) >= c.max {
		for k, r := range c.items {
			if !now.Before(r.until) {
				delete(c.items, k)
			}
		}
		for k := range c.items {
			if len(c.items) < c.max {
				break
			}
			delete(c.items, k)
		}
	}
	c.items[key] = refusal{token: sha256.Sum256([]byte(token)), err: err, until: now.Add(refusalMemory)}
}

func (c *refusalCache) drop(key string) {
	c.mu.Lock()
	delete(c.items, key)
	c.mu.Unlock()
}
