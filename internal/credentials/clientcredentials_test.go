package credentials

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
)

// fakeIdP is a token endpoint recording each request's form and client
// authentication; answer decides the response body.
type fakeIdP struct {
	mu    sync.Mutex
	forms []string
	srv   *httptest.Server
}

func newFakeIdP(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *fakeIdP {
	f := &fakeIdP{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, basic := r.BasicAuth()
		f.mu.Lock()
		f.forms = append(f.forms, fmt.Sprintf("basic=%v:%s:%s form=%s", basic, id, secret, r.PostForm.Encode()))
		n := len(f.forms)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		answer(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIdP) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.forms...)
}

func issue(ttl int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"bearer","expires_in":%d}`, n, ttl)
	}
}

func testTokens(t *testing.T, cfg config.UpstreamOAuth) *upstreamTokens {
	return testTokensAt(t, cfg, nil)
}

// testTokensAt is testTokens whose tokens expire by now.
func testTokensAt(t *testing.T, cfg config.UpstreamOAuth, now func() time.Time) *upstreamTokens {
	return newUpstreamTokens(t.Context(), "gh", "https://api.example.com/mcp", &cfg, &http.Client{Timeout: 5 * time.Second}, zaptest.NewLogger(t), now)
}

// sharedClientOf is the shared connection's client NewUpstream builds for
// cfg over base.
func sharedClientOf(ctx context.Context, name string, cfg *config.Upstream, base *http.Client) *http.Client {
	return NewUpstream(ctx, name, cfg, base, Env{HTTPClient: base}).SharedClient()
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestTokenFetchAndReuse(t *testing.T) {
	idp := newFakeIdP(t, issue(3600))
	ts := testTokens(t, config.UpstreamOAuth{TokenURL: idp.srv.URL, ClientID: "cid", ClientSecret: "sec", Scopes: []string{"a", "b"}, Resource: "https://api.example.com/mcp", AuthMethod: config.AuthMethodPost})
	for range 3 {
		tok, err := ts.Token()
		if err != nil || tok.AccessToken != "tok-1" || tok.Type() != "Bearer" {
			t.Fatalf("Token() = %+v, %v", tok, err)
		}
		// Refreshed 30s early (the margin for long-lived tokens).
		if left := time.Until(tok.Expiry); left > 3570*time.Second || left < 3560*time.Second {
			t.Errorf("expiry in %s, want about 3570s", left)
		}
	}
	reqs := idp.requests()
	want := "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource=https%3A%2F%2Fapi.example.com%2Fmcp&scope=a+b"
	if len(reqs) != 1 || reqs[0] != want {
		t.Errorf("token requests = %q, want [%q]", reqs, want)
	}
}

func TestTokenShortLivedIsRefreshed(t *testing.T) {
	idp := newFakeIdP(t, issue(2))
	clock := newFakeClock()
	ts := testTokensAt(t, config.UpstreamOAuth{TokenURL: idp.srv.URL, ClientID: "cid", ClientSecret: "sec", AuthMethod: config.AuthMethodBasic}, clock.Now)
	tok, err := ts.Token()
	if err != nil || tok.AccessToken != "tok-1" {
		t.Fatalf("Token() = %+v, %v", tok, err)
	}
	// A 2s token is used for three quarters of its life.
	clock.Advance(1400 * time.Millisecond)
	if tok2, _ := ts.Token(); tok2 == nil || tok2.AccessToken != "tok-1" {
		t.Errorf("second Token() = %+v, want the cached one", tok2)
	}
	clock.Advance(200 * time.Millisecond)
	if tok3, err := ts.Token(); err != nil || tok3.AccessToken != "tok-2" {
		t.Errorf("Token() after 1.6s = %+v, %v; want a new token", tok3, err)
	}
	if r := idp.requests(); len(r) != 2 || !strings.HasPrefix(r[0], "basic=true:cid:sec form=grant_type=client_credentials") || strings.Contains(r[0], "resource=") {
		t.Errorf("token requests = %q", r)
	}
}

func TestTokenErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		idp := newFakeIdP(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"unknown client","echo":"sup3r-secret"}`)
		})
		ts := testTokens(t, config.UpstreamOAuth{TokenURL: idp.srv.URL + "/token", ClientID: "cid", ClientSecret: "sup3r-secret", AuthMethod: config.AuthMethodBasic})
		_, err := ts.Token()
		if err == nil {
			t.Fatal("no error")
		}
		msg := err.Error()
		for _, want := range []string{`upstream "gh"`, idp.srv.URL + "/token", "HTTP 401 invalid_client (unknown client)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "sup3r-secret") {
			t.Errorf("the error shows the secret: %q", msg)
		}
	})
	t.Run("not bearer", func(t *testing.T) {
		idp := newFakeIdP(t, func(int, http.ResponseWriter, *http.Request) {})
		idp.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"x","token_type":"DPoP","expires_in":60}`)
		})
		_, err := testTokens(t, config.UpstreamOAuth{TokenURL: idp.srv.URL, ClientID: "cid", ClientSecret: "s"}).Token()
		if err == nil || !strings.Contains(err.Error(), `"DPoP" token`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		_, err := testTokens(t, config.UpstreamOAuth{TokenURL: "http://127.0.0.1:1/token", ClientID: "cid", ClientSecret: "s"}).Token()
		if err == nil || !strings.Contains(err.Error(), `upstream "gh": cannot obtain an access token from http://127.0.0.1:1/token`) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestTokenSecretFileIsReadEachTime(t *testing.T) {
	idp := newFakeIdP(t, issue(3600))
	file := filepath.Join(t.TempDir(), "secret")
	ts := testTokens(t, config.UpstreamOAuth{TokenURL: idp.srv.URL, ClientID: "cid", ClientSecretFile: file, AuthMethod: config.AuthMethodBasic})
	if _, err := ts.Token(); err == nil || !strings.Contains(err.Error(), "client_secret_file") || !strings.Contains(err.Error(), `"gh"`) {
		t.Fatalf("missing file: err = %v", err)
	}
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Token(); err != nil {
		t.Fatal(err)
	}
	// Rotated on disk: the next token request uses the new secret.
	if err := os.WriteFile(file, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts.rejected("tok-1")
	if _, err := ts.Token(); err != nil {
		t.Fatal(err)
	}
	r := idp.requests()
	if len(r) != 2 || !strings.HasPrefix(r[0], "basic=true:cid:first ") || !strings.HasPrefix(r[1], "basic=true:cid:second ") {
		t.Errorf("token requests = %q", r)
	}
}

func TestOAuthTransport(t *testing.T) {
	idp := newFakeIdP(t, issue(3600))
	var mu sync.Mutex
	var seen []string
	reject := "tok-1" // the upstream revokes the first token
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, "other "+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		seen = append(seen, r.Method+" "+auth)
		mu.Unlock()
		switch {
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
		case auth == "Bearer "+reject:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(up.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := &http.Client{}
	hc := sharedClientOf(ctx, "gh", &config.Upstream{URL: up.URL + "/mcp", OAuth: &config.UpstreamOAuth{TokenURL: idp.srv.URL, ClientID: "cid", ClientSecret: "s", AuthMethod: config.AuthMethodBasic}}, base)
	if hc == base {
		t.Fatal("an oauth upstream shares the plain client")
	}
	if plain := sharedClientOf(ctx, "fs", &config.Upstream{URL: up.URL}, base); plain != base {
		t.Error("an upstream without oauth got a client of its own")
	}
	do := func(method, path string) int {
		req, _ := http.NewRequestWithContext(ctx, method, up.URL+path, nil)
		if path != "/redirect" {
			req.Header.Set("Authorization", "Bearer downstream") // must be replaced
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The upstream refuses the first token: it is dropped, and the request
	// (not processed) goes once more with a new one.
	if s := do(http.MethodPost, "/mcp"); s != http.StatusOK {
		t.Fatalf("first request: HTTP %d, want 200 after one resend with a new token", s)
	}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if s := do(m, "/mcp"); s != http.StatusOK {
			t.Errorf("%s: HTTP %d", m, s)
		}
	}
	do(http.MethodGet, "/redirect")
	mu.Lock()
	defer mu.Unlock()
	want := []string{"POST Bearer tok-1", "POST Bearer tok-2", "POST Bearer tok-2", "GET Bearer tok-2", "DELETE Bearer tok-2", "GET Bearer tok-2", "other "}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("requests seen:\n got %q\nwant %q (the token goes only to the upstream's origin)", seen, want)
	}
	if n := len(idp.requests()); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}
