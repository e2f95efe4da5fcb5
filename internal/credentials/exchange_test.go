package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

func TestExchangeForm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   config.UpstreamTokenExchange
		actor string
		want  url.Values
	}{
		{"defaults", config.UpstreamTokenExchange{}, "", url.Values{
			"grant_type": {grantTokenExchange}, "subject_token": {"sub-tok"},
			"subject_token_type": {config.TokenTypeAccessToken}, "requested_token_type": {config.TokenTypeAccessToken},
		}},
		{"audience, resource, scopes, types", config.UpstreamTokenExchange{
			Audience: "jira", Resource: "https://jira.example.com/mcp", Scopes: []string{"read", "write"},
			SubjectTokenType: config.TokenTypeJWT, RequestedTokenType: "urn:example:token-type:custom",
		}, "", url.Values{
			"grant_type": {grantTokenExchange}, "subject_token": {"sub-tok"},
			"subject_token_type": {config.TokenTypeJWT}, "requested_token_type": {"urn:example:token-type:custom"},
			"audience": {"jira"}, "resource": {"https://jira.example.com/mcp"}, "scope": {"read write"},
		}},
		{"actor", config.UpstreamTokenExchange{}, "gw-tok", url.Values{
			"grant_type": {grantTokenExchange}, "subject_token": {"sub-tok"},
			"subject_token_type": {config.TokenTypeAccessToken}, "requested_token_type": {config.TokenTypeAccessToken},
			"actor_token": {"gw-tok"}, "actor_token_type": {config.TokenTypeAccessToken},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exchangeForm(&tc.cfg, "sub-tok", tc.actor); got.Encode() != tc.want.Encode() {
				t.Errorf("form\n got %s\nwant %s", got.Encode(), tc.want.Encode())
			}
		})
	}
}

func subject(name string) Subject {
	return Subject{Principal: &auth.Principal{Subject: name, Issuer: "https://idp.example.com"}, Token: "downstream-" + name}
}

func testExchange(t *testing.T, tokenURL string, cfg config.UpstreamTokenExchange) *exchangeSource {
	cfg.TokenURL = tokenURL
	if cfg.ClientID == "" {
		cfg.ClientID, cfg.ClientSecret = "mcpgw", "s3cret"
	}
	return newExchangeSource(t.Context(), "jira", "https://jira.example.com/mcp", &cfg, &http.Client{Timeout: 5 * time.Second}, nil, zaptest.NewLogger(t))
}

// exchanged answers an exchange with a token naming the subject token and
// the request's number.
func exchanged(ttl int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"access_token":"x-%s-%d","issued_token_type":%q,"token_type":"Bearer","expires_in":%d}`,
			r.PostForm.Get("subject_token"), n, config.TokenTypeAccessToken, ttl)
	}
}

func TestExchangeCachePerPrincipal(t *testing.T) {
	idp := newFakeIdP(t, exchanged(3600))
	s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{Audience: "jira", Scopes: []string{"read"}})
	ctx := context.Background()
	alice1, err := s.Token(ctx, subject("alice"))
	if err != nil {
		t.Fatal(err)
	}
	alice2, _ := s.Token(ctx, subject("alice"))
	bob, _ := s.Token(ctx, subject("bob"))
	if alice1 != "x-downstream-alice-1" || alice2 != alice1 || bob != "x-downstream-bob-2" {
		t.Errorf("tokens: alice %q then %q, bob %q", alice1, alice2, bob)
	}
	// A renewed downstream token of the same principal reuses the cache:
	// the key is the principal, not the token.
	renewed := subject("alice")
	renewed.Token = "downstream-alice-renewed"
	if tok, _ := s.Token(ctx, renewed); tok != alice1 {
		t.Errorf("alice with a renewed downstream token got %q, want the cached %q", tok, alice1)
	}
	reqs := idp.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d exchanges, want 2: %q", len(reqs), reqs)
	}
	if !strings.HasPrefix(reqs[0], "basic=true:mcpgw:s3cret ") || !strings.Contains(reqs[0], "audience=jira") || !strings.Contains(reqs[0], "scope=read") {
		t.Errorf("exchange request: %s", reqs[0])
	}

	// 401 upstream: Refused drops the token, the next Token exchanges again;
	// a stale token's refusal keeps the current one.
	s.Refused(ctx, subject("alice"), alice1)
	alice3, _ := s.Token(ctx, subject("alice"))
	if alice3 == alice1 || len(idp.requests()) != 3 {
		t.Errorf("after Refused: %q (%d exchanges)", alice3, len(idp.requests()))
	}
	s.Refused(ctx, subject("alice"), alice1)
	if tok, _ := s.Token(ctx, subject("alice")); tok != alice3 {
		t.Errorf("a stale refusal dropped the current token: %q", tok)
	}
}

func TestExchangeCacheExpiryAndBound(t *testing.T) {
	idp := newFakeIdP(t, exchanged(100))
	s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{MaxCached: 2})
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	ctx := context.Background()
	first, _ := s.Token(ctx, subject("alice"))
	// Reused until a quarter of its 100s life before expiry (25s margin,
	// capped at 30s): still at 74s, replaced at 75s.
	now = now.Add(74 * time.Second)
	if tok, _ := s.Token(ctx, subject("alice")); tok != first {
		t.Errorf("at 74s: %q, want the cached %q", tok, first)
	}
	now = now.Add(time.Second)
	if tok, _ := s.Token(ctx, subject("alice")); tok == first {
		t.Error("at 75s the token was still reused")
	}
	// Bound: a third principal evicts the least recently used.
	_, _ = s.Token(ctx, subject("bob"))
	_, _ = s.Token(ctx, subject("alice")) // alice is now the most recent
	_, _ = s.Token(ctx, subject("carol"))
	s.cache.mu.Lock()
	n := len(s.cache.items)
	_, bobKept := s.cache.items[s.cacheKey(subject("bob"))]
	_, aliceKept := s.cache.items[s.cacheKey(subject("alice"))]
	s.cache.mu.Unlock()
	if n != 2 || bobKept || !aliceKept {
		t.Errorf("cache of 2 after alice, bob, alice, carol: %d entries, bob kept %v, alice kept %v", n, bobKept, aliceKept)
	}
	before := len(idp.requests())
	_, _ = s.Token(ctx, subject("bob"))
	if len(idp.requests()) != before+1 {
		t.Error("bob's evicted token was still served")
	}
}

func TestExchangeSingleflight(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	idp := newFakeIdP(t, func(n int, w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		exchanged(3600)(n, w, r)
	})
	s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{})
	var wg sync.WaitGroup
	got := make(chan string, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := s.Token(context.Background(), subject("alice"))
			if err != nil {
				t.Error(err)
			}
			got <- tok
		}()
	}
	testwait.Until(t, "the first exchange", func() bool { return calls.Load() != 0 })
	// Let the others pile up behind it. One that comes after the release
	// finds the token cached: a wait cut short by load only makes the
	// test search less, never fail.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(got)
	for tok := range got {
		if tok != "x-downstream-alice-1" {
			t.Errorf("a concurrent caller got %q", tok)
		}
	}
	if n := len(idp.requests()); n != 1 {
		t.Errorf("%d exchanges for 10 concurrent misses of one principal, want 1", n)
	}
}

func TestExchangeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(int, http.ResponseWriter, *http.Request)
		sub    Subject
		want   []string
	}{
		{"refusal names the upstream and the IdP's error", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"subject may not\nbe exchanged"}`)
		}, subject("alice"), []string{`upstream "jira"`, "HTTP 400", "invalid_grant", "subject may not be exchanged", "token_exchange"}},
		{"not a bearer token", func(_ int, w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"access_token":"x","token_type":"N_A","expires_in":60}`)
		}, subject("alice"), []string{`"N_A"`, "only Bearer"}},
		{"no JSON", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `<html>bad gateway</html>`)
		}, subject("alice"), []string{"HTTP 502 without an OAuth error"}},
		{"an API-key caller has nothing to exchange", nil,
			Subject{Principal: &auth.Principal{Subject: "ci", APIKey: "ci"}}, []string{"without a bearer token", "API key"}},
		{"no caller", nil, Subject{}, []string{"not authenticated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := tc.answer
			if answer == nil {
				answer = exchanged(60)
			}
			idp := newFakeIdP(t, answer)
			s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{})
			_, err := s.Token(context.Background(), tc.sub)
			var ee *ExchangeError
			if !errors.As(err, &ee) {
				t.Fatalf("err = %v (%T), want *ExchangeError", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "downstream-alice") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q carries a token or the secret", err)
			}
			// A failure without an OAuth error (the server could not
			// answer usably) is not remembered: the next call asks again.
			// A refusal is, briefly (TestExchangeRefusalRemembered).
			before := len(idp.requests())
			_, _ = s.Token(context.Background(), tc.sub)
			refused := ee.Code != ""
			if tc.answer != nil && !refused && len(idp.requests()) != before+1 {
				t.Error("a failed exchange was cached")
			}
		})
	}
}

// TestExchangeRefusalRemembered: a principal the authorization server
// refuses costs one request per refusalMemory, not one per call; the
// memory is for that subject token only, expires, and is bounded.
func TestExchangeRefusalRemembered(t *testing.T) {
	refuse := true
	idp := newFakeIdP(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"no"}`)
			return
		}
		exchanged(3600)(n, w, r)
	})
	s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{MaxCached: 2})
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range 5 {
		_, err := s.Token(ctx, subject("carol"))
		var ee *ExchangeError
		if !errors.As(err, &ee) || ee.Code != "invalid_grant" || !strings.Contains(err.Error(), `upstream "jira"`) {
			t.Fatalf("call %d: %v, want the server's refusal", i, err)
		}
	}
	if n := len(idp.requests()); n != 1 {
		t.Fatalf("5 calls of a refused principal asked the server %d times, want 1", n)
	}
	// A renewed downstream token is asked about afresh.
	renewed := subject("carol")
	renewed.Token = "downstream-carol-renewed"
	_, _ = s.Token(ctx, renewed)
	if n := len(idp.requests()); n != 2 {
		t.Fatalf("a new subject token was answered from memory (%d requests)", n)
	}
	// The refusal is forgotten after refusalMemory; a grant then replaces it.
	refuse = false
	now = now.Add(refusalMemory - time.Millisecond)
	if _, err := s.Token(ctx, renewed); err == nil {
		t.Fatal("the refusal was forgotten early")
	}
	now = now.Add(time.Millisecond)
	if tok, err := s.Token(ctx, renewed); err != nil || tok == "" {
		t.Fatalf("after refusalMemory: %q %v, want a token", tok, err)
	}
	// Bounded: many refused principals keep at most max_cached entries.
	refuse = true
	for _, p := range []string{"d", "e", "f", "g"} {
		_, _ = s.Token(ctx, subject(p))
	}
	s.refusals.mu.Lock()
	n := len(s.refusals.items)
	s.refusals.mu.Unlock()
	if n > 2 {
		t.Errorf("%d remembered refusals, want at most max_cached (2)", n)
	}
}

func TestExchangeClientSecretPost(t *testing.T) {
	idp := newFakeIdP(t, exchanged(60))
	s := testExchange(t, idp.srv.URL, config.UpstreamTokenExchange{AuthMethod: config.AuthMethodPost})
	if _, err := s.Token(context.Background(), subject("alice")); err != nil {
		t.Fatal(err)
	}
	r := idp.requests()[0]
	if !strings.HasPrefix(r, "basic=false") || !strings.Contains(r, "client_id=mcpgw") || !strings.Contains(r, "client_secret=s3cret") {
		t.Errorf("client_secret_post request: %s", r)
	}
}
