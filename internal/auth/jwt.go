package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/principal"
)

const (
	fetchTimeout = 10 * time.Second
	maxDocument  = 1 << 20 // discovery document or JWKS
	maxToken     = 16 << 10
)

// issuer is one configured token issuer. Its discovery document is read on
// first use (and retried after failures), so the gateway starts even when
// the identity provider is briefly unreachable; tokens of that issuer are
// refused with 503 meanwhile.
type issuer struct {
	cfg      *config.OIDC
	algs     []jose.SignatureAlgorithm
	client   *http.Client
	now      func() time.Time
	keysOpts keySet // template: minRefresh, maxAge
	// local holds the keys of the gateway's own issuer (LocalIssuer):
	// no discovery, no fetch.
	local oidc.KeySet

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	keys     *keySet
	lastTry  time.Time
	lastErr  error
}

func newIssuer(cfg *config.OIDC, client *http.Client, now func() time.Time, minRefresh, maxAge time.Duration) *issuer {
	algs := make([]jose.SignatureAlgorithm, len(cfg.Algorithms))
	for i, a := range cfg.Algorithms {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return &issuer{
		cfg:      cfg,
		algs:     algs,
		client:   client,
		now:      now,
		keysOpts: keySet{minRefresh: minRefresh, maxAge: maxAge},
	}
}

// getVerifier returns the issuer's go-oidc verifier, discovering the
// issuer first if needed.
func (is *issuer) getVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.verifier != nil {
		return is.verifier, nil
	}
	if is.lastErr != nil && is.now().Sub(is.lastTry) < is.keysOpts.minRefresh {
		return nil, is.lastErr
	}
	if is.local != nil {
		is.verifier = oidc.NewVerifier(is.cfg.Issuer, is.local, &oidc.Config{SupportedSigningAlgs: is.cfg.Algorithms, SkipClientIDCheck: true, SkipExpiryCheck: true})
		return is.verifier, nil
	}
	is.lastTry = is.now()
	jwksURL := is.cfg.JWKSURL
	if jwksURL == "" {
		// Discovery checks that the document names this issuer.
		dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), is.client), fetchTimeout)
		defer cancel()
		p, err := oidc.NewProvider(dctx, is.cfg.Issuer)
		if err != nil {
			is.lastErr = fmt.Errorf("OIDC discovery of %s failed: %w", is.cfg.Issuer, err)
			return nil, is.lastErr
		}
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := p.Claims(&doc); err != nil || doc.JWKSURI == "" {
			is.lastErr = fmt.Errorf("the discovery document of %s has no jwks_uri", is.cfg.Issuer)
			return nil, is.lastErr
		}
		jwksURL = doc.JWKSURI
	}
	ks := &keySet{
		url:        jwksURL,
		client:     is.client,
		algs:       is.algs,
		minRefresh: is.keysOpts.minRefresh,
		maxAge:     is.keysOpts.maxAge,
		now:        is.now,
	}
	is.keys = ks
	is.verifier = oidc.NewVerifier(is.cfg.Issuer, ks, &oidc.Config{
		SupportedSigningAlgs: is.cfg.Algorithms,
		// Audience, exp and nbf are checked by verify, with the
		// configured leeway and typed errors.
		SkipClientIDCheck: true,
		SkipExpiryCheck:   true,
	})
	is.lastErr = nil
	return is.verifier, nil
}

// claims are the access token claims mcpgw reads (RFC 9068, RFC 8693).
type claims struct {
	Issuer   string          `json:"iss"`
	Subject  string          `json:"sub"`
	Audience json.RawMessage `json:"aud"`
	Expiry   *json.Number    `json:"exp"`
	NotAfter *json.Number    `json:"nbf"`
	IssuedAt *json.Number    `json:"iat"`
	Scope    json.RawMessage `json:"scope"`
	Scp      json.RawMessage `json:"scp"`
	ClientID string          `json:"client_id"`
	AZP      string          `json:"azp"`
}

// peek reads a JWT's header alg and payload iss without verifying
// anything, to choose the issuer and refuse bad algorithms early with a
// precise reason.
func peek(token string) (alg, iss string, err *Error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", errorf(Malformed, "the bearer token is not a JWT (header.payload.signature) nor a configured API key")
	}
	h, e1 := base64.RawURLEncoding.DecodeString(parts[0])
	p, e2 := base64.RawURLEncoding.DecodeString(parts[1])
	if e1 != nil || e2 != nil {
		return "", "", errorf(Malformed, "the JWT is not base64url encoded")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var pl struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(h, &hdr) != nil || json.Unmarshal(p, &pl) != nil {
		return "", "", errorf(Malformed, "the JWT header or payload is not a JSON object")
	}
	return hdr.Alg, pl.Iss, nil
}

// verify checks a JWT of this issuer and returns its principal.
func (is *issuer) verify(ctx context.Context, token, alg string, audiences []string) (*Principal, *cachedToken, *Error) {
	if !slices.Contains(is.cfg.Algorithms, alg) {
		return nil, nil, errorf(AlgorithmNotAllowed, fmt.Sprintf("the token is signed with %q, which is not allowed (allowed: %s)", quoteDetail(alg), strings.Join(is.cfg.Algorithms, ", ")))
	}
	v, err := is.getVerifier(ctx)
	if err != nil {
		return nil, nil, errorf(Unavailable, err.Error())
	}
	var slot *keyError
	tok, err := v.Verify(context.WithValue(ctx, keyErrSlot{}, &slot), token)
	if err != nil {
		if slot != nil {
			return nil, nil, errorf(slot.reason, slot.detail)
		}
		if strings.Contains(err.Error(), "issued by a different provider") {
			return nil, nil, errorf(UnknownIssuer, "the token's iss does not match the issuer")
		}
		return nil, nil, errorf(Malformed, "the token cannot be read: "+strings.TrimPrefix(err.Error(), "oidc: "))
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return nil, nil, errorf(Malformed, "the token's claims cannot be read")
	}
	now := is.now()
	leeway := is.cfg.Leeway.D()
	exp, ok := numericDate(c.Expiry)
	switch {
	case !ok:
		return nil, nil, errorf(Expired, "the token has no valid exp claim; access tokens must expire")
	case now.After(exp.Add(leeway)):
		return nil, nil, errorf(Expired, fmt.Sprintf("the token expired at %s", exp.UTC().Format(time.RFC3339)))
	}
	nbf, hasNBF := numericDate(c.NotAfter)
	if hasNBF && now.Add(leeway).Before(nbf) {
		return nil, nil, errorf(NotYetValid, fmt.Sprintf("the token is not valid before %s", nbf.UTC().Format(time.RFC3339)))
	} else if c.NotAfter != nil && !hasNBF {
		return nil, nil, errorf(Malformed, "the token's nbf claim is not a number")
	}
	if iat, ok := numericDate(c.IssuedAt); ok && now.Add(leeway).Before(iat) {
		return nil, nil, errorf(NotYetValid, fmt.Sprintf("the token was issued in the future (%s); check the clocks", iat.UTC().Format(time.RFC3339)))
	}
	aud, ok := stringOrList(c.Audience)
	if !ok {
		return nil, nil, errorf(Malformed, "the token's aud claim is not a string or a list of strings")
	}
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(audiences, a) }) {
		shown := make([]string, 0, len(aud))
		for i, a := range aud {
			if i == 5 {
				shown = append(shown, "...")
				break
			}
			shown = append(shown, quoteDetail(a))
		}
		return nil, nil, errorf(WrongAudience, fmt.Sprintf("the token is for [%s], not this resource (%s)", strings.Join(shown, " "), audiences[len(audiences)-1]))
	}
	if c.Subject == "" {
		return nil, nil, errorf(Malformed, "the token has no sub claim")
	}
	p := &Principal{
		Subject:  c.Subject,
		Issuer:   c.Issuer,
		ClientID: c.ClientID,
		Expiry:   exp,
	}
	p.SetBearerToken(token) // a cached principal is found by this token's hash only
	if p.ClientID == "" {
		p.ClientID = c.AZP
	}
	// scope is a space-separated string (RFC 8693, RFC 9068); scp is a
	// list (Okta, Ping) or, from Entra ID, a space-separated string.
	for _, raw := range []json.RawMessage{c.Scope, c.Scp} {
		if list, ok := stringOrList(raw); ok {
			for _, s := range list {
				p.Scopes = append(p.Scopes, strings.Fields(s)...)
			}
		}
	}
	p.Groups = groups(tok, is.cfg.GroupsClaim)
	var all map[string]any
	if tok.Claims(&all) == nil {
		p.Claims = all // for policy conditions (principal.claims in CEL)
	}
	p.PreparedClaims = principal.NewClaims(p.Claims) // the cache shares p: converted once per token
	entry := &cachedToken{principal: p, issuer: is, aud: aud, notBefore: nbf, until: now.Add(tokenCacheTTL), keyGen: is.keyGen()}
	return p, entry, nil
}

// groups reads the groups claim: a top-level claim by its full name
// ("groups", "https://example.com/groups", "cognito:groups"), else a dotted
// path into nested objects ("realm_access.roles"). A string counts as one
// group; anything else yields none.
func groups(tok *oidc.IDToken, path string) []string {
	var all map[string]json.RawMessage
	if tok.Claims(&all) != nil {
		return nil
	}
	list, _ := stringOrList(claimAt(all, path)) // introspection.go
	return list
}

// stringOrList reads a JSON string or array of strings; null or absent is
// an empty list.
func stringOrList(raw json.RawMessage) ([]string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, true
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list, true
	}
	return nil, false
}

// numericDate reads a JWT NumericDate (seconds, possibly fractional).
func numericDate(n *json.Number) (time.Time, bool) {
	if n == nil {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// keyGen is the generation of the issuer's keys: it changes whenever they
// are fetched again, which invalidates cached tokens (a withdrawn key's
// tokens must stop working).
func (is *issuer) keyGen() uint64 {
	is.mu.Lock()
	ks := is.keys
	is.mu.Unlock()
	if ks == nil {
		return 0
	}
	return ks.gen.Load()
}
