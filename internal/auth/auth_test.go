package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy/cond"
)

const (
	publicURL = "https://mcp.example.com"
	resource  = "https://mcp.example.com/mcp"
	ciKey     = "ci-secret-0123456789abcdef"
)

func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// setup returns an authenticator trusting is (and a second issuer when
// given), with an API key "ci".
func setup(t testing.TB, is *authtest.Issuer, extra string, opts auth.Options) *auth.Authenticator {
	t.Helper()
	cfg := parse(t, `
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
routes:
  - path: /mcp
  - path: /admin
    scopes: [mcp:admin]
auth:
  oidc: {issuer: "`+is.URL+`", groups_claim: realm_access.roles}
  api_keys:
    - {name: ci, key: `+ciKey+`, principal: ci-bot, groups: [automation], scopes: [mcp:tools]}
`+extra)
	if opts.KeyRefreshInterval == 0 {
		opts.KeyRefreshInterval = time.Millisecond
	}
	a, err := auth.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func request(token string, mutate ...func(*http.Request)) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

func reasonOf(err error) auth.Reason {
	var ae *auth.Error
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return "(not an auth.Error)"
}

func TestAuthenticateValidToken(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "", auth.Options{})
	c := is.Claims("alice", resource, "mcp:tools", "mcp:read")
	c["realm_access"] = map[string]any{"roles": []string{"eng", "ops"}}
	tok := is.Token(c)
	p, err := a.Authenticate(request(tok), resource)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Claims["realm_access"]; got == nil || p.Claims["sub"] != "alice" {
		t.Errorf("claims for policy conditions: %v", p.Claims)
	}
	want := auth.WithBearer(auth.Principal{Subject: "alice", Issuer: is.URL, ClientID: "test-client", Scopes: []string{"mcp:tools", "mcp:read"}, Groups: []string{"eng", "ops"}, Expiry: p.Expiry, Claims: p.Claims, PreparedClaims: p.PreparedClaims}, tok)
	if !reflect.DeepEqual(*p, want) {
		t.Errorf("principal:\n got %+v\nwant %+v", p, want)
	}
	// The claims are prepared for conditions once per token: the cached
	// principal of the next request carries the same ones.
	c2, err := cond.Compile(`principal.claims.sub == "alice" && principal.claims.realm_access.roles[1] == "ops"`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c2.Eval(cond.Input{Principal: auth.Principal{PreparedClaims: p.PreparedClaims}}); !ok || err != nil {
		t.Errorf("condition on the prepared claims = %v, %v", ok, err)
	}
	if again, err := a.Authenticate(request(tok), resource); err != nil || again.PreparedClaims != p.PreparedClaims {
		t.Errorf("second request: %v, prepared claims %p, want %p (the cached ones)", err, again.PreparedClaims, p.PreparedClaims)
	}
	if p.Expiry.IsZero() || p.Key() != "oidc\x00"+is.URL+"\x00alice" || p.String() != "alice@"+is.URL {
		t.Errorf("expiry %v key %q string %q", p.Expiry, p.Key(), p.String())
	}
}

func TestAuthenticateRejections(t *testing.T) {
	is := authtest.NewIssuer(t)
	other := authtest.NewIssuer(t) // a real issuer nobody configured
	a := setup(t, is, "", auth.Options{})
	now := time.Now()
	with := func(mod func(map[string]any)) map[string]any {
		c := is.Claims("alice", resource)
		mod(c)
		return c
	}
	rsa := is.NewKey(jose.RS256)
	is.Publish(rsa)
	unpublished := is.NewKey(jose.ES256)
	good := is.Token(is.Claims("alice", resource))
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.Split(is.Token(is.Claims("mallory", resource)), ".")[1] + "." + parts[2]

	for _, tc := range []struct {
		name string
		req  *http.Request
		want auth.Reason
	}{
		{"no credentials", request(""), auth.NoCredentials},
		{"token in query", request("", func(r *http.Request) { r.URL.RawQuery = "access_token=" + good }), auth.TokenInQuery},
		{"token in query and header", request(good, func(r *http.Request) { r.URL.RawQuery = "x=1&access_token=abc" }), auth.TokenInQuery},
		{"basic auth", request("", func(r *http.Request) { r.SetBasicAuth("alice", "pw") }), auth.BadRequest},
		{"empty bearer", request("", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }), auth.BadRequest},
		{"two authorization headers", request(good, func(r *http.Request) { r.Header.Add("Authorization", "Bearer "+good) }), auth.BadRequest},
		{"not a JWT nor a key", request("wrong-key-0123456789"), auth.Malformed},
		{"garbage JWT", request("a.b.c"), auth.Malformed},
		{"expired", request(is.Token(with(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() }))), auth.Expired},
		{"no exp", request(is.Token(with(func(c map[string]any) { delete(c, "exp") }))), auth.Expired},
		{"not yet valid", request(is.Token(with(func(c map[string]any) { c["nbf"] = now.Add(5 * time.Minute).Unix() }))), auth.NotYetValid},
		{"issued in the future", request(is.Token(with(func(c map[string]any) { c["iat"] = now.Add(5 * time.Minute).Unix() }))), auth.NotYetValid},
		{"wrong audience", request(is.Token(is.Claims("alice", "https://other.example.com"))), auth.WrongAudience},
		{"audience of another route", request(is.Token(is.Claims("alice", publicURL+"/admin"))), auth.WrongAudience},
		{"no audience", request(is.Token(with(func(c map[string]any) { delete(c, "aud") }))), auth.WrongAudience},
		{"wrong issuer", request(other.Token(other.Claims("alice", resource))), auth.UnknownIssuer},
		{"another issuer's key, our iss", request(other.Token(is.Claims("alice", resource))), auth.BadSignature},
		{"alg none", request(authtest.Unsigned(is.Claims("alice", resource))), auth.AlgorithmNotAllowed},
		{"HS256 signed with the public key", request(authtest.HS256WithPublicKey(rsa, is.Claims("alice", resource))), auth.AlgorithmNotAllowed},
		{"unknown kid", request(authtest.Sign(unpublished, is.Claims("alice", resource))), auth.BadSignature},
		{"tampered payload", request(tampered), auth.BadSignature},
		{"no sub", request(is.Token(with(func(c map[string]any) { delete(c, "sub") }))), auth.Malformed},
		{"exp not a number", request(is.Token(with(func(c map[string]any) { c["exp"] = "tomorrow" }))), auth.Malformed},
		{"aud not strings", request(is.Token(with(func(c map[string]any) { c["aud"] = 42 }))), auth.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(tc.req, resource)
			if got := reasonOf(err); got != tc.want {
				t.Fatalf("reason = %s (%v, principal %v), want %s", got, err, p, tc.want)
			}
			var ae *auth.Error
			errors.As(err, &ae)
			if ae.Detail == "" {
				t.Errorf("no detail: %v", err)
			}
			if strings.Contains(ae.Error(), good) || strings.Contains(ae.Error(), parts[2]) {
				t.Errorf("error echoes the token: %v", err)
			}
		})
	}

	// What is accepted next to those.
	for _, tc := range []struct {
		name string
		req  *http.Request
	}{
		{"RS256 key", request(authtest.Sign(rsa, is.Claims("alice", resource)))},
		{"expired within the leeway", request(is.Token(with(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })))},
		{"audience list", request(is.Token(with(func(c map[string]any) { c["aud"] = []string{"https://other.example.com", resource} })))},
		{"audience public_url", request(is.Token(is.Claims("alice", publicURL)))},
		{"fractional exp", request(is.Token(with(func(c map[string]any) { c["exp"] = float64(now.Add(time.Hour).Unix()) + 0.5 })))},
		{"api key", request(ciKey)},
		{"api key header", request("", func(r *http.Request) { r.Header.Set("X-API-Key", ciKey) })},
		{"lower-case bearer", request("", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+good) })},
	} {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			if _, err := a.Authenticate(tc.req, resource); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAlgorithmAllowlist(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "", auth.Options{})
	_ = a
	cfg := parse(t, `
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
auth:
  oidc: {issuer: "`+is.URL+`", algorithms: [RS256]}
`)
	strict, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = strict.Authenticate(request(is.Token(is.Claims("alice", resource))), resource)
	if reasonOf(err) != auth.AlgorithmNotAllowed || !strings.Contains(err.Error(), `"ES256"`) {
		t.Errorf("ES256 token with algorithms [RS256]: %v", err)
	}
}

func TestScopesAndGroupsClaims(t *testing.T) {
	is := authtest.NewIssuer(t)
	cfg := parse(t, `
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
auth:
  issuers:
    - {issuer: "`+is.URL+`", groups_claim: "https://example.com/groups"}
`)
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mod    func(map[string]any)
		scopes []string
		groups []string
	}{
		{"scp array", func(c map[string]any) { c["scp"] = []string{"a", "b"} }, []string{"a", "b"}, nil},
		{"scp string", func(c map[string]any) { c["scp"] = "a b" }, []string{"a", "b"}, nil},
		{"scope and scp", func(c map[string]any) { c["scope"] = "a"; c["scp"] = []string{"b"} }, []string{"a", "b"}, nil},
		{"namespaced groups claim", func(c map[string]any) { c["https://example.com/groups"] = []string{"eng"} }, nil, []string{"eng"}},
		{"single group string", func(c map[string]any) { c["https://example.com/groups"] = "eng" }, nil, []string{"eng"}},
		{"groups of the wrong type", func(c map[string]any) { c["https://example.com/groups"] = 7 }, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := is.Claims("alice", resource)
			tc.mod(c)
			p, err := a.Authenticate(request(is.Token(c)), resource)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Scopes, tc.scopes) || !reflect.DeepEqual(p.Groups, tc.groups) {
				t.Errorf("scopes %q groups %q, want %q %q", p.Scopes, p.Groups, tc.scopes, tc.groups)
			}
		})
	}
}

func TestExplicitAudienceAndSeveralIssuers(t *testing.T) {
	one, two := authtest.NewIssuer(t), authtest.NewIssuer(t)
	cfg := parse(t, `
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
auth:
  oidc: {issuer: "`+one.URL+`"}
  issuers:
    - {issuer: "`+two.URL+`", audience: mcpgw}
`)
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(request(one.Token(one.Claims("alice", resource))), resource); err != nil {
		t.Errorf("issuer one: %v", err)
	}
	if _, err := a.Authenticate(request(two.Token(two.Claims("bob", "mcpgw"))), resource); err != nil {
		t.Errorf("issuer two, audience mcpgw: %v", err)
	}
	// Issuer two's tokens must carry its configured audience, not the URL.
	if _, err := a.Authenticate(request(two.Token(two.Claims("bob", resource))), resource); reasonOf(err) != auth.WrongAudience {
		t.Errorf("issuer two, resource audience: %v", err)
	}
	// Issuer one's tokens are not accepted with issuer two's audience.
	if _, err := a.Authenticate(request(one.Token(one.Claims("bob", "mcpgw"))), resource); reasonOf(err) != auth.WrongAudience {
		t.Errorf("issuer one, audience mcpgw: %v", err)
	}
	if got := a.Issuers(); !reflect.DeepEqual(got, []string{one.URL, two.URL}) {
		t.Errorf("Issuers = %v", got)
	}
}

func TestKeyRotation(t *testing.T) {
	is := authtest.NewIssuer(t)
	// The refresh interval is passed on an injected clock, not slept.
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	a := setup(t, is, "", auth.Options{KeyRefreshInterval: time.Millisecond, Now: clock})
	old := is.Token(is.Claims("alice", resource))
	if _, err := a.Authenticate(request(old), resource); err != nil {
		t.Fatal(err)
	}
	fetches := is.JWKSFetches()
	// The issuer rotates: a new key signs, the old one is withdrawn.
	is.Rotate(false)
	now.Add(int64(5 * time.Millisecond))
	fresh := is.Token(is.Claims("alice", resource))
	if _, err := a.Authenticate(request(fresh), resource); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if is.JWKSFetches() != fetches+1 {
		t.Errorf("JWKS fetched %d times for the rotation, want 1", is.JWKSFetches()-fetches)
	}
	now.Add(int64(5 * time.Millisecond))
	if _, err := a.Authenticate(request(old), resource); reasonOf(err) != auth.BadSignature {
		t.Errorf("token of the withdrawn key: %v", err)
	}
}

func TestForgedTokensDoNotHammerTheIssuer(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "", auth.Options{KeyRefreshInterval: time.Hour})
	if _, err := a.Authenticate(request(is.Token(is.Claims("alice", resource))), resource); err != nil {
		t.Fatal(err)
	}
	before := is.JWKSFetches()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			forged := authtest.Sign(is.NewKey(jose.ES256), is.Claims("alice", resource)) // unknown kid
			if _, err := a.Authenticate(request(forged), resource); reasonOf(err) != auth.BadSignature {
				t.Errorf("forged: %v", err)
			}
			k := is.SigningKey()
			bad := authtest.Sign(&authtest.Key{ID: k.ID, Alg: k.Alg, Key: is.NewKey(jose.ES256).Key}, is.Claims("alice", resource)) // known kid, wrong key
			if _, err := a.Authenticate(request(bad), resource); reasonOf(err) != auth.BadSignature {
				t.Errorf("bad signature: %v", err)
			}
		})
	}
	wg.Wait()
	if n := is.JWKSFetches() - before; n > 1 {
		t.Errorf("100 forged tokens caused %d JWKS fetches, want at most 1", n)
	}
	if is.DiscoveryFetches() != 1 {
		t.Errorf("discovery fetched %d times, want 1", is.DiscoveryFetches())
	}
}

func TestIssuerUnavailable(t *testing.T) {
	is := authtest.NewIssuer(t)
	token := is.Token(is.Claims("alice", resource))
	a := setup(t, is, "", auth.Options{})
	is.Server.Close()
	_, err := a.Authenticate(request(token), resource)
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Reason != auth.Unavailable || ae.Status() != http.StatusServiceUnavailable {
		t.Fatalf("issuer down: %v", err)
	}
	// API keys go on working.
	if _, err := a.Authenticate(request(ciKey), resource); err != nil {
		t.Errorf("api key while the issuer is down: %v", err)
	}
}

func TestAuthorizeScopes(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "", auth.Options{})
	p, err := a.Authenticate(request(is.Token(is.Claims("alice", resource, "mcp:tools"))), resource)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Authorize(p, []string{"mcp:tools"}); err != nil {
		t.Errorf("has mcp:tools: %v", err)
	}
	err = auth.Authorize(p, []string{"mcp:tools", "mcp:admin"})
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Reason != auth.InsufficientScope || ae.Status() != 403 || ae.Code() != "insufficient_scope" {
		t.Fatalf("lacking mcp:admin: %v", err)
	}
	if !reflect.DeepEqual(ae.Scopes, []string{"mcp:tools", "mcp:admin"}) {
		t.Errorf("challenge scopes %v, want every scope the route needs", ae.Scopes)
	}
	key, _ := a.Authenticate(request(ciKey), resource)
	if key.Subject != "ci-bot" || key.APIKey != "ci" || !key.InGroup("automation") || !key.HasScope("mcp:tools") || key.Key() != "apikey\x00ci" {
		t.Errorf("api key principal %+v", key)
	}
}

func TestChallengesAndMetadata(t *testing.T) {
	is := authtest.NewIssuer(t)
	a := setup(t, is, "  required_scopes: [mcp:tools]\n", auth.Options{})
	scopes := a.RequiredScopes([]string{"mcp:admin", "mcp:tools"})
	if !reflect.DeepEqual(scopes, []string{"mcp:tools", "mcp:admin"}) {
		t.Errorf("RequiredScopes = %v", scopes)
	}
	for _, tc := range []struct {
		err  *auth.Error
		path string
		want string
	}{
		{&auth.Error{Reason: auth.NoCredentials, Detail: "x"}, "/mcp", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`},
		{&auth.Error{Reason: auth.Expired, Detail: `the token expired "then"`}, "/mcp", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="the token expired ?then?", scope="mcp:tools"`},
		{&auth.Error{Reason: auth.InsufficientScope, Detail: "lacks", Scopes: []string{"mcp:tools", "mcp:admin"}}, "/admin", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/admin", error="insufficient_scope", error_description="lacks", scope="mcp:tools mcp:admin"`},
		{&auth.Error{Reason: auth.TokenInQuery, Detail: "no"}, "/", `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error="invalid_request", error_description="no", scope="mcp:tools"`},
	} {
		if got := a.Challenge(tc.err, tc.path, []string{"mcp:tools"}); got != tc.want {
			t.Errorf("Challenge(%s, %s):\n got %s\nwant %s", tc.err.Reason, tc.path, got, tc.want)
		}
	}
	want := `{"resource":"https://mcp.example.com/mcp","authorization_servers":["` + is.URL + `"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	if got := string(a.MetadataJSON("/mcp", []string{"mcp:tools"})); got != want {
		t.Errorf("metadata:\n got %s\nwant %s", got, want)
	}
	want = `{"resource":"https://mcp.example.com","authorization_servers":["` + is.URL + `"],"bearer_methods_supported":["header"]}`
	if got := string(a.MetadataJSON("/", nil)); got != want {
		t.Errorf("root metadata:\n got %s\nwant %s", got, want)
	}

	// API keys alone: no metadata to point at.
	keysOnly, err := auth.New(parse(t, "upstreams: {fs: {command: [x]}}\nauth: {api_keys: [{name: ci, key: "+ciKey+"}]}\n"), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOnly.Challenge(&auth.Error{Reason: auth.NoCredentials}, "/mcp", nil); got != `Bearer realm="mcpgw"` {
		t.Errorf("keys-only challenge %s", got)
	}
	if keysOnly.Metadata("/mcp", nil) != nil {
		t.Error("keys-only metadata should be nil")
	}
}

func TestAPIKeyFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ci")
	if err := os.WriteFile(file, []byte(ciKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, "upstreams: {fs: {command: [x]}}\nauth: {api_keys: [{name: ci, key_file: "+file+"}]}\n")
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(request(ciKey), "")
	if err != nil || p.Subject != "ci" {
		t.Fatalf("key from file: %v %+v", err, p)
	}
	if _, err := a.Authenticate(request(ciKey+"x"), ""); reasonOf(err) != auth.Malformed {
		t.Errorf("wrong key: %v", err)
	}
	cfg.Auth.APIKeys[0].KeyFile = filepath.Join(dir, "missing")
	if _, err := auth.New(cfg, auth.Options{}); err == nil || !strings.Contains(err.Error(), "auth.api_keys[0] (ci): cannot read key_file") {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Auth.APIKeys[0].KeyFile = file
	if _, err := auth.New(cfg, auth.Options{}); err == nil || !strings.Contains(err.Error(), "the key is empty") {
		t.Errorf("empty file: %v", err)
	}
	if a, err := auth.New(parse(t, "upstreams: {fs: {command: [x]}}\n"), auth.Options{}); a != nil || err != nil {
		t.Errorf("no auth: %v %v", a, err)
	}
}

func TestPrincipalContext(t *testing.T) {
	ctx := context.Background()
	if auth.FromContext(ctx) != nil || auth.FromContext(auth.WithPrincipal(ctx, nil)) != nil {
		t.Error("anonymous context has a principal")
	}
	p := &auth.Principal{Subject: "s", APIKey: "k"}
	if auth.FromContext(auth.WithPrincipal(ctx, p)) != p {
		t.Error("principal lost")
	}
	var none *auth.Principal
	if none.Key() != "" || none.String() != "anonymous" || none.HasScope("x") {
		t.Error("nil principal")
	}
}

// TestVerifiedTokenCache: a remembered token is still checked for expiry
// and for the route's audience on every request.
func TestVerifiedTokenCache(t *testing.T) {
	is := authtest.NewIssuer(t)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	a := setup(t, is, "", auth.Options{Now: now})
	c := is.Claims("alice", resource)
	c["exp"] = clock.Add(time.Minute).Unix()
	tok := is.Token(c)
	for range 3 {
		if _, err := a.Authenticate(request(tok), resource); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Authenticate(request(tok), publicURL+"/admin"); reasonOf(err) != auth.WrongAudience {
		t.Errorf("cached token on another route: %v", err)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := a.Authenticate(request(tok), resource); reasonOf(err) != auth.Expired {
		t.Errorf("cached token after its exp: %v", err)
	}
}

// TestRotatedKeyAcceptedWithinASecond: a token signed with a key the
// issuer published after the gateway's last JWKS fetch is refused at most
// DefaultKeyRefreshInterval (it was 10 s), while forged kids inside that
// window still share the one fetch.
func TestRotatedKeyAcceptedWithinASecond(t *testing.T) {
	is := authtest.NewIssuer(t)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	a := setup(t, is, "", auth.Options{Now: now, KeyRefreshInterval: auth.DefaultKeyRefreshInterval})
	if _, err := a.Authenticate(request(is.Token(is.Claims("alice", resource))), resource); err != nil {
		t.Fatal(err)
	}
	before := is.JWKSFetches()
	is.Rotate(true)
	fresh := is.Token(is.Claims("alice", resource))
	// Within the interval of the last fetch: forged and fresh kids alike
	// are refused from the cache, with no fetch.
	for range 20 {
		forged := authtest.Sign(is.NewKey(jose.ES256), is.Claims("alice", resource))
		if _, err := a.Authenticate(request(forged), resource); reasonOf(err) != auth.BadSignature {
			t.Fatalf("forged: %v", err)
		}
	}
	if n := is.JWKSFetches() - before; n != 0 {
		t.Fatalf("%d JWKS fetches within the refresh interval, want 0", n)
	}
	advance(time.Second + 10*time.Millisecond)
	if _, err := a.Authenticate(request(fresh), resource); err != nil {
		t.Fatalf("token of the rotated key 1s after the last fetch: %v", err)
	}
	if n := is.JWKSFetches() - before; n != 1 {
		t.Errorf("%d JWKS fetches for the rotation, want 1", n)
	}
}
