package peruser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
)

// fakeClient answers refreshes with what the test says.
type fakeClient struct {
	refresh   func(n int) (*peruser.Token, error)
	refreshes atomic.Int32
}

func (f *fakeClient) Begin(context.Context, string, string, *peruser.StepUp) (*peruser.Flow, error) {
	return &peruser.Flow{AuthURL: "https://as.example.com/authorize", Data: json.RawMessage(`{}`)}, nil
}
func (f *fakeClient) Complete(context.Context, *peruser.Flow, url.Values) (*peruser.Token, error) {
	return nil, errors.New("not in this test")
}
func (f *fakeClient) Refresh(context.Context, json.RawMessage, string) (*peruser.Token, error) {
	return f.refresh(int(f.refreshes.Add(1)))
}

// seeded is a source whose store holds alice's expired token with a
// refresh token, put there by a completed flow's record format (through a
// refresh of a first, valid record).
func seeded(t *testing.T, c *fakeClient, clk *clock) *peruser.Source {
	t.Helper()
	b, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return seededIn(t, b, c, clk)
}

func seededIn(t *testing.T, b peruser.Backend, c *fakeClient, clk *clock) *peruser.Source {
	t.Helper()
	s, err := peruser.New(peruser.Options{Upstream: "gh", PublicURL: "https://mcp.example.com", Client: c, Backend: b, Keys: [][]byte{key(9)}, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := peruser.Seed(context.Background(), s, subject("alice").Key(), &peruser.Token{AccessToken: "old", RefreshToken: "r1", Expiry: clk.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRefreshOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   func(int) (*peruser.Token, error)
		want     string // the token, or "" for authorization required
		wantErr  string // another error
		thenWant string // the next Token's outcome ("" as above)
	}{
		{"refreshed", func(int) (*peruser.Token, error) {
			return &peruser.Token{AccessToken: "new", Expiry: time.Now().Add(time.Hour)}, nil
		}, "new", "", "new"},
		{"invalid_grant drops it", func(int) (*peruser.Token, error) {
			return nil, fmt.Errorf("%w: refresh token revoked", peruser.ErrInvalidGrant)
		}, "", "", ""},
		{"a server failure is an error, the grant is kept", func(n int) (*peruser.Token, error) {
			if n == 1 {
				return nil, errors.New("token endpoint: connection refused")
			}
			return &peruser.Token{AccessToken: "later", Expiry: time.Now().Add(time.Hour)}, nil
		}, "", "refreshing your authorization failed", "later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Now()}
			s := seeded(t, &fakeClient{refresh: tc.answer}, clk)
			check := func(want, wantErr string) {
				t.Helper()
				tok, err := s.Token(context.Background(), subject("alice"))
				var ar *credentials.AuthorizationRequiredError
				switch {
				case wantErr != "":
					if err == nil || !strings.Contains(err.Error(), wantErr) || errors.As(err, &ar) {
						t.Fatalf("Token = %q, %v; want an error naming %q", tok, err, wantErr)
					}
				case want == "":
					if !errors.As(err, &ar) {
						t.Fatalf("Token = %q, %v; want authorization required", tok, err)
					}
				case tok != want || err != nil:
					t.Fatalf("Token = %q, %v; want %q", tok, err, want)
				}
			}
			check(tc.want, tc.wantErr)
			check(tc.thenWant, "")
		})
	}
}

func TestTokenWithoutPrincipal(t *testing.T) {
	s := seeded(t, &fakeClient{}, &clock{t: time.Now()})
	_, err := s.Token(context.Background(), credentials.Subject{})
	if err == nil || !strings.Contains(err.Error(), "no authenticated principal") {
		t.Fatalf("Token without principal: %v", err)
	}
}

func TestPrincipalKey(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"apikey:ci", "apikey\x00ci", ""},
		{"alice@https://login.example.com/", "oidc\x00https://login.example.com/\x00alice", ""},
		{"a@b.com@http://127.0.0.1:9/", "oidc\x00http://127.0.0.1:9/\x00a@b.com", ""},
		{"alice", "", "names no principal"},
		{"apikey:", "", "names no principal"},
	} {
		got, err := peruser.PrincipalKey(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("PrincipalKey(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("PrincipalKey(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if back := peruser.PrincipalName(got); back != tc.in {
			t.Errorf("PrincipalName(PrincipalKey(%q)) = %q: the CLI could not name what the log names", tc.in, back)
		}
	}
}

func TestRedisBackendAndOnce(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	b := peruser.NewRedis(c, "test:", "gh", 2)
	if err := b.Put(ctx, "k1", []byte("v1"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k2", []byte("v2"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k3", []byte("v3"), time.Time{}); !errors.Is(err, peruser.ErrFull) {
		t.Fatalf("a third key over the bound of 2: %v, want ErrFull", err)
	}
	if err := b.Put(ctx, "k1", []byte("v1b"), time.Time{}); err != nil {
		t.Fatalf("replacing a held key at the bound: %v", err)
	}
	if v, ok, err := b.Get(ctx, "k1"); err != nil || !ok || string(v) != "v1b" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	// Another replica (another client) sees the same records.
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c2.Close() })
	if v, ok, _ := peruser.NewRedis(c2, "test:", "gh", 2).Get(ctx, "k2"); !ok || string(v) != "v2" {
		t.Fatalf("the other replica reads %q %v", v, ok)
	}
	if ttl := c.TTL(ctx, "test:peruser:{gh}:k2").Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of a record with an expiry: %v", ttl)
	}
	if ok, err := b.Delete(ctx, "k1"); !ok || err != nil {
		t.Fatalf("Delete = %v %v", ok, err)
	}
	if n, err := b.Clear(ctx); n != 1 || err != nil {
		t.Fatalf("Clear = %d %v", n, err)
	}
	if n, _ := b.Len(ctx); n != 0 {
		t.Fatalf("Len after Clear = %d", n)
	}
	// A link used on one replica is refused on the other.
	o1, o2 := peruser.NewRedisOnce(c, "test:"), peruser.NewRedisOnce(c2, "test:")
	if first, err := o1.Use(ctx, "l:x", time.Now().Add(time.Minute)); !first || err != nil {
		t.Fatalf("first use: %v %v", first, err)
	}
	if first, err := o2.Use(ctx, "l:x", time.Now().Add(time.Minute)); first || err != nil {
		t.Fatalf("use on another replica: %v %v, want refused", first, err)
	}
}

func TestMemoryOnce(t *testing.T) {
	clk := &clock{t: time.Now()}
	o := peruser.NewMemoryOnce(clk.Now)
	ctx := context.Background()
	until := clk.Now().Add(time.Minute)
	if first, _ := o.Use(ctx, "a", until); !first {
		t.Fatal("first use refused")
	}
	if first, _ := o.Use(ctx, "a", until); first {
		t.Fatal("second use accepted")
	}
}

func TestRegistrationsSurviveARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens-gh.registrations.json")
	open := func() *peruser.Registrations {
		b, err := peruser.OpenFile(path, 4, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := peruser.NewRegistrations(b, [][]byte{key(5)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reg := oauthclient.Registration{Issuer: "https://as.example.com", RedirectURI: "https://mcp.example.com/oauth/upstream/gh/callback", Kind: oauthclient.KindDynamic, ClientID: "dyn-1", ClientSecret: "dyn-secret-0123"}
	open().Store(reg)
	r := open() // a restart
	got, ok := r.Load(reg.Issuer, reg.RedirectURI)
	if !ok || got != reg {
		t.Fatalf("after a restart: %+v %v", got, ok)
	}
	if _, ok := r.Load("https://other.example.com", reg.RedirectURI); ok {
		t.Fatal("another server's registration was found")
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), reg.ClientSecret) || strings.Contains(string(data), reg.ClientID) {
		t.Fatal("the registration is stored in clear")
	}
	r.Delete(reg.Issuer, reg.RedirectURI)
	if _, ok := open().Load(reg.Issuer, reg.RedirectURI); ok {
		t.Fatal("deleted, yet loaded")
	}
}

// A write whose sync fails must not replace the file: the store keeps
// what it had and the caller gets the error.
func TestFileBackendFailedWriteKeepsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	b, err := peruser.OpenFile(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Put(ctx, "k1", []byte("v1"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	peruser.FailSyncs(b, errors.New("disk full"))
	if err := b.Put(ctx, "k2", []byte("v2"), time.Time{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Put with a failing sync = %v; want the error", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("the file was replaced after a failed write:\n%s\nwas\n%s", after, before)
	}
	if _, held, _ := b.Get(ctx, "k2"); held {
		t.Fatal("the failed write's record is served")
	}
	if left, _ := filepath.Glob(path + ".tmp*"); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

// Two replicas refresh alice's token at once: the one whose refresh gets
// invalid_grant (the other rotated the refresh token) must not drop the
// fresh token the other stored, and serves it instead.
func TestInvalidGrantKeepsAnotherReplicasToken(t *testing.T) {
	backends := map[string]func(t *testing.T) peruser.Backend{
		"file": func(t *testing.T) peruser.Backend {
			b, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"redis": func(t *testing.T) peruser.Backend {
			srv := redistest.Start(t)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { _ = c.Close() })
			return peruser.NewRedis(c, "test:", "gh", 10)
		},
	}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			clk := &clock{t: time.Now()}
			var s *peruser.Source
			c := &fakeClient{refresh: func(int) (*peruser.Token, error) {
				// The other replica's refresh lands first.
				if err := peruser.Seed(context.Background(), s, subject("alice").Key(), &peruser.Token{AccessToken: "fresh", RefreshToken: "r2", Expiry: clk.Now().Add(time.Hour)}); err != nil {
					t.Error(err)
				}
				return nil, fmt.Errorf("%w: refresh token rotated", peruser.ErrInvalidGrant)
			}}
			s = seededIn(t, mk(t), c, clk)
			if tok, err := s.Token(context.Background(), subject("alice")); tok != "fresh" || err != nil {
				t.Fatalf("Token = %q, %v; want the other replica's fresh token", tok, err)
			}
			if tok, err := s.Token(context.Background(), subject("alice")); tok != "fresh" || err != nil {
				t.Fatalf("then Token = %q, %v; want the fresh token still stored", tok, err)
			}
		})
	}
}

func TestBackendDeleteIf(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	file, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, b := range map[string]peruser.Backend{"file": file, "redis": peruser.NewRedis(c, "test:", "gh", 10)} {
		if err := b.Put(ctx, "k", []byte("v2"), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.DeleteIf(ctx, "k", []byte("v1")); ok || err != nil {
			t.Fatalf("%s: DeleteIf(another value) = %v, %v; want kept", name, ok, err)
		}
		if ok, err := b.DeleteIf(ctx, "k", []byte("v2")); !ok || err != nil {
			t.Fatalf("%s: DeleteIf(the value) = %v, %v; want deleted", name, ok, err)
		}
		if n, _ := b.Len(ctx); n != 0 {
			t.Fatalf("%s: Len after DeleteIf = %d", name, n)
		}
	}
}

// An expired token whose refresh keeps failing (not invalid_grant) ends
// in a new authorization link rather than errors until a manual revoke.
func TestRepeatedRefreshFailuresAskToAuthorizeAgain(t *testing.T) {
	clk := &clock{t: time.Now()}
	s := seeded(t, &fakeClient{refresh: func(int) (*peruser.Token, error) {
		return nil, errors.New("token endpoint: HTTP 500")
	}}, clk)
	var ar *credentials.AuthorizationRequiredError
	for i := 1; i < 3; i++ {
		if _, err := s.Token(context.Background(), subject("alice")); err == nil || errors.As(err, &ar) {
			t.Fatalf("failure %d: %v; want the refresh error", i, err)
		}
	}
	if _, err := s.Token(context.Background(), subject("alice")); !errors.As(err, &ar) {
		t.Fatalf("third failure: %v; want authorization required", err)
	}
}

// failingBegin is a client whose authorization cannot start: its error
// quotes what a server answered.
type failingBegin struct{ fakeClient }

func (*failingBegin) Begin(context.Context, string, string, *peruser.StepUp) (*peruser.Flow, error) {
	return nil, errors.New(`the metadata at http://127.0.0.2/internal names issuer "FETCHED-SECRET-VALUE"`)
}

// The start page never shows what the gateway fetched (the error goes to
// the log): an upstream naming an internal URL learns nothing from it.
func TestStartPageDoesNotEchoFetchedContent(t *testing.T) {
	b, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := peruser.New(peruser.Options{Upstream: "gh", PublicURL: "https://mcp.example.com", Client: &failingBegin{}, Backend: b, Keys: [][]byte{key(9)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Token(context.Background(), subject("alice"))
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Token: %v", err)
	}
	rec := httptest.NewRecorder()
	s.ServeStart(rec, httptest.NewRequest(http.MethodGet, ar.URL, nil))
	if rec.Code != http.StatusBadGateway || strings.Contains(rec.Body.String(), "FETCHED-SECRET-VALUE") || strings.Contains(rec.Body.String(), "127.0.0.2") {
		t.Fatalf("start page %d:\n%s", rec.Code, rec.Body)
	}
}

// With discover, an authorization server the upstream's metadata names on
// an internal address is not contacted unless allow_addresses lists it;
// the upstream itself (configured) is.
func TestDiscoveredServerOnInternalAddressIsRefused(t *testing.T) {
	var asHits atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asHits.Add(1)
		http.NotFound(w, r)
	}))
	defer as.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":"http://%s/mcp","authorization_servers":[%q]}`, r.Host, as.URL)
	}))
	defer up.Close()
	begin := func(allow []string) error {
		cfg := &config.UpstreamPerUser{Discover: true, DynamicRegistration: true, AllowAddresses: allow}
		c, err := peruser.NewOAuthClient("gh", up.URL+"/mcp", cfg, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Begin(context.Background(), "state", "https://mcp.example.com/cb", nil)
		return err
	}
	if err := begin(nil); err == nil || !strings.Contains(err.Error(), "upstreams.gh.auth.per_user.allow_addresses") || asHits.Load() != 0 {
		t.Fatalf("Begin = %v (%d requests at the server); want refused, naming the key", err, asHits.Load())
	}
	_ = begin([]string{"127.0.0.1"})
	if asHits.Load() == 0 {
		t.Fatal("with allow_addresses the server was still not asked")
	}

	// The case: the upstream's 401 names resource_metadata at an
	// internal URL (another loopback server here), which is not fetched.
	var internalHits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		fmt.Fprint(w, `{"resource":"x","authorization_servers":["x"]}`)
	}))
	defer internal.Close()
	challenger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+internal.URL+`/internal/admin"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer challenger.Close()
	c, err := peruser.NewOAuthClient("gh", challenger.URL+"/mcp", &config.UpstreamPerUser{Discover: true, DynamicRegistration: true}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(context.Background(), "state", "https://mcp.example.com/cb", nil); err == nil || internalHits.Load() != 0 {
		t.Fatalf("Begin = %v (%d requests at the internal URL); want refused", err, internalHits.Load())
	}
}

// One principal can have only max_links_per_principal authorizations
// under way: past it the start page refuses (429), and another
// principal's link still works.
func TestStartsPerPrincipalAreBounded(t *testing.T) {
	b, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := peruser.New(peruser.Options{Upstream: "gh", PublicURL: "https://mcp.example.com", Client: &fakeClient{}, Backend: b, Keys: [][]byte{key(9)}, MaxLinksPerPrincipal: 3})
	if err != nil {
		t.Fatal(err)
	}
	start := func(user string) int {
		t.Helper()
		_, err := s.Token(context.Background(), subject(user))
		var ar *credentials.AuthorizationRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("Token: %v", err)
		}
		rec := httptest.NewRecorder()
		s.ServeStart(rec, httptest.NewRequest(http.MethodGet, ar.URL, nil))
		return rec.Code
	}
	for i := range 3 {
		if code := start("alice"); code != http.StatusFound {
			t.Fatalf("alice's start %d: %d", i+1, code)
		}
	}
	if code := start("alice"); code != http.StatusTooManyRequests {
		t.Fatalf("alice's fourth start: %d; want 429", code)
	}
	if code := start("bob"); code != http.StatusFound {
		t.Fatalf("bob's start: %d", code)
	}
}

// The store's keys are HMACs under a key from the session key ring: whoever
// reads the file or Redis cannot tell whose records they are by hashing
// guessable principal names. Records under the unkeyed hash of earlier
// versions, or under an older ring key, are found and moved, so neither
// an upgrade nor a key rotation loses a link.
func TestStoreKeysAreKeyedAndMigrated(t *testing.T) {
	ctx := context.Background()
	alice := subject("alice").Key()
	b, err := peruser.OpenFile(filepath.Join(t.TempDir(), "t.json"), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ring := [][]byte{key(1)}
	s, err := peruser.New(peruser.Options{Upstream: "gh", PublicURL: "https://mcp.example.com", Client: &fakeClient{}, Backend: b, Keys: ring})
	if err != nil {
		t.Fatal(err)
	}
	if err := peruser.Seed(ctx, s, alice, &peruser.Token{AccessToken: "at", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	keys, _ := peruser.StoreKeys(ring, "gh", alice)
	val, held, _ := b.Get(ctx, keys[0])
	if !held {
		t.Fatal("the record is not under the keyed HMAC")
	}
	if _, held, _ := b.Get(ctx, peruser.StoreKey("gh", alice)); held {
		t.Fatal("the record is under the unkeyed SHA-256 of the principal")
	}

	// An earlier version's record, under the unkeyed hash, is used and moved.
	legacy := peruser.StoreKey("gh", alice)
	if _, err := b.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, legacy, val, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Token(ctx, subject("alice")); tok != "at" || err != nil {
		t.Fatalf("Token with a legacy record = %q, %v", tok, err)
	}
	if _, held, _ := b.Get(ctx, legacy); held {
		t.Fatal("the legacy record was not moved")
	}
	if _, held, _ := b.Get(ctx, keys[0]); !held {
		t.Fatal("the legacy record is not under the keyed HMAC now")
	}

	// A rotated ring (new key first): found under the old key's HMAC and moved.
	rotated := [][]byte{key(2), key(1)}
	if err := s.SetKeys(rotated); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Token(ctx, subject("alice")); tok != "at" || err != nil {
		t.Fatalf("Token after a rotation = %q, %v", tok, err)
	}
	now, _ := peruser.StoreKeys(rotated, "gh", alice)
	if _, held, _ := b.Get(ctx, now[0]); !held {
		t.Fatal("the record was not moved to the new key's HMAC")
	}
	if n, _ := b.Len(ctx); n != 1 {
		t.Fatalf("%d records; want 1", n)
	}
	// Revoking drops it wherever it is.
	if ok, err := s.Revoke(ctx, alice); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
}
