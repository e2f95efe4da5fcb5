// Package peruser owns per-user upstream OAuth (upstreams.NAME.auth.per_user):
// the credentials.Source that gives each caller's upstream requests that
// caller's own access token, the gateway pages a user's browser visits to
// grant it (/oauth/upstream/NAME/start and /callback), the encrypted token
// store (a file or Redis) and revocation. The OAuth protocol itself (the
// authorization request, the token endpoint) is behind Client.
package peruser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

// Options configure one upstream's Source.
type Options struct {
	// Upstream is the upstream's name.
	Upstream string
	// PublicURL is the gateway's public_url: the start link and the
	// redirect URI are built on it.
	PublicURL string
	// Client speaks OAuth to the upstream's authorization server.
	Client Client
	// Backend keeps the sealed tokens; Once the used links and states.
	Backend Backend
	Once    Once
	// Keys is the session key ring (sessions.key_file), newest first.
	Keys [][]byte
	// LinkLifetime bounds a start link and the flow it begins (default 10m).
	LinkLifetime time.Duration
	// RefreshBefore is how long before its expiry an access token is
	// refreshed (default 1m).
	RefreshBefore time.Duration
	// MaxLinksPerPrincipal bounds the authorizations one principal may
	// have started on this replica and not finished within LinkLifetime
	// (default config.DefaultPerUserMaxLinksPerPrincipal).
	MaxLinksPerPrincipal int
	// OnComplete is told the elicitation id of a flow that stored tokens,
	// so the session that was sent the link can be told
	// (notifications/elicitation/complete). nil: nobody is told.
	OnComplete func(elicitationID string)
	// Browser is the gateway's browser session: with it, a start link
	// opens only in its principal's signed-in browser. nil: the link
	// alone is trusted (mcpgw validate warns).
	Browser BrowserUsers
	Clock   func() time.Time
	Logger  *zap.Logger
	Metrics *Metrics
}

// Source is an upstream's per-user credentials.Source. Safe for
// concurrent use.
type Source struct {
	o        Options
	tokens   *tokens
	links    *ring
	states   *ring
	redirect string
	start    string
	refresh  singleflight.Group // one refresh at a time per principal
	failures refreshFailures
	pending  pendingFlows
}

var (
	_ credentials.Source         = (*Source)(nil)
	_ credentials.ScopeEscalator = (*Source)(nil)
)

// New builds the Source of o.Upstream.
func New(o Options) (*Source, error) {
	if o.Client == nil || o.Backend == nil {
		return nil, errors.New("peruser: Client and Backend are required")
	}
	if o.Once == nil {
		o.Once = NewMemoryOnce(o.Clock)
	}
	if o.LinkLifetime <= 0 {
		o.LinkLifetime = config.DefaultPerUserLinkLifetime
	}
	if o.RefreshBefore <= 0 {
		o.RefreshBefore = time.Minute
	}
	if o.MaxLinksPerPrincipal <= 0 {
		o.MaxLinksPerPrincipal = config.DefaultPerUserMaxLinksPerPrincipal
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if _, err := url.Parse(o.PublicURL); err != nil || o.PublicURL == "" {
		return nil, fmt.Errorf("upstream %q: per-user authorization needs public_url; set it", o.Upstream)
	}
	records, err := newRing(o.Keys, purposeRecord)
	if err != nil {
		return nil, err
	}
	storeKeys, err := newKeyRing(o.Keys)
	if err != nil {
		return nil, err
	}
	links, _ := newRing(o.Keys, purposeLink)
	states, _ := newRing(o.Keys, purposeState)
	base := strings.TrimSuffix(o.PublicURL, "/")
	s := &Source{
		o:        o,
		tokens:   &tokens{b: o.Backend, ring: records, keys: storeKeys, upstream: o.Upstream},
		links:    links,
		states:   states,
		redirect: base + config.RedirectPath(o.Upstream),
		start:    base + config.StartPath(o.Upstream),
		failures: refreshFailures{n: map[string]int{}},
		pending:  pendingFlows{max: o.MaxLinksPerPrincipal, until: map[string][]time.Time{}},
	}
	if n, err := o.Backend.Len(context.Background()); err == nil {
		o.Metrics.held(o.Upstream, n)
	}
	return s, nil
}

// SetKeys rekeys what the source seals — start links, flow states and
// cookies, token records — when the session key ring is reread on a
// reload: sealed from now on with the new first key, opened with any key
// of the ring, so a rotation (new key first, old kept a while) loses no
// link, flow or stored token.
func (s *Source) SetKeys(keys [][]byte) error {
	for _, r := range []*ring{s.tokens.ring, s.links, s.states} {
		if err := r.rekey(keys); err != nil {
			return err
		}
	}
	return s.tokens.keys.rekey(keys)
}

// Kind implements credentials.Source.
func (s *Source) Kind() credentials.Kind { return credentials.KindPerUser }

// RedirectURI is the exact redirect URI to register with the
// authorization server.
func (s *Source) RedirectURI() string { return s.redirect }

// errNoPrincipal: per-user tokens belong to an authenticated caller
// (config refuses per_user without auth; this guards the code path).
func (s *Source) errNoPrincipal() error {
	return fmt.Errorf("upstream %q authorizes each caller with their own account, but this request has no authenticated principal; configure downstream auth (auth.oidc or auth.api_keys)", s.o.Upstream)
}

// Token implements credentials.Source: the subject's stored access token,
// refreshed shortly before it expires, or *credentials.AuthorizationRequiredError
// with a start link bound to the subject.
func (s *Source) Token(ctx context.Context, subj credentials.Subject) (string, error) {
	if subj.Principal == nil {
		return "", s.errNoPrincipal()
	}
	key := subj.Key()
	r, err := s.tokens.get(ctx, key)
	if err != nil {
		return "", s.unavailable(err)
	}
	if r == nil {
		return "", s.authorizationRequired(key, nil)
	}
	if r.Access != "" && !s.stale(r) {
		return r.Access, nil
	}
	if r.Refresh == "" {
		if r.Access != "" && s.o.Clock().Before(r.expiry()) {
			return r.Access, nil // stale but still valid, and nothing to refresh with
		}
		s.dropIf(ctx, r)
		return "", s.authorizationRequired(key, nil)
	}
	return s.refreshed(ctx, key, r.Access)
}

// stale reports whether r's access token is within RefreshBefore of its
// expiry (never, when the server gave none).
func (s *Source) stale(r *record) bool {
	return r.Expiry != 0 && !s.o.Clock().Add(s.o.RefreshBefore).Before(r.expiry())
}

// refreshed refreshes key's token, one refresh at a time per principal:
// callers that saw the same stale token share one refresh, and one that
// arrives after it finds the new token in the store.
func (s *Source) refreshed(ctx context.Context, key, seen string) (string, error) {
	v, err, _ := s.refresh.Do(key, func() (any, error) {
		// Detached from the first caller's cancellation: the others wait
		// for this refresh too, and a rotated refresh token must be stored.
		ctx := context.WithoutCancel(ctx)
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := s.tokens.get(ctx, key)
		if err != nil {
			return "", s.unavailable(err)
		}
		switch {
		case r == nil:
			return "", s.authorizationRequired(key, nil)
		case r.Access != "" && r.Access != seen && !s.stale(r):
			return r.Access, nil // refreshed meanwhile
		case r.Refresh == "":
			s.dropIf(ctx, r)
			return "", s.authorizationRequired(key, nil)
		}
		t, err := s.o.Client.Refresh(ctx, r.Grant, r.Refresh)
		if errors.Is(err, ErrInvalidGrant) {
			s.o.Metrics.refreshed(s.o.Upstream, "invalid_grant")
			// Only the record this refresh used goes: another replica may
			// have refreshed (rotating the refresh token, so this one's is
			// refused) and stored a good token meanwhile.
			if dropped := s.dropIf(ctx, r); !dropped {
				if now, err := s.tokens.get(ctx, key); err == nil && now != nil && now.Access != "" && now.Refresh != r.Refresh && !s.stale(now) {
					return now.Access, nil
				}
			}
			s.o.Logger.Info("per-user refresh token refused (invalid_grant); the user must authorize again", zap.String("upstream", s.o.Upstream))
			return "", s.authorizationRequired(key, nil)
		}
		if err != nil {
			s.o.Metrics.refreshed(s.o.Upstream, "error")
			if r.Access != "" && s.o.Clock().Before(r.expiry()) {
				s.o.Logger.Warn("per-user token refresh failed; using the current token until it expires", zap.String("upstream", s.o.Upstream), zap.Error(err))
				return r.Access, nil
			}
			if n := s.failures.add(key); n >= maxRefreshFailures {
				// The token has expired and refreshing keeps failing: a
				// new authorization is the way out, rather than an error
				// until someone revokes by hand. The record stays (a
				// refresh that works later, or the new grant, replaces it).
				s.o.Logger.Warn("per-user token refresh keeps failing; asking the user to authorize again", zap.String("upstream", s.o.Upstream), zap.Int("failures", n), zap.Error(err))
				return "", s.authorizationRequired(key, nil)
			}
			return "", fmt.Errorf("upstream %q: refreshing your authorization failed: %w; retry later", s.o.Upstream, err)
		}
		s.failures.reset(key)
		s.o.Metrics.refreshed(s.o.Upstream, "ok")
		nr := s.newRecord(key, t, r)
		nr.AfterRefusal = r.Access == "" // a refresh the upstream's refusal made: used once
		if err := s.tokens.put(ctx, nr); err != nil {
			return "", s.unavailable(err)
		}
		return nr.Access, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// newRecord makes the record of a token endpoint answer; a refresh that
// returned no new refresh token (or grant) keeps old's.
func (s *Source) newRecord(key string, t *Token, old *record) *record {
	r := &record{Access: t.AccessToken, Refresh: t.RefreshToken, Grant: t.Grant, Scopes: t.Scopes, Stored: s.o.Clock().Unix(), Principal: key, Upstream: s.o.Upstream}
	if old != nil {
		if len(r.Scopes) == 0 {
			r.Scopes = old.Scopes
		}
		if r.Refresh == "" {
			r.Refresh, r.RefreshExpiry = old.Refresh, old.RefreshExpiry
		}
		if len(r.Grant) == 0 {
			r.Grant = old.Grant
		}
	}
	if !t.Expiry.IsZero() {
		r.Expiry = t.Expiry.Unix()
	}
	return r
}

// Refused implements credentials.Source: the upstream answered 401 to
// token. It is dropped; the refresh token, if any, is used once (the next
// Token refreshes), and a token from such a refresh that is refused too
// drops the whole authorization.
func (s *Source) Refused(ctx context.Context, subj credentials.Subject, token string) {
	if subj.Principal == nil {
		return
	}
	// The upstream refused a token its authorization server issued: the
	// next authorization discovers the server anew (it may have moved).
	if f, ok := s.o.Client.(interface{ ForgetDiscoveries() }); ok {
		f.ForgetDiscoveries()
	}
	key := subj.Key()
	r, err := s.tokens.get(ctx, key)
	if err != nil || r == nil || r.Access != token {
		return // already replaced
	}
	if r.Refresh == "" || r.AfterRefusal {
		s.dropIf(ctx, r)
		return
	}
	r.Access, r.Expiry = "", 0
	if err := s.tokens.put(ctx, r); err != nil {
		s.drop(ctx, key)
	}
}

// Revoke drops principal's tokens (the principal's key, auth.Principal.Key).
func (s *Source) Revoke(ctx context.Context, principal string) (bool, error) {
	ok, err := s.tokens.drop(ctx, principal)
	s.count(ctx)
	return ok, err
}

func (s *Source) drop(ctx context.Context, key string) {
	if _, err := s.tokens.drop(ctx, key); err != nil {
		s.o.Logger.Warn("per-user token store: dropping a token failed", zap.String("upstream", s.o.Upstream), zap.Error(err))
	}
	s.count(ctx)
}

// dropIf drops r only if the store still holds it as read, and reports
// whether it did.
func (s *Source) dropIf(ctx context.Context, r *record) bool {
	ok, err := s.tokens.dropIf(ctx, r)
	if err != nil {
		s.o.Logger.Warn("per-user token store: dropping a token failed", zap.String("upstream", s.o.Upstream), zap.Error(err))
	}
	s.count(ctx)
	return ok
}

func (s *Source) count(ctx context.Context) {
	if n, err := s.o.Backend.Len(ctx); err == nil {
		s.o.Metrics.held(s.o.Upstream, n)
	}
}

func (s *Source) unavailable(err error) error {
	return fmt.Errorf("upstream %q: the per-user token store is unavailable: %w", s.o.Upstream, err)
}

// linkClaims is what a start link carries, sealed; a step-up link also
// the upstream's challenge and the scopes asked for before.
type linkClaims struct {
	Principal   string   `json:"p"`
	Elicitation string   `json:"e"`
	Expires     int64    `json:"x"`
	Nonce       string   `json:"n"`
	Challenge   []string `json:"c,omitempty"`
	Previous    []string `json:"s,omitempty"`
}

// stepUp is the StepUp a link's claims start (nil for a first
// authorization).
func (c linkClaims) stepUp() *StepUp {
	if len(c.Challenge) == 0 {
		return nil
	}
	return &StepUp{Challenge: c.Challenge, Previous: c.Previous}
}

func (s *Source) linkAD() []byte { return []byte(purposeLink + "\x00" + s.o.Upstream) }

// authorizationRequired hands out a fresh start link bound to key (a
// step-up link when step is not nil).
func (s *Source) authorizationRequired(key string, step *StepUp) error {
	c := linkClaims{Principal: key, Elicitation: randomID(16), Expires: s.o.Clock().Add(s.o.LinkLifetime).Unix(), Nonce: randomID(16)}
	if step != nil {
		c.Challenge, c.Previous = step.Challenge, step.Previous
	}
	plain, _ := json.Marshal(c)
	s.o.Metrics.flow(s.o.Upstream, "elicited")
	return &credentials.AuthorizationRequiredError{
		Upstream:      s.o.Upstream,
		URL:           s.start + "?t=" + s.links.sealString(plain, s.linkAD()),
		ElicitationID: c.Elicitation,
	}
}

const (
	// maxChallengeBytes bounds the challenge a step-up link carries (it
	// is in the link's URL); a larger one is not followed.
	maxChallengeBytes = 4096
	// maxStepUpScopes bounds the scopes one authorization asks for, so an
	// upstream naming ever new scopes cannot grow a grant without end.
	maxStepUpScopes = 64
)

// InsufficientScope implements credentials.ScopeEscalator: the upstream
// answered 403 insufficient_scope to token. When the challenge names a
// scope the subject's authorization did not ask for, the answer is a
// step-up link (*credentials.AuthorizationRequiredError) whose flow asks
// for the union of the previous scopes and the challenged ones; the stored
// token stays until that flow's token replaces it. When every challenged
// scope was asked for already, nil: a new consent cannot help, and
// offering it again would loop (the upstream's refusal stands).
func (s *Source) InsufficientScope(ctx context.Context, subj credentials.Subject, token string, challenge []string) error {
	if subj.Principal == nil {
		return s.errNoPrincipal()
	}
	ch := oauthclient.ParseChallenge(challenge)
	if !ch.InsufficientScope() || len(ch.Scopes) == 0 {
		return nil // nothing to ask for
	}
	key := subj.Key()
	r, err := s.tokens.get(ctx, key)
	switch {
	case err != nil:
		return s.unavailable(err)
	case r == nil:
		return s.authorizationRequired(key, nil)
	case r.Access != token:
		return nil // replaced meanwhile (a step-up completed): the caller's retry uses the new token
	}
	want := union(r.Scopes, ch.Scopes)
	switch {
	case len(want) == len(r.Scopes):
		s.o.Metrics.flow(s.o.Upstream, "step_up_refused")
		s.o.Logger.Info("per-user step-up not offered: the upstream refuses with insufficient_scope for scopes the authorization already asked for", zap.String("upstream", s.o.Upstream), zap.Strings("scopes", ch.Scopes))
		return nil
	case len(want) > maxStepUpScopes:
		s.o.Metrics.flow(s.o.Upstream, "step_up_refused")
		return fmt.Errorf("upstream %q asks for more scopes than one authorization may hold (%d, at most %d); not asking for more", s.o.Upstream, len(want), maxStepUpScopes)
	}
	n := 0
	for _, v := range challenge {
		n += len(v)
	}
	if n > maxChallengeBytes {
		s.o.Metrics.flow(s.o.Upstream, "step_up_refused")
		return fmt.Errorf("upstream %q: its insufficient_scope challenge is %d bytes, more than the %d a step-up follows; not asking for more scopes", s.o.Upstream, n, maxChallengeBytes)
	}
	s.o.Metrics.flow(s.o.Upstream, "step_up")
	return s.authorizationRequired(key, &StepUp{Challenge: challenge, Previous: r.Scopes})
}

// maxRefreshFailures is how many refreshes of an expired token may fail
// in a row (the server down or answering nonsense, not invalid_grant)
// before the user is asked to authorize again.
const maxRefreshFailures = 3

// maxFailureEntries bounds the principals whose failures are counted;
// when full the counts start over (a user is then asked a little later).
const maxFailureEntries = 10000

// refreshFailures counts each principal's failed refreshes in a row, on
// this replica.
type refreshFailures struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *refreshFailures) add(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.n[key]; !ok && len(f.n) >= maxFailureEntries {
		clear(f.n)
	}
	f.n[key]++
	return f.n[key]
}

func (f *refreshFailures) reset(key string) {
	f.mu.Lock()
	delete(f.n, key)
	f.mu.Unlock()
}

// maxPendingFlows bounds the started flows remembered on a replica, all
// principals together (as many as used links are: maxUsed).
const maxPendingFlows = maxUsed

// pendingFlows counts each principal's started, unfinished flows on this
// replica, so one principal cannot use up the replica's memory of used
// links (or its authorization server's patience) for everyone.
type pendingFlows struct {
	max   int
	mu    sync.Mutex
	n     int                    // entries in until, all principals
	until map[string][]time.Time // principal → when each started flow expires
}

// start records a flow of principal expiring at exp, or reports false
// when the principal has max under way (or the replica its bound).
func (p *pendingFlows) start(principal string, now, exp time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.prune(principal, now)
	if len(live) >= p.max {
		return false
	}
	if p.n >= maxPendingFlows {
		for k := range p.until {
			p.prune(k, now)
		}
		if p.n >= maxPendingFlows {
			return false
		}
	}
	p.until[principal] = append(live, exp)
	p.n++
	return true
}

// done forgets one of principal's flows (the one expiring first).
func (p *pendingFlows) done(principal string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if live := p.prune(principal, now); len(live) > 0 {
		p.set(principal, live[1:])
		p.n--
	}
}

// prune drops principal's expired flows and returns the live ones. p.mu held.
func (p *pendingFlows) prune(principal string, now time.Time) []time.Time {
	all := p.until[principal]
	live := all[:0]
	for _, t := range all {
		if now.Before(t) {
			live = append(live, t)
		}
	}
	p.n -= len(all) - len(live)
	p.set(principal, live)
	return live
}

func (p *pendingFlows) set(principal string, live []time.Time) {
	if len(live) == 0 {
		delete(p.until, principal)
		return
	}
	p.until[principal] = live
}
