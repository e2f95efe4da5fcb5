package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
)

// dpopClient is a Go DPoP client: its key, and a token bound to it.
type dpopClient struct {
	t     *testing.T
	key   *oauthclient.DPoPKey
	token string
}

func newDPoPClient(t *testing.T, is *authtest.Issuer, now func() time.Time) *dpopClient {
	t.Helper()
	key, err := oauthclient.NewDPoPKey(now)
	if err != nil {
		t.Fatal(err)
	}
	c := is.Claims("alice", resource, "mcp:tools")
	c["cnf"] = map[string]any{"jkt": key.Thumbprint()}
	return &dpopClient{t: t, key: key, token: is.Token(c)}
}

// proof is a proof for method at url presenting token.
func (c *dpopClient) proof(method, url, token string) string {
	c.t.Helper()
	p, err := c.key.Proof(method, url, token)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// xAPIKey is a POST to /mcp with token in X-API-Key.
func xAPIKey(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", nil)
	r.Header.Set("X-API-Key", token)
	return r
}

// request is a POST to /mcp presenting token with scheme and proofs.
func dpopRequest(scheme, token string, proofs ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp?x=1", nil)
	r.Header.Set("Authorization", scheme+" "+token)
	for _, p := range proofs {
		r.Header.Add("DPoP", p)
	}
	return r
}

// TestDPoPBoundTokens: a DPoP-bound token (cnf.jkt) with a fresh proof
// for this request is accepted; a replayed proof, a proof for another URL
// or method or token or by another key, an old proof, the token without
// its proof, the bound token as Bearer and the DPoP scheme with an unbound
// token are refused, each with a DPoP challenge.
func TestDPoPBoundTokens(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "", auth.Options{})
	c := newDPoPClient(t, is, nil)
	good := c.proof("POST", resource, c.token)
	p, err := a.Authenticate(dpopRequest("DPoP", c.token, good), resource)
	if err != nil || p.Subject != "alice" || !p.DPoPBound() {
		t.Fatalf("DPoP-bound token with its proof: %v, %v", p, err)
	}
	if err := auth.RequireDPoP(p); err != nil {
		t.Errorf("RequireDPoP of a proven token: %v", err)
	}
	// Another fresh proof: accepted too (the token is cached by now).
	if _, err := a.Authenticate(dpopRequest("dpop", c.token, c.proof("POST", resource, c.token)), resource); err != nil {
		t.Errorf("second request with a fresh proof: %v", err)
	}

	other := newDPoPClient(t, is, nil)
	bc := is.Claims("carol", resource)
	bc["cnf"] = map[string]any{"jkt": 42}
	badCnf := is.Token(bc)
	unbound := is.Token(is.Claims("bob", resource, "mcp:tools"))
	old := newDPoPClient(t, is, func() time.Time { return time.Now().Add(-5 * time.Minute) })
	for _, tc := range []struct {
		name   string
		r      *http.Request
		reason auth.Reason
		detail string
	}{
		{"replayed proof", dpopRequest("DPoP", c.token, good), auth.InvalidDPoPProof, "used before"},
		{"proof for another URL", dpopRequest("DPoP", c.token, c.proof("POST", "https://mcp.example.com/admin", c.token)), auth.InvalidDPoPProof, "not https://mcp.example.com/mcp"},
		{"proof for another host", dpopRequest("DPoP", c.token, c.proof("POST", "https://evil.example.com/mcp", c.token)), auth.InvalidDPoPProof, "not https://mcp.example.com/mcp"},
		{"proof for another method", dpopRequest("DPoP", c.token, c.proof("GET", resource, c.token)), auth.InvalidDPoPProof, "method"},
		{"proof for another token", dpopRequest("DPoP", c.token, c.proof("POST", resource, unbound)), auth.InvalidDPoPProof, "ath"},
		{"proof by another key", dpopRequest("DPoP", c.token, other.proof("POST", resource, c.token)), auth.InvalidDPoPProof, "another key"},
		{"old proof", dpopRequest("DPoP", old.token, old.proof("POST", resource, old.token)), auth.InvalidDPoPProof, "iat"},
		{"token without its proof", dpopRequest("DPoP", c.token), auth.InvalidDPoPProof, "exactly one DPoP header"},
		{"two proofs", dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token), c.proof("POST", resource, c.token)), auth.InvalidDPoPProof, "exactly one"},
		{"garbage proof", dpopRequest("DPoP", c.token, "not.a.jws"), auth.InvalidDPoPProof, "not a JWS"},
		{"bound token as Bearer", dpopRequest("Bearer", c.token, c.proof("POST", resource, c.token)), auth.Malformed, "DPoP-bound"},
		{"unbound token as DPoP", dpopRequest("DPoP", unbound, c.proof("POST", resource, unbound)), auth.Malformed, "not DPoP-bound"},
		{"API key as DPoP", dpopRequest("DPoP", ciKey, c.proof("POST", resource, ciKey)), auth.Malformed, "API key"},
		{"bound token as X-API-Key", xAPIKey(c.token), auth.Malformed, "DPoP-bound"},
		{"cnf.jkt not a string", dpopRequest("Bearer", badCnf), auth.Malformed, "cnf.jkt"},
	} {
		_, err := a.Authenticate(tc.r, resource)
		var ae *auth.Error
		if !asAuthError(err, &ae) || ae.Reason != tc.reason || !ae.DPoP || !strings.Contains(ae.Detail, tc.detail) {
			t.Errorf("%s: %v; want %s mentioning %q, answered with a DPoP challenge", tc.name, err, tc.reason, tc.detail)
			continue
		}
		ch := a.DPoPChallenge(ae, "/mcp")
		if !strings.HasPrefix(ch, `DPoP algs="ES256 ES384 ES512 RS256 PS256 EdDSA"`) || !strings.Contains(ch, `error="`) {
			t.Errorf("%s: challenge %q", tc.name, ch)
		}
	}
	// An unbound token as Bearer is unaffected, but not on a DPoP-only route.
	p, err = a.Authenticate(request(unbound), resource)
	if err != nil || p.DPoPBound() {
		t.Fatalf("unbound bearer token: %v, %v", p, err)
	}
	if err := auth.RequireDPoP(p); err == nil || reasonOf(err) != auth.Malformed {
		t.Errorf("RequireDPoP of a bearer token: %v", err)
	}
}

// TestDPoPNonceAndReplayBound: with auth.dpop.nonce a proof without the
// gateway's nonce is refused use_dpop_nonce with one to retry with, and
// the retry passes; the replay cache is bounded, refusing (not
// forgetting) when full of live proofs.
func TestDPoPNonceAndReplayBound(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "  dpop: {nonce: true, max_replay_entries: 2}\n", auth.Options{})
	c := newDPoPClient(t, is, nil)
	_, err := a.Authenticate(dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token)), resource)
	var ae *auth.Error
	if !asAuthError(err, &ae) || ae.Reason != auth.UseDPoPNonce || ae.Nonce == "" || ae.Code() != "use_dpop_nonce" {
		t.Fatalf("proof without the nonce: %v", err)
	}
	c.key.SetNonce(resource, ae.Nonce)
	for i := range 2 {
		if _, err := a.Authenticate(dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token)), resource); err != nil {
			t.Fatalf("proof %d with the nonce: %v", i, err)
		}
	}
	c.key.SetNonce(resource, "forged")
	if _, err := a.Authenticate(dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token)), resource); reasonOf(err) != auth.UseDPoPNonce {
		t.Errorf("a nonce not the gateway's: %v", err)
	}
	c.key.SetNonce(resource, ae.Nonce)
	_, err = a.Authenticate(dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token)), resource)
	if !asAuthError(err, &ae) || ae.Reason != auth.Unavailable || !strings.Contains(ae.Detail, "auth.dpop.max_replay_entries") {
		t.Errorf("third live proof with room for 2: %v", err)
	}
}

// fleetReplay is a ReplayStore shared by two replicas (Redis in
// production); down makes it unreachable.
type fleetReplay struct {
	mu   sync.Mutex
	seen map[string]bool
	down bool
}

func (f *fleetReplay) Remember(_ context.Context, id string, _ time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errors.New("connection refused")
	}
	if f.seen[id] {
		return false, nil
	}
	f.seen[id] = true
	return true, nil
}

// TestDPoPReplaySharedByFleet: with a shared replay store a proof used on
// one replica is refused on another, and a store that cannot be asked
// refuses the proof (503) rather than letting it through.
func TestDPoPReplaySharedByFleet(t *testing.T) {
	is := authtest.NewIssuer(t)
	store := &fleetReplay{seen: map[string]bool{}}
	a1, a2 := setup(t, is, "", auth.Options{}), setup(t, is, "", auth.Options{})
	a1.ShareDPoPReplay(store)
	a2.ShareDPoPReplay(store)
	c := newDPoPClient(t, is, nil)
	proof := c.proof("POST", resource, c.token)
	if _, err := a1.Authenticate(dpopRequest("DPoP", c.token, proof), resource); err != nil {
		t.Fatalf("replica 1: %v", err)
	}
	if _, err := a2.Authenticate(dpopRequest("DPoP", c.token, proof), resource); reasonOf(err) != auth.InvalidDPoPProof {
		t.Errorf("the same proof on replica 2: %v; want it refused as replayed", err)
	}
	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	_, err := a2.Authenticate(dpopRequest("DPoP", c.token, c.proof("POST", resource, c.token)), resource)
	var ae *auth.Error
	if !asAuthError(err, &ae) || ae.Reason != auth.Unavailable || ae.Status() != http.StatusServiceUnavailable {
		t.Errorf("replay store down: %v; want 503", err)
	}
}

// TestRedisReplay: the Redis store refuses an id it already holds, across
// clients (replicas).
func TestRedisReplay(t *testing.T) {
	srv := redistest.Start(t)
	c1 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c1.Close(); c2.Close() })
	r1, r2 := auth.NewRedisReplay(c1, "mcpgw:"), auth.NewRedisReplay(c2, "mcpgw:")
	until := time.Now().Add(time.Minute)
	if fresh, err := r1.Remember(t.Context(), "\x00id", until); !fresh || err != nil {
		t.Fatalf("first Remember = %v, %v", fresh, err)
	}
	if fresh, err := r2.Remember(t.Context(), "\x00id", until); fresh || err != nil {
		t.Errorf("the same id on another replica = %v, %v; want not fresh", fresh, err)
	}
	if ttl := c1.TTL(t.Context(), "mcpgw:dpop:jti:006964").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL %s, want the proof's remaining life", ttl)
	}
}

// TestDPoPForwardedRetryKeepsItsProof: a bridged retry one replica passes
// to the one holding its call carries the proof the first replica
// recorded in the fleet's store; the second checks it against its own
// cache only, so the forward is not refused as a replay (and a second
// forward of it is).
func TestDPoPForwardedRetryKeepsItsProof(t *testing.T) {
	is := authtest.NewIssuer(t)
	store := &fleetReplay{seen: map[string]bool{}}
	a1, a2 := setup(t, is, "", auth.Options{}), setup(t, is, "", auth.Options{})
	a1.ShareDPoPReplay(store)
	a2.ShareDPoPReplay(store)
	c := newDPoPClient(t, is, nil)
	proof := c.proof("POST", resource, c.token)
	if _, err := a1.Authenticate(dpopRequest("DPoP", c.token, proof), resource); err != nil {
		t.Fatalf("replica 1: %v", err)
	}
	forwarded := func() *http.Request {
		r := dpopRequest("DPoP", c.token, proof)
		r.Header.Set("Mcp-Gateway-Forwarded", "1")
		return r
	}
	if _, err := a2.Authenticate(forwarded(), resource); err != nil {
		t.Errorf("the retry forwarded to replica 2: %v", err)
	}
	if _, err := a2.Authenticate(forwarded(), resource); reasonOf(err) != auth.InvalidDPoPProof {
		t.Errorf("the same forward again: %v; want it refused as replayed", err)
	}
}
