package auth

// RFC 7662 token introspection: opaque bearer tokens (anything that is not
// a JWT of a configured issuer) are checked at the authorization server's
// introspection endpoint (config auth.introspection). An active answer is
// cached per token until the token's exp, so a client sending the same
// token with every request costs one introspection call per token.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/outbound"
	"github.com/mcpgw/mcpgw/internal/principal"
)

const (
	// introspectionInactiveTTL caches an inactive answer, so a client
	// retrying a dead token does not turn into a stream of calls.
	introspectionInactiveTTL = 10 * time.Second
	// introspectionLeeway tolerates clock skew on exp and nbf.
	introspectionLeeway = 30 * time.Second
)

type introspector struct {
	cfg    *config.Introspection
	secret string
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*introspected
	// calls joins concurrent cache misses for one token into one call to
	// the endpoint: a client that opens many requests at once with a new
	// token must not turn into as many introspections.
	calls singleflight.Group
}

// introspected is a cached answer: a principal, or the refusal.
type introspected struct {
	principal *Principal
	aud       []string
	notBefore time.Time
	until     time.Time
	refusal   *Error
}

func newIntrospector(cfg *config.Introspection, opts Options) (*introspector, error) {
	secret := cfg.ClientSecret
	if cfg.ClientSecretFile != "" {
		b, err := opts.ReadFile(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("auth.introspection: cannot read client_secret_file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" {
		return nil, fmt.Errorf("auth.introspection: the client secret is empty; put the secret the introspection endpoint expects in it")
	}
	return &introspector{cfg: cfg, secret: secret, client: outbound.NoRedirects(opts.HTTPClient), now: opts.Now, entries: map[[sha256.Size]byte]*introspected{}}, nil
}

// introspectionAnswer is the part of an RFC 7662 answer the gateway reads.
type introspectionAnswer struct {
	Active    bool            `json:"active"`
	Scope     string          `json:"scope"`
	ClientID  string          `json:"client_id"`
	Username  string          `json:"username"`
	TokenType string          `json:"token_type"`
	Expiry    *json.Number    `json:"exp"`
	NotBefore *json.Number    `json:"nbf"`
	Subject   string          `json:"sub"`
	Audience  json.RawMessage `json:"aud"`
	Issuer    string          `json:"iss"`
}

// check returns the principal of token (whose SHA-256 is h) if the
// introspection endpoint says it is active and it is for one of audiences.
func (in *introspector) check(ctx context.Context, token string, h [sha256.Size]byte, audiences []string) (*Principal, *Error) {
	now := in.now()
	in.mu.Lock()
	e := in.entries[h]
	in.mu.Unlock()
	if e == nil || !now.Before(e.until) {
		v, _, _ := in.calls.Do(string(h[:]), func() (any, error) {
			// Not cancelled with the first caller: the others wait on it.
			e, err := in.introspect(context.WithoutCancel(ctx), token, now)
			if err == nil {
				in.put(h, e)
			}
			return introspection{e, err}, nil
		})
		r := v.(introspection)
		if r.err != nil {
			return nil, r.err
		}
		e = r.entry
	}
	if e.refusal != nil {
		return nil, e.refusal
	}
	if now.Add(introspectionLeeway).Before(e.notBefore) {
		return nil, errorf(NotYetValid, fmt.Sprintf("the token is not valid before %s", e.notBefore.UTC().Format(time.RFC3339)))
	}
	if !slices.ContainsFunc(e.aud, func(a string) bool { return slices.Contains(audiences, a) }) {
		shown := make([]string, 0, len(e.aud))
		for i, a := range e.aud {
			if i == 5 {
				shown = append(shown, "...")
				break
			}
			shown = append(shown, quoteDetail(a))
		}
		return nil, errorf(WrongAudience, fmt.Sprintf("the token is for [%s], not this resource (%s)", strings.Join(shown, " "), audiences[len(audiences)-1]))
	}
	return e.principal, nil
}

// introspection is one endpoint call's outcome, shared by the callers
// singleflight joined.
type introspection struct {
	entry *introspected
	err   *Error
}

// introspect asks the endpoint about token. An *Error with reason
// Unavailable (503) is returned, and nothing cached, when the endpoint
// cannot answer.
func (in *introspector) introspect(ctx context.Context, token string, now time.Time) (*introspected, *Error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.cfg.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errorf(Unavailable, "token introspection: "+err.Error())
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 section 2.3.1: form-encode, then Basic.
	req.SetBasicAuth(url.QueryEscape(in.cfg.ClientID), url.QueryEscape(in.secret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, errorf(Unavailable, fmt.Sprintf("token introspection at %s failed: %v", in.cfg.URL, unwrapURLError(err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil || len(body) > maxDocument {
		return nil, errorf(Unavailable, fmt.Sprintf("token introspection at %s: the answer could not be read", in.cfg.URL))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorf(Unavailable, fmt.Sprintf("token introspection at %s answered HTTP %d; check auth.introspection.client_id and the secret", in.cfg.URL, resp.StatusCode))
	}
	var a introspectionAnswer
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		return nil, errorf(Unavailable, fmt.Sprintf("token introspection at %s answered something that is not an introspection response", in.cfg.URL))
	}
	refuse := func(ttl time.Duration, r Reason, detail string) (*introspected, *Error) {
		return &introspected{refusal: errorf(r, detail), until: now.Add(ttl)}, nil
	}
	if !a.Active {
		return refuse(introspectionInactiveTTL, Inactive, "the token is not active (revoked, expired or unknown to the authorization server)")
	}
	if a.TokenType != "" && !strings.EqualFold(a.TokenType, "Bearer") && !strings.EqualFold(a.TokenType, "access_token") {
		return refuse(introspectionInactiveTTL, Malformed, fmt.Sprintf("the token is a %q token, not a bearer access token", quoteDetail(a.TokenType)))
	}
	// The cache's life is the revocation delay: the endpoint is the only
	// one who knows a token was revoked, so it is asked again after
	// cache_ttl whatever the token's exp says.
	e := &introspected{until: now.Add(in.cfg.CacheTTL.D())}
	var exp time.Time
	if a.Expiry != nil {
		var ok bool
		if exp, ok = numericDate(a.Expiry); !ok {
			return refuse(introspectionInactiveTTL, Malformed, "the introspection answer's exp is not a number")
		}
		if now.After(exp.Add(introspectionLeeway)) {
			return refuse(introspectionInactiveTTL, Expired, fmt.Sprintf("the token expired at %s", exp.UTC().Format(time.RFC3339)))
		}
		if end := exp.Add(introspectionLeeway); end.Before(e.until) {
			e.until = end
		}
	}
	if a.NotBefore != nil {
		nbf, ok := numericDate(a.NotBefore)
		if !ok {
			return refuse(introspectionInactiveTTL, Malformed, "the introspection answer's nbf is not a number")
		}
		e.notBefore = nbf
	}
	aud, ok := stringOrList(a.Audience)
	if !ok {
		return refuse(introspectionInactiveTTL, Malformed, "the introspection answer's aud is not a string or a list of strings")
	}
	e.aud = aud
	p := &Principal{Subject: a.Subject, Issuer: a.Issuer, ClientID: a.ClientID, Expiry: exp, Scopes: strings.Fields(a.Scope),
		PreparedClaims: principal.NewClaims(nil)}
	p.SetBearerToken(token)
	if p.Subject == "" {
		p.Subject = a.ClientID // a client-credentials token: the client is the caller
	}
	if p.Subject == "" {
		return refuse(introspectionInactiveTTL, Malformed, "the introspection answer names neither sub nor client_id, so the caller is unknown")
	}
	if p.Issuer == "" {
		p.Issuer = in.cfg.URL
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(body, &all) == nil {
		claim := in.cfg.GroupsClaim
		if claim == "" {
			claim = config.DefaultGroupsClaim
		}
		p.Groups, _ = stringOrList(claimAt(all, claim))
	}
	e.principal = p
	return e, nil
}

func (in *introspector) put(h [sha256.Size]byte, e *introspected) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.entries) >= tokenCacheSize {
		now := in.now()
		for k, old := range in.entries {
			if !now.Before(old.until) {
				delete(in.entries, k)
			}
		}
		n := tokenCacheSize / 10
		for k := range in.entries {
			if len(in.entries) < tokenCacheSize-n {
				break
			}
			delete(in.entries, k)
		}
	}
	in.entries[h] = e
}

// claimAt finds a claim by its full name, else by a dotted path into
// nested objects ("realm_access.roles").
func claimAt(all map[string]json.RawMessage, path string) json.RawMessage {
	if raw, ok := all[path]; ok {
		return raw
	}
	obj := all
	parts := strings.Split(path, ".")
	for i, part := range parts {
		v, found := obj[part]
		if !found {
			return nil
		}
		if i == len(parts)-1 {
			return v
		}
		obj = nil
		if json.Unmarshal(v, &obj) != nil {
			return nil
		}
	}
	return nil
}

// unwrapURLError drops the "Post URL:" prefix net/http adds (the message
// names the URL already).
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
