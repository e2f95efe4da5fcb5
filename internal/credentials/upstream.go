package credentials

// An upstream's credentials, as the host uses them. Every upstream has a
// credential kind: none, static (an Authorization header from config,
// which the client sends as configured), client_credentials (oauth:,
// clientcredentials.go), or one that acts for the caller — exchanged
// (auth.token_exchange, exchange.go), per_user (Env.Source: peruser) or
// forwarded (forward_headers, forward.go) — given by a Source.
//
// An acting-for upstream runs each request as its caller, and MCP servers
// bind their sessions to the user they were opened for, so the host never
// shares its connections between callers: which connection a request
// takes, and that one is only ever used for the principal that made it,
// is the host's (its stateful machinery). Each connection's Cell holds
// that principal, and its client (ActingClient) asks the Source for the
// principal's token on every request (the freshest downstream token the
// principal called with rides along, for an exchange) and, on a 401,
// tells the Source and retries once; on a 403 insufficient_scope a
// per-user Source (ScopeEscalator) answers with a step-up link.
//
// Its shared connection (the catalog's lists, health) carries the
// upstream's own credential, oauth: or an Authorization header (HasOwn);
// without one the host opens no shared connection at all (nothing could
// authorize it), and every list goes through the caller's own connection.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

// SourceFunc builds an upstream's Source (Env.Source): nil and no error
// leaves the upstream to the built-in kinds. The per-user OAuth source
// plugs in here.
type SourceFunc func(ctx context.Context, upstream string, cfg *config.Upstream) (Source, error)

// Env is what an upstream's credentials are built with, injected by the
// host.
type Env struct {
	Logger  *zap.Logger      // nil: none
	Metrics *metrics.Metrics // the token exchange's series
	// HTTPClient is the host's shared client: a token exchange's requests
	// to the authorization server go over its transport.
	HTTPClient *http.Client
	// Source, when set, is asked first for each upstream's Source.
	Source SourceFunc
	// Now is the clock upstream tokens expire by (nil: time.Now).
	Now func() time.Time
}

// Upstream is one upstream's credentials: the client of its shared
// connection and, when it acts for its callers, the Source of each
// caller's.
type Upstream struct {
	name   string
	cfg    *config.Upstream
	base   *http.Client // acting-for clients are built on it
	shared *http.Client
	source Source // nil: not acting for callers
}

// NewUpstream builds the credentials of upstream name over base, the
// client its requests go out with (its TLS settings). ctx is the
// upstream's: its end ends pending token requests.
func NewUpstream(ctx context.Context, name string, cfg *config.Upstream, base *http.Client, env Env) *Upstream {
	if env.Logger == nil {
		env.Logger = zap.NewNop()
	}
	if env.HTTPClient == nil {
		env.HTTPClient = &http.Client{}
	}
	return &Upstream{
		name:   name,
		cfg:    cfg,
		base:   base,
		shared: sharedClient(ctx, name, cfg, base, env),
		source: newSource(ctx, name, cfg, env),
	}
}

// SharedClient is the HTTP client of the upstream's shared connection:
// base, or for an upstream with oauth: one adding the gateway's own token.
func (u *Upstream) SharedClient() *http.Client { return u.shared }

// newSource picks the upstream's acting-for Source: the hook's, else
// token_exchange's, else forward_headers', else none.
func newSource(ctx context.Context, name string, cfg *config.Upstream, env Env) Source {
	if mk := env.Source; mk != nil {
		src, err := mk(ctx, name, cfg)
		if err != nil {
			// Fail closed: every request of the upstream gets the error.
			env.Logger.Error("upstream credential source could not be built; its calls are refused", zap.String("upstream", name), zap.Error(err))
			return failingSource{err: fmt.Errorf("upstream %q: its credentials could not be set up: %w", name, err)}
		}
		if src != nil {
			return src
		}
	}
	if cfg.Auth != nil && cfg.Auth.TokenExchange != nil && cfg.URL != "" {
		// (forward_headers ride along with an exchange's token: forward.go)
		rt := env.HTTPClient.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		src := newExchangeSource(ctx, name, cfg.URL, cfg.Auth.TokenExchange,
			outbound.NoRedirects(&http.Client{Transport: rt, Timeout: tokenFetchTimeout}), env.Metrics, env.Logger.With(zap.String("upstream", name)))
		if env.Now != nil {
			src.now = env.Now // exchanged tokens expire by the host's clock too
		}
		return src
	}
	if len(cfg.ForwardHeaders) > 0 && cfg.URL != "" {
		return forwardedSource{} // forward.go
	}
	return nil
}

// failingSource refuses every request with the error its construction
// failed with.
type failingSource struct{ err error }

func (f failingSource) Kind() Kind { return KindPerUser }
func (f failingSource) Token(context.Context, Subject) (string, error) {
	return "", f.err
}
func (f failingSource) Refused(context.Context, Subject, string) {}

// Kind is what the upstream's calls carry: the Source's kind for an
// acting-for upstream, else client_credentials (oauth:), static (an
// Authorization header) or none. Audit records carry it.
func (u *Upstream) Kind() Kind {
	switch {
	case u.source != nil:
		return u.source.Kind()
	case u.cfg.OAuth != nil:
		return KindClientCredentials
	case hasAuthorizationHeader(u.cfg):
		return KindStatic
	}
	return KindNone
}

// HasOwn reports whether the upstream has a credential of its own
// (oauth: or an Authorization header) that a connection shared by every
// caller can carry.
func (u *Upstream) HasOwn() bool {
	return u.cfg.OAuth != nil || hasAuthorizationHeader(u.cfg)
}

func hasAuthorizationHeader(cfg *config.Upstream) bool {
	for k := range cfg.Headers {
		if strings.EqualFold(k, "Authorization") {
			return true
		}
	}
	return false
}

// ActsForCaller reports whether the upstream's requests run as their
// caller (exchanged, per-user or forwarded credentials).
func (u *Upstream) ActsForCaller() bool {
	if u.source == nil {
		return false
	}
	k := u.source.Kind()
	return k == KindExchanged || k == KindPerUser || k == KindForwarded
}

// Cell is whom one acting-for connection acts for: its principal, fixed
// when it was made, and the latest downstream token that principal
// called with (its token may be renewed during a session).
type Cell struct {
	mu  sync.Mutex
	sub Subject
}

// NewCell is a connection's Cell, acting for s only.
func NewCell(s Subject) *Cell { return &Cell{sub: s} }

func (c *Cell) get() Subject {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub
}

// Update takes s if s is the same principal (never another's): its
// token, when it has one, and the headers it forwards.
func (c *Cell) Update(s Subject) {
	if s.Principal == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sub.Key() == s.Key() {
		if s.Token == "" {
			s.Token = c.sub.Token
		}
		c.sub = s
	}
}

// ActingClient is the HTTP client of one acting-for connection, authorized
// for cell's principal only. Only for an upstream that ActsForCaller.
func (u *Upstream) ActingClient(cell *Cell) *http.Client {
	base := u.base
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &http.Client{
		Transport:     &sourceTransport{upstream: u.name, origin: originOf(u.cfg.URL), src: u.source, cell: cell, base: rt, forward: u.cfg.ForwardHeaders},
		CheckRedirect: base.CheckRedirect,
		Timeout:       base.Timeout,
	}
}

// sourceTransport authorizes one acting-for connection's requests with the
// Source's token for the connection's subject. Requests to another origin
// (a redirect) go without it; the caller's own token never goes out.
type sourceTransport struct {
	upstream string
	origin   string
	src      Source
	cell     *Cell
	base     http.RoundTripper
	forward  []config.ForwardHeader // the caller's headers it sends (forward.go)
}

func (t *sourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL.String()) != t.origin {
		r := req.Clone(req.Context())
		r.Header.Del("Authorization")
		r.Header.Del("DPoP")
		return t.base.RoundTrip(r)
	}
	sub := t.cell.get()
	tok, err := t.src.Token(req.Context(), sub)
	if err != nil {
		closeBody(req.Body)
		return nil, t.failure(err)
	}
	resp, err := t.send(req, req.Body, tok, sub)
	if err == nil && nonceChallenge(resp, t.dpop(), req.URL.String()) {
		// The upstream wants its DPoP nonce in the proof: once more with
		// it, same token (RFC 9449 section 9), if the body can be re-made.
		if body, ok := remake(req); ok {
			drain(resp)
			resp, err = t.send(req, body, tok, sub)
		}
	}
	if err == nil && resp.StatusCode == http.StatusForbidden {
		return t.forbidden(req, sub, tok, resp)
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// The upstream refused the token: the Source drops it, and the
	// request (not processed) goes once more with a new one, if its body
	// can be made again.
	t.src.Refused(req.Context(), sub, tok)
	body := io.ReadCloser(http.NoBody)
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return resp, nil
		}
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	again, err := t.src.Token(req.Context(), sub)
	if err != nil || again == tok {
		closeBody(body)
		if err != nil {
			drain(resp)
			return nil, t.failure(err)
		}
		return resp, nil
	}
	drain(resp)
	return t.send(req, body, again, sub)
}

// forbidden handles the upstream's 403 to tok: with a Bearer challenge
// error="insufficient_scope", a Source that can step up (a
// ScopeEscalator: per-user) answers the request with a new
// authorization link for the added scopes instead of the refusal; nil from
// it (nothing new to ask for) or any other 403 leaves the refusal as the
// upstream gave it.
func (t *sourceTransport) forbidden(req *http.Request, sub Subject, tok string, resp *http.Response) (*http.Response, error) {
	esc, ok := t.src.(ScopeEscalator)
	if !ok {
		return resp, nil
	}
	challenge := resp.Header.Values("WWW-Authenticate")
	if !oauthclient.ParseChallenge(challenge).InsufficientScope() {
		return resp, nil
	}
	if err := esc.InsufficientScope(req.Context(), sub, tok, challenge); err != nil {
		drain(resp)
		return nil, t.failure(err)
	}
	return resp, nil
}

// failure is a Source's error as the caller gets it: an authorization
// the user must give, or an exchange refusal, as it is; anything else as a
// *CredentialError naming the upstream.
func (t *sourceTransport) failure(err error) error {
	if cerr := Failure(err); cerr != nil {
		return cerr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &CredentialError{Upstream: t.upstream, Err: err}
}

// CredentialError is a Source's failure to provide a caller's upstream
// credential, other than an authorization the user must give.
type CredentialError struct {
	Upstream string
	Err      error
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("upstream %q: cannot obtain its credential for you: %v", e.Upstream, e.Err)
}

func (e *CredentialError) Unwrap() error { return e.Err }

func (t *sourceTransport) send(req *http.Request, body io.ReadCloser, tok string, sub Subject) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Body = body
	if tok != "" { // a forwarded-only source has none
		if err := presentToken(r, tok, t.dpop()); err != nil {
			closeBody(body)
			return nil, t.failure(err)
		}
	}
	t.forwardHeaders(r, sub) // forward.go
	return t.base.RoundTrip(r)
}

// dpop is the key the source's tokens are bound to, nil for bearer tokens.
func (t *sourceTransport) dpop() *oauthclient.DPoPKey {
	if b, ok := t.src.(dpopBound); ok {
		return b.DPoPKey()
	}
	return nil
}

// dpopBound is a Source whose tokens may be bound to a key of
// the gateway's (RFC 9449): the per-user source with dpop: true.
type dpopBound interface {
	DPoPKey() *oauthclient.DPoPKey
}

// presentToken sets r's Authorization to tok: "DPoP" with a fresh proof
// of key for this request (htm, htu, ath) when key is set, else "Bearer".
func presentToken(r *http.Request, tok string, key *oauthclient.DPoPKey) error {
	r.Header.Del("DPoP") // only the gateway's own proof goes out
	if key == nil {
		r.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}
	proof, err := key.Proof(r.Method, r.URL.String(), tok)
	if err != nil {
		return fmt.Errorf("signing the DPoP proof: %w", err)
	}
	r.Header.Set("Authorization", oauthclient.TokenTypeDPoP+" "+tok)
	r.Header.Set("DPoP", proof)
	return nil
}

// nonceChallenge remembers the DPoP nonce resp carries (key set) and
// reports whether resp is a use_dpop_nonce refusal with a nonce not sent
// before, which one retry may satisfy.
func nonceChallenge(resp *http.Response, key *oauthclient.DPoPKey, rawURL string) bool {
	if key == nil {
		return false
	}
	fresh := key.SetNonce(rawURL, resp.Header.Get("DPoP-Nonce"))
	return fresh && resp.StatusCode == http.StatusUnauthorized && oauthclient.IsNonceChallenge(resp.Header.Values("WWW-Authenticate"))
}

// remake is req's body anew for a retry (http.NoBody without one); false
// when it cannot be made again.
func remake(req *http.Request) (io.ReadCloser, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return http.NoBody, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	b, err := req.GetBody()
	return b, err == nil
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// Failure returns the credential error inside err (a Source's refusal),
// if there is one: it goes to the caller as it is, not as the upstream
// being unavailable.
func Failure(err error) error {
	var are *AuthorizationRequiredError
	if errors.As(err, &are) {
		return are
	}
	var ee *ExchangeError
	if errors.As(err, &ee) {
		return ee
	}
	var ce *CredentialError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
