package auth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

const introspectSecret = "introspect-secret-8a7b6c"

// introspectionEndpoint answers RFC 7662 requests from a table of tokens,
// after checking the gateway's client authentication, and counts calls per
// token.
type introspectionEndpoint struct {
	mu      sync.Mutex
	answers map[string]map[string]any
	calls   map[string]int
	down    bool
	srv     *httptest.Server
}

func newIntrospectionEndpoint(t *testing.T) *introspectionEndpoint {
	e := &introspectionEndpoint{answers: map[string]map[string]any{}, calls: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		id, secret, ok := r.BasicAuth()
		if e.down {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if r.Method != http.MethodPost || !ok || id != "mcpgw" || secret != introspectSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		tok := r.PostFormValue("token")
		if r.PostFormValue("token_type_hint") != "access_token" {
			t.Errorf("token_type_hint = %q", r.PostFormValue("token_type_hint"))
		}
		e.calls[tok]++
		a, ok := e.answers[tok]
		if !ok {
			a = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *introspectionEndpoint) set(tok string, a map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answers[tok] = a
}

func (e *introspectionEndpoint) count(tok string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[tok]
}

func TestIntrospection(t *testing.T) {
	is := authtest.NewIssuer(t)
	ep := newIntrospectionEndpoint(t)
	now := time.Now()
	var clockMu sync.Mutex
	clock := func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		clockMu.Lock()
		now = now.Add(d)
		clockMu.Unlock()
	}
	a := setup(t, is, fmt.Sprintf(`  introspection:
    url: %s/introspect
    client_id: mcpgw
    client_secret: %s
    groups_claim: realm_access.roles
`, ep.srv.URL, introspectSecret), auth.Options{Now: clock})

	exp := now.Add(10 * time.Minute).Unix()
	later := now.Add(time.Hour).Unix() // for the tokens used after the clock moved
	ep.set("opaque-alice", map[string]any{
		"active": true, "sub": "alice", "client_id": "app", "scope": "mcp:tools mcp:admin",
		"aud": []string{resource}, "exp": exp, "iss": "https://as.example.com",
		"realm_access": map[string]any{"roles": []string{"eng"}},
	})
	ep.set("opaque-robot", map[string]any{"active": true, "client_id": "robot", "aud": resource, "exp": later})
	ep.set("opaque-other", map[string]any{"active": true, "sub": "eve", "aud": "https://other.example.com", "exp": later})
	ep.set("opaque-expired", map[string]any{"active": true, "sub": "bob", "aud": resource, "exp": now.Add(-time.Hour).Unix()})
	ep.set("opaque-dpop", map[string]any{"active": true, "sub": "carol", "aud": resource, "token_type": "DPoP", "exp": later})

	t.Run("active token, cached for cache_ttl, never past exp", func(t *testing.T) {
		for range 3 {
			p, err := a.Authenticate(request("opaque-alice"), resource)
			if err != nil {
				t.Fatal(err)
			}
			if p.PreparedClaims == nil {
				t.Fatal("no prepared claims")
			}
			want := auth.WithBearer(auth.Principal{Subject: "alice", Issuer: "https://as.example.com", ClientID: "app", Scopes: []string{"mcp:tools", "mcp:admin"}, Groups: []string{"eng"}, Expiry: time.Unix(exp, 0), PreparedClaims: p.PreparedClaims}, "opaque-alice")
			if fmt.Sprint(*p) != fmt.Sprint(want) {
				t.Errorf("principal = %+v, want %+v", *p, want)
			}
		}
		if n := ep.count("opaque-alice"); n != 1 {
			t.Errorf("%d introspection calls for three requests, want 1", n)
		}
		advance(59 * time.Second)
		if _, err := a.Authenticate(request("opaque-alice"), resource); err != nil || ep.count("opaque-alice") != 1 {
			t.Errorf("within cache_ttl: err %v, %d calls", err, ep.count("opaque-alice"))
		}
		advance(2 * time.Second) // past the default cache_ttl (1m): asked again
		if _, err := a.Authenticate(request("opaque-alice"), resource); err != nil || ep.count("opaque-alice") != 2 {
			t.Errorf("past cache_ttl: err %v, %d calls; want the endpoint asked again", err, ep.count("opaque-alice"))
		}
		advance(10 * time.Minute) // past exp: asked again (the endpoint still says active)
		if _, err := a.Authenticate(request("opaque-alice"), resource); err == nil || ep.count("opaque-alice") != 3 {
			t.Errorf("after exp: err %v, %d calls; want the endpoint asked again and the expired token refused", err, ep.count("opaque-alice"))
		}
	})
	t.Run("client-credentials token: the client is the subject", func(t *testing.T) {
		p, err := a.Authenticate(request("opaque-robot"), resource)
		if err != nil || p.Subject != "robot" || p.Issuer != ep.srv.URL+"/introspect" {
			t.Errorf("principal %+v, err %v", p, err)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for tok, want := range map[string]auth.Reason{
			"opaque-unknown": auth.Inactive,
			"opaque-other":   auth.WrongAudience,
			"opaque-expired": auth.Expired,
			"opaque-dpop":    auth.Malformed,
		} {
			_, err := a.Authenticate(request(tok), resource)
			if reasonOf(err) != want {
				t.Errorf("%s: %v, want %s", tok, err, want)
			}
			var ae *auth.Error
			if asAuthError(err, &ae) && (ae.Status() != http.StatusUnauthorized || ae.Code() != "invalid_token") {
				t.Errorf("%s: HTTP %d %s", tok, ae.Status(), ae.Code())
			}
		}
		// An inactive answer is remembered briefly: a retrying client does
		// not hammer the endpoint.
		_, _ = a.Authenticate(request("opaque-unknown"), resource)
		if n := ep.count("opaque-unknown"); n != 1 {
			t.Errorf("%d calls for an inactive token asked twice, want 1", n)
		}
	})
	t.Run("JWTs of the issuer and API keys do not go to the endpoint", func(t *testing.T) {
		jwt := is.Token(is.Claims("dave", resource))
		if p, err := a.Authenticate(request(jwt), resource); err != nil || p.Subject != "dave" {
			t.Errorf("JWT: %+v %v", p, err)
		}
		if p, err := a.Authenticate(request(ciKey), resource); err != nil || p.APIKey != "ci" {
			t.Errorf("API key: %+v %v", p, err)
		}
		if ep.count(jwt) != 0 || ep.count(ciKey) != 0 {
			t.Error("a JWT or an API key was sent to the introspection endpoint")
		}
	})
	t.Run("endpoint down: 503, nothing cached, no secret shown", func(t *testing.T) {
		ep.mu.Lock()
		ep.down = true
		ep.mu.Unlock()
		_, err := a.Authenticate(request("opaque-new"), resource)
		if reasonOf(err) != auth.Unavailable || !strings.Contains(err.Error(), ep.srv.URL+"/introspect") || strings.Contains(err.Error(), introspectSecret) {
			t.Errorf("err = %v", err)
		}
		ep.mu.Lock()
		ep.down = false
		ep.mu.Unlock()
		ep.set("opaque-new", map[string]any{"active": true, "sub": "frank", "aud": resource, "exp": later})
		if p, err := a.Authenticate(request("opaque-new"), resource); err != nil || p.Subject != "frank" {
			t.Errorf("after recovery: %+v %v", p, err)
		}
	})
}

// A token revoked at the authorization server is refused once the cached
// answer is older than cache_ttl, however far away its exp is (issue 27.5:
// an opaque token stayed accepted 150 s after revocation).
func TestIntrospectionRevocationDelay(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		delay       time.Duration // how long the revoked token is still accepted
	}{
		{"default", "", time.Minute},
		{"configured", "    cache_ttl: 15s\n", 15 * time.Second},
		{"off", "    cache_ttl: 0s\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := authtest.NewIssuer(t)
			ep := newIntrospectionEndpoint(t)
			var clockMu sync.Mutex
			now := time.Now()
			clock := func() time.Time {
				clockMu.Lock()
				defer clockMu.Unlock()
				return now
			}
			advance := func(d time.Duration) {
				clockMu.Lock()
				now = now.Add(d)
				clockMu.Unlock()
			}
			a := setup(t, is, fmt.Sprintf("  introspection:\n    url: %s/introspect\n    client_id: mcpgw\n    client_secret: %s\n%s", ep.srv.URL, introspectSecret, tc.extra), auth.Options{Now: clock})
			ep.set("opaque-gina", map[string]any{"active": true, "sub": "gina", "aud": resource, "exp": now.Add(24 * time.Hour).Unix()})
			if _, err := a.Authenticate(request("opaque-gina"), resource); err != nil {
				t.Fatal(err)
			}
			ep.set("opaque-gina", map[string]any{"active": false}) // revoked
			if tc.delay > 0 {
				advance(tc.delay - time.Second)
				if _, err := a.Authenticate(request("opaque-gina"), resource); err != nil {
					t.Errorf("within cache_ttl: %v; want the cached answer", err)
				}
				if n := ep.count("opaque-gina"); n != 1 {
					t.Errorf("%d calls within cache_ttl, want 1", n)
				}
			}
			advance(time.Second)
			if _, err := a.Authenticate(request("opaque-gina"), resource); reasonOf(err) != auth.Inactive {
				t.Errorf("%s after revocation: %v, want the token refused as inactive", tc.delay, err)
			}
		})
	}
}

func asAuthError(err error, target **auth.Error) bool {
	ae, ok := err.(*auth.Error)
	if ok {
		*target = ae
	}
	return ok
}

func TestIntrospectionAlone(t *testing.T) {
	ep := newIntrospectionEndpoint(t)
	ep.set("opaque", map[string]any{"active": true, "sub": "alice", "aud": "https://mcp.example.com", "exp": time.Now().Add(time.Hour).Unix(), "groups": "ops"})
	// Introspection alone is authentication: a non-loopback listener is allowed.
	cfg := parse(t, `
listen: 0.0.0.0:8080
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
auth:
  introspection: {url: "`+ep.srv.URL+`", client_id: mcpgw, client_secret: `+introspectSecret+`}
`)
	a, err := auth.New(cfg, auth.Options{})
	if err != nil || a == nil {
		t.Fatalf("New: %v, %v", a, err)
	}
	p, err := a.Authenticate(request("opaque"), resource)
	if err != nil || p.Subject != "alice" || fmt.Sprint(p.Groups) != "[ops]" {
		t.Errorf("principal %+v, err %v", p, err)
	}
	if _, err := a.Authenticate(request("nope"), resource); reasonOf(err) != auth.Inactive {
		t.Errorf("unknown token: %v", err)
	}
	cfg.Auth.Introspection.ClientSecret, cfg.Auth.Introspection.ClientSecretFile = "", "/nonexistent/secret"
	if _, err := auth.New(cfg, auth.Options{}); err == nil || !strings.Contains(err.Error(), "auth.introspection: cannot read client_secret_file") {
		t.Errorf("unreadable secret file: %v", err)
	}
}

// TestIntrospectionJoinsConcurrentMisses: many requests arriving at once
// with one new opaque token cost one call to the endpoint.
func TestIntrospectionJoinsConcurrentMisses(t *testing.T) {
	is := authtest.NewIssuer(t)
	var calls atomic.Int64
	gate := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-gate
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	}))
	t.Cleanup(srv.Close)
	a := setup(t, is, fmt.Sprintf(`  introspection:
    url: %s/introspect
    client_id: mcpgw
    client_secret: %s
`, srv.URL, introspectSecret), auth.Options{})
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := a.Authenticate(request("opaque-new"), resource); err != nil {
				t.Errorf("Authenticate: %v", err)
			}
		})
	}
	testwait.Until(t, "the first introspection call", func() bool { return calls.Load() != 0 })
	// Let the others arrive too. One that comes after the gate opens
	// finds the answer cached: a wait cut short by load only makes the
	// test search less, never fail.
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	if got := calls.Load(); got != 1 {
		t.Errorf("%d concurrent requests with one new token made %d introspection calls, want 1", n, got)
	}
}
