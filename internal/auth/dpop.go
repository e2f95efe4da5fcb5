package auth

// DPoP-bound access tokens (RFC 9449) on the downstream side. A JWT whose
// cnf.jkt names a key is bound to it: it is accepted only as
// "Authorization: DPoP <token>" with exactly one DPoP header holding a
// proof signed by that key for this request — typ dpop+jwt, an allowed
// asymmetric alg, a public jwk, htm the request's method, htu its URL
// (public_url and path; no query), iat within auth.dpop.proof_lifetime of
// now, ath the token's hash, a jti not seen before (a bounded cache
// remembers them for twice the lifetime), and with auth.dpop.nonce a
// current nonce of the gateway's. A bound token presented as Bearer, or
// the DPoP scheme with a token that is not bound, is refused; a route with
// require_dpop refuses everything but a proven bound token. Refusals
// carry a DPoP challenge (algs, and the error) instead of, or beside, the
// Bearer one.

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/config"
)

// DPoP refusal reasons.
const (
	// InvalidDPoPProof: the DPoP proof is missing, malformed, for another
	// request, too old, replayed, or not by the token's key.
	InvalidDPoPProof Reason = "invalid_dpop_proof"
	// UseDPoPNonce: the proof lacks the gateway's current nonce
	// (auth.dpop.nonce); the refusal carries one to retry with.
	UseDPoPNonce Reason = "use_dpop_nonce"
)

// forwardedHeader marks a request one replica passed to another
// (router/streamable's bridgeforward.go names it too).
const forwardedHeader = "Mcp-Gateway-Forwarded"

// maxProof bounds a DPoP header.
const maxProof = 8 << 10

// dpopChecker checks proofs. Safe for concurrent use.
type dpopChecker struct {
	algs     []jose.SignatureAlgorithm
	lifetime time.Duration
	nonces   bool
	nonceKey []byte // random per process: nonces are this replica's own
	seen     *jtiCache
	shared   ReplayStore // the fleet's (sessions.redis), instead of seen; nil without
}

func newDPoPChecker(cfg config.DPoP) *dpopChecker {
	c := &dpopChecker{lifetime: cfg.ProofLifetime.D(), nonces: cfg.Nonce, seen: newJTICache(cfg.MaxReplayEntries)}
	for _, a := range cfg.Algorithms {
		c.algs = append(c.algs, jose.SignatureAlgorithm(a))
	}
	if c.nonces {
		c.nonceKey = make([]byte, 32)
		if _, err := rand.Read(c.nonceKey); err != nil {
			panic("auth: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
		}
	}
	return c
}

// scheme is the Authorization scheme of r, lower-cased ("" without one).
func scheme(r *http.Request) string {
	s, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return strings.ToLower(s)
}

// boundKey is the JWK thumbprint a token principal is bound to (cnf.jkt),
// "" for an unbound token; false for a cnf.jkt that is not a non-empty
// string (refused: it must not read as unbound).
func boundKey(p *Principal) (string, bool) {
	cnf, _ := p.Claims["cnf"].(map[string]any)
	v, has := cnf["jkt"]
	if !has {
		return "", true
	}
	jkt, _ := v.(string)
	return jkt, jkt != ""
}

// checkDPoP applies the DPoP rules to a principal Authenticate found for
// r (see the file comment) and returns the principal to use.
func (a *Authenticator) checkDPoP(r *http.Request, p *Principal) (*Principal, error) {
	jkt, ok := boundKey(p)
	if !ok {
		return nil, &Error{Reason: Malformed, DPoP: true, Detail: "the token's cnf.jkt is not a key thumbprint (a non-empty string)"}
	}
	if scheme(r) != "dpop" {
		// Bearer, X-API-Key, a client certificate: fine for an unbound
		// token, never for a bound one.
		if jkt != "" {
			return nil, &Error{Reason: Malformed, DPoP: true, Detail: "the token is DPoP-bound; present it as Authorization: DPoP with a DPoP proof, not as Bearer"}
		}
		return p, nil
	}
	if jkt == "" {
		what := "the token is not DPoP-bound (it has no cnf.jkt)"
		if p.APIKey != "" {
			what = "an API key is not DPoP-bound"
		}
		return nil, &Error{Reason: Malformed, DPoP: true, Detail: what + "; present it as Authorization: Bearer"}
	}
	if a.dpop == nil { // an Authenticator not made by New: fail closed
		return nil, &Error{Reason: InvalidDPoPProof, DPoP: true, Detail: "DPoP proofs are not checked here"}
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		return nil, &Error{Reason: InvalidDPoPProof, DPoP: true, Detail: fmt.Sprintf("exactly one DPoP header with a proof is required, got %d", len(proofs))}
	}
	// A bridged retry another replica passed on (router/streamable's
	// bridgeforward.go) carries the proof that replica already recorded
	// in the fleet's store: it is checked against this replica's own
	// cache only (see docs/security.md for what that allows).
	local := r.Header.Get(forwardedHeader) != ""
	if err := a.dpop.check(r.Context(), proofs[0], r.Method, a.htu(r), p.BearerToken(), jkt, a.now(), local); err != nil {
		return nil, err
	}
	return p.WithDPoPKey(jkt), nil // p is shared: a copy
}

// htu is the URL a proof for r must name: the request's path under
// public_url (as Resource makes a route's), or without public_url the
// URL the request reached.
func (a *Authenticator) htu(r *http.Request) string {
	if a.publicURL != "" {
		return a.Resource(r.URL.Path)
	}
	sch := "http"
	if r.TLS != nil {
		sch = "https"
	}
	return sch + "://" + r.Host + r.URL.Path
}

// sameURL compares two URLs as RFC 9449 section 4.3 says: scheme and host
// case-insensitively, default ports dropped, no query or fragment.
func sameURL(a, b string) bool {
	norm := func(s string) string {
		u, err := url.Parse(s)
		if err != nil || u.RawQuery != "" || u.Fragment != "" {
			return "\x00" + s // never equal to a normalised URL
		}
		host := strings.ToLower(u.Host)
		sch := strings.ToLower(u.Scheme)
		host = strings.TrimSuffix(host, map[string]string{"https": ":443", "http": ":80"}[sch])
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		return sch + "://" + host + path
	}
	return norm(a) == norm(b)
}

// check verifies proof for a request of method to htu presenting token,
// which is bound to key thumbprint jkt.
func (c *dpopChecker) check(ctx context.Context, proof, method, htu, token, jkt string, now time.Time, local bool) *Error {
	bad := func(format string, args ...any) *Error {
		return &Error{Reason: InvalidDPoPProof, DPoP: true, Detail: fmt.Sprintf(format, args...)}
	}
	if len(proof) > maxProof {
		return bad("the DPoP proof is longer than %d bytes", maxProof)
	}
	sig, err := jose.ParseSigned(proof, c.algs)
	if err != nil {
		return bad("the DPoP proof is not a JWS signed with an accepted algorithm (%s)", c.algList())
	}
	if len(sig.Signatures) != 1 {
		return bad("the DPoP proof must have exactly one signature")
	}
	h := sig.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders["typ"].(string); typ != "dpop+jwt" {
		return bad("the DPoP proof's typ must be dpop+jwt")
	}
	if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() || !h.JSONWebKey.Valid() {
		return bad("the DPoP proof's jwk header must be a public key")
	}
	payload, err := sig.Verify(h.JSONWebKey)
	if err != nil {
		return bad("the DPoP proof's signature does not verify with its jwk")
	}
	tp, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil || !hmac.Equal([]byte(base64.RawURLEncoding.EncodeToString(tp)), []byte(jkt)) {
		return bad("the DPoP proof is signed by another key than the one the token is bound to")
	}
	var cl struct {
		JTI   string      `json:"jti"`
		HTM   string      `json:"htm"`
		HTU   string      `json:"htu"`
		IAT   json.Number `json:"iat"`
		ATH   string      `json:"ath"`
		Nonce *string     `json:"nonce"`
	}
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&cl); err != nil {
		return bad("the DPoP proof's claims are unreadable")
	}
	iat, ierr := cl.IAT.Int64()
	switch {
	case cl.JTI == "" || len(cl.JTI) > 256:
		return bad("the DPoP proof needs a jti (at most 256 characters)")
	case cl.HTM != method:
		return bad("the DPoP proof is for method %q, not this %s", quoteDetail(cl.HTM), method)
	case !sameURL(cl.HTU, htu):
		return bad("the DPoP proof is for %q, not %s", quoteDetail(cl.HTU), htu)
	case ierr != nil:
		return bad("the DPoP proof needs iat, a number")
	case now.Sub(time.Unix(iat, 0)).Abs() > c.lifetime:
		return bad("the DPoP proof's iat is more than %s from the gateway's time; make a fresh proof (and check the client's clock)", c.lifetime)
	}
	sum := sha256.Sum256([]byte(token))
	if !hmac.Equal([]byte(cl.ATH), []byte(base64.RawURLEncoding.EncodeToString(sum[:]))) {
		return bad("the DPoP proof's ath is not the hash of the token presented")
	}
	if c.nonces && (cl.Nonce == nil || !c.validNonce(*cl.Nonce, now)) {
		return &Error{Reason: UseDPoPNonce, DPoP: true, Detail: "a DPoP proof with the gateway's nonce is required; retry with the DPoP-Nonce given", Nonce: c.nonce(now)}
	}
	switch c.remember(ctx, jkt, cl.JTI, now, local) {
	case jtiUnchecked:
		return &Error{Reason: Unavailable, DPoP: true, Detail: "the DPoP replay cache (sessions.redis) cannot be reached, so the proof cannot be checked; retry shortly"}
	case jtiReplayed:
		return bad("the DPoP proof was used before; make a fresh proof (new jti) for each request")
	case jtiFull:
		return &Error{Reason: Unavailable, DPoP: true, Detail: fmt.Sprintf("too many DPoP proofs to remember against replay (auth.dpop.max_replay_entries, %d); retry shortly, or raise it", c.seen.max)}
	}
	return nil
}

// remember records a proof's jti (by its key's thumbprint, so one
// client cannot use up another's) in the fleet's store, else locally.
func (c *dpopChecker) remember(ctx context.Context, jkt, jti string, now time.Time, local bool) jtiResult {
	sum := sha256.Sum256([]byte(jkt + "\x00" + jti))
	id := string(sum[:])
	until := now.Add(2 * c.lifetime)
	if c.shared == nil || local {
		return c.seen.add(id, until, now)
	}
	fresh, err := c.shared.Remember(ctx, id, until)
	switch {
	case err != nil:
		return jtiUnchecked // fail closed
	case !fresh:
		return jtiReplayed
	}
	return jtiNew
}

func (c *dpopChecker) algList() string {
	s := make([]string, len(c.algs))
	for i, a := range c.algs {
		s[i] = string(a)
	}
	return strings.Join(s, " ")
}

// nonce is the gateway's current nonce: the time window it was made in
// and a MAC of it, so any replica-local check needs no state.
func (c *dpopChecker) nonce(now time.Time) string {
	return c.nonceAt(now.Unix() / int64(c.lifetime.Seconds()+1))
}

func (c *dpopChecker) nonceAt(window int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(window))
	m := hmac.New(sha256.New, c.nonceKey)
	m.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(append(b[:], m.Sum(nil)[:16]...))
}

// validNonce accepts this window's nonce and the previous one's.
func (c *dpopChecker) validNonce(n string, now time.Time) bool {
	w := now.Unix() / int64(c.lifetime.Seconds()+1)
	return hmac.Equal([]byte(n), []byte(c.nonceAt(w))) || hmac.Equal([]byte(n), []byte(c.nonceAt(w-1)))
}

// DPoPChallenge is the WWW-Authenticate value of the DPoP scheme answering
// err on the route at path (RFC 9449 section 7.1): the accepted
// algorithms, where the metadata is, and the error when the refusal is
// about DPoP.
func (a *Authenticator) DPoPChallenge(err *Error, path string) string {
	var params []string
	if a.dpop != nil {
		params = append(params, `algs="`+a.dpop.algList()+`"`)
	}
	if u := a.MetadataURL(path); u != "" {
		params = append(params, `resource_metadata="`+u+`"`)
	}
	if code := err.Code(); code != "" {
		params = append(params, `error="`+code+`"`)
		if err.Detail != "" {
			params = append(params, `error_description="`+quoteDetail(err.Detail)+`"`)
		}
	}
	return "DPoP " + strings.Join(params, ", ")
}

// RequireDPoP refuses p unless it proved a DPoP-bound token on this
// request (a route's require_dpop).
func RequireDPoP(p *Principal) error {
	if p.DPoPBound() {
		return nil
	}
	return &Error{Reason: Malformed, DPoP: true, Detail: "this route accepts only DPoP-bound tokens presented with a DPoP proof (Authorization: DPoP)"}
}

// jtiCache remembers proofs until they expire, at most max of them.
type jtiCache struct {
	mu    sync.Mutex
	max   int
	until map[[32]byte]time.Time
	order [][32]byte // oldest first; every entry lives as long, so expiry order
}

type jtiResult int

const (
	jtiNew jtiResult = iota
	jtiReplayed
	jtiFull
	jtiUnchecked // the shared store could not be asked
)

func newJTICache(max int) *jtiCache {
	return &jtiCache{max: max, until: map[[32]byte]time.Time{}}
}

func (c *jtiCache) add(id string, until, now time.Time) jtiResult {
	k := [32]byte([]byte(id))
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.order) > 0 && !now.Before(c.until[c.order[0]]) {
		delete(c.until, c.order[0])
		c.order = c.order[1:]
	}
	if _, ok := c.until[k]; ok {
		return jtiReplayed
	}
	if len(c.until) >= c.max {
		return jtiFull // fail closed: forgetting one would let it be replayed
	}
	c.until[k] = until
	c.order = append(c.order, k)
	return jtiNew
}
