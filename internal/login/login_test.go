package login_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/login"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/test/idptest"
)

const (
	gwClient = "mcpgw"
	gwSecret = "gateway-secret-at-the-provider"
	appCB    = "http://127.0.0.1:49152/callback" // never served: the browser stops at it
)

// env is a gateway's authorization server in front of two routes, /mcp
// and /other, each answering 200 with the caller's subject when the
// route's authentication accepts the bearer token; and the test OP.
type env struct {
	t     *testing.T
	base  string
	idp   *idptest.IdP
	srv   *login.Server
	reg   *prometheus.Registry
	state string
	cfg   *config.Config
}

func newEnv(t *testing.T, extra string) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, base: "http://" + ln.Addr().String(), reg: prometheus.NewRegistry(), state: t.TempDir()}
	e.idp = idptest.Start(t, idptest.Config{
		Users:   []idptest.User{{ID: "alice", Username: "alice", Password: "pw-alice", Email: "alice@example.com"}, {ID: "bob", Username: "bob", Password: "pw-bob"}},
		Clients: []idptest.Client{{ID: gwClient, Type: "web", Secret: gwSecret, RedirectURIs: []string{e.base + config.LoginCallbackPath}}},
	})
	cfg, err := config.Parse("login.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
public_url: %s
upstreams: {demo: {url: "http://127.0.0.1:1/mcp"}}
routes:
  - path: /
  - path: /mcp
  - path: /other
login:
  provider: {issuer: %q, client_id: %s, client_secret: %s}
%s`, e.base, e.idp.Issuer, gwClient, gwSecret, extra)), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	e.srv, err = login.New(cfg, login.Options{Logger: zaptest.NewLogger(t), StateDir: e.state, Registerer: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(cfg, auth.Options{Local: &auth.LocalIssuer{Issuer: e.srv.Issuer(), Keys: e.srv.KeySet(), Active: e.srv.Active}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range append(e.srv.Paths(), e.srv.WellKnownPaths()...) {
		mux.Handle(p, e.srv)
	}
	for _, route := range []string{"/", "/mcp", "/other"} {
		resource := a.Resource(route)
		pattern := route
		if route == "/" {
			pattern = "/{$}"
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			p, err := a.Authenticate(r, resource)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "%s %s %s", p.Subject, p.ClientID, strings.Join(p.Scopes, ","))
		})
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return e
}

// entries is the login_entries gauge of kind.
func (e *env) entries(kind string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_login_entries" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// register registers a client dynamically and returns its id.
func (e *env) register(name string, redirects ...string) string {
	e.t.Helper()
	status, body := e.postJSON("/oauth/register", map[string]any{"client_name": name, "redirect_uris": redirects, "token_endpoint_auth_method": "none"})
	if status != http.StatusCreated {
		e.t.Fatalf("register: %d %s", status, body)
	}
	var out struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal([]byte(body), &out)
	return out.ClientID
}

func (e *env) postJSON(path string, v any) (int, string) {
	b, _ := json.Marshal(v)
	resp, err := http.Post(e.base+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// browser is a user's browser: a cookie jar, following redirects except
// to the client's redirect URI, where it stops (landed).
type browser struct {
	e      *env
	c      *http.Client
	landed *url.URL
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{e: e}
	b.c = &http.Client{Jar: jar, Timeout: 15 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), "http://127.0.0.1:49152/") {
			b.landed = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

func (b *browser) do(req *http.Request) (int, string) {
	b.e.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browser) get(u string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

func (b *browser) post(u string, form url.Values, origin string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

var (
	opLoginID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	consentReq  = regexp.MustCompile(`name="request" value="([^"]+)"`)
	consentCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// flow is one authorization request's parameters.
type flow struct {
	clientID, redirect, verifier, state, resource, scope string
}

func newFlow(clientID string) *flow {
	return &flow{clientID: clientID, redirect: appCB, verifier: oauth2.GenerateVerifier(), state: "st-" + oauth2.GenerateVerifier()[:8]}
}

func (f *flow) url(base string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {f.redirect}, "state": {f.state},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(f.verifier)}, "code_challenge_method": {"S256"}}
	if f.resource != "" {
		q.Set("resource", f.resource)
	}
	if f.scope != "" {
		q.Set("scope", f.scope)
	}
	return base + "/oauth/authorize?" + q.Encode()
}

// signIn follows f as user up to the gateway's consent page (or, with a
// remembered consent, back to the client) and returns the last page.
func (b *browser) signIn(f *flow, user string) (int, string) {
	b.e.t.Helper()
	b.landed = nil
	status, page := b.get(f.url(b.e.base))
	if m := opLoginID.FindStringSubmatch(page); m != nil {
		status, page = b.post(b.e.idp.Issuer+"login/username", url.Values{"id": {m[1]}, "username": {user}, "password": {"pw-" + user}}, "")
	}
	return status, page
}

// approve posts the consent page's form with decision.
func (b *browser) approve(page, decision string) (int, string) {
	b.e.t.Helper()
	r, c := consentReq.FindStringSubmatch(page), consentCSRF.FindStringSubmatch(page)
	if r == nil || c == nil {
		b.e.t.Fatalf("no consent form in %.400s", page)
	}
	return b.post(b.e.base+"/oauth/consent", url.Values{"request": {r[1]}, "csrf": {c[1]}, "decision": {decision}}, b.e.base)
}

// code is what the client's redirect URI received.
func (b *browser) code(f *flow) string {
	b.e.t.Helper()
	if b.landed == nil {
		b.e.t.Fatal("the browser did not come back to the client")
	}
	q := b.landed.Query()
	if q.Get("error") != "" {
		b.e.t.Fatalf("authorization error %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != f.state || q.Get("iss") != b.e.srv.Issuer() {
		b.e.t.Fatalf("state %q iss %q; want %q and %q (RFC 9207)", q.Get("state"), q.Get("iss"), f.state, b.e.srv.Issuer())
	}
	return q.Get("code")
}

type tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Error   string `json:"error"`
	Desc    string `json:"error_description"`
	Scope   string `json:"scope"`
}

func (e *env) token(form url.Values) (int, tokens) {
	e.t.Helper()
	resp, err := http.PostForm(e.base+"/oauth/token", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var t tokens
	_ = json.NewDecoder(resp.Body).Decode(&t)
	return resp.StatusCode, t
}

func (e *env) redeem(f *flow, code string) (int, tokens) {
	return e.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {f.clientID}, "redirect_uri": {f.redirect}, "code_verifier": {f.verifier}})
}

func (e *env) refresh(clientID, rt string) (int, tokens) {
	return e.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {clientID}})
}

// call calls route with token and returns the status and body.
func (e *env) call(route, token string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.base+route, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// authorize runs a whole first sign-in of user with consent, returning
// the tokens.
func (e *env) authorize(b *browser, f *flow, user string) tokens {
	e.t.Helper()
	status, page := b.signIn(f, user)
	if b.landed == nil { // not remembered: the consent page
		if status != http.StatusOK {
			e.t.Fatalf("sign-in: %d %.400s", status, page)
		}
		b.approve(page, "allow")
	}
	status, tok := e.redeem(f, b.code(f))
	if status != http.StatusOK || tok.Access == "" || tok.Refresh == "" {
		e.t.Fatalf("token: %d %+v", status, tok)
	}
	return tok
}

func TestLoginEndToEnd(t *testing.T) {
	e := newEnv(t, "")
	// Discovery as a client does it: the RFC 8414 document.
	resp, err := http.Get(e.base + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta["issuer"] != e.srv.Issuer() || meta["registration_endpoint"] != e.base+"/oauth/register" || meta["authorization_response_iss_parameter_supported"] != true {
		t.Fatalf("metadata: %v", meta)
	}
	id := e.register("Test App", "http://127.0.0.1/callback")
	b := e.browser()
	f := newFlow(id)
	f.redirect = appCB // loopback: any port (RFC 8252)
	f.resource = e.base + "/mcp"
	status, page := b.signIn(f, "alice")
	if status != http.StatusOK || !strings.Contains(page, "Test App") || !strings.Contains(page, "alice@example.com") || !strings.Contains(page, "/mcp") || !strings.Contains(page, "127.0.0.1:49152") {
		t.Fatalf("consent page: %d %.600s", status, page)
	}
	b.approve(page, "allow")
	status, tok := e.redeem(f, b.code(f))
	if status != http.StatusOK {
		t.Fatalf("token: %d %+v", status, tok)
	}
	if st, body := e.call("/mcp", tok.Access); st != http.StatusOK || !strings.HasPrefix(body, "alice "+id) {
		t.Fatalf("/mcp with the gateway's token: %d %s", st, body)
	}
	// Audience-bound: the token of /mcp is refused on /other.
	if st, body := e.call("/other", tok.Access); st != http.StatusUnauthorized || !strings.Contains(body, "not this resource") {
		t.Fatalf("/other with the token of /mcp: %d %s; want 401 for another audience", st, body)
	}
	// Refresh rotates: the new refresh token works, the old one is spent.
	status, tok2 := e.refresh(id, tok.Refresh)
	if status != http.StatusOK || tok2.Refresh == "" || tok2.Refresh == tok.Refresh {
		t.Fatalf("refresh: %d %+v", status, tok2)
	}
	if st, _ := e.call("/mcp", tok2.Access); st != http.StatusOK {
		t.Fatalf("refreshed token refused: %d", st)
	}
	// Reuse of the spent one revokes the family: the newest dies too.
	if status, r := e.refresh(id, tok.Refresh); status != http.StatusBadRequest || r.Error != "invalid_grant" || !strings.Contains(r.Desc, "already used") {
		t.Fatalf("reused refresh token: %d %+v; want invalid_grant", status, r)
	}
	if status, r := e.refresh(id, tok2.Refresh); status != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Fatalf("the family's newest refresh token after reuse: %d %+v; want invalid_grant", status, r)
	}
	// And its access token, although verified (and cached) before.
	if st, body := e.call("/mcp", tok2.Access); st != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Fatalf("the family's access token after reuse: %d %s; want 401, revoked", st, body)
	}
	// Consent is remembered for this user and client: no page.
	f2 := newFlow(id)
	f2.resource = e.base + "/mcp"
	if _, page := b.signIn(f2, "alice"); b.landed == nil {
		t.Fatalf("a remembered consent asked again: %.300s", page)
	}
	if st, tok := e.redeem(f2, b.code(f2)); st != http.StatusOK || tok.Access == "" {
		t.Fatalf("second authorization: %d %+v", st, tok)
	}
	// Another client asks again; denied, it gets access_denied.
	other := e.register("Other App", "http://127.0.0.1/callback")
	f3 := newFlow(other)
	f3.resource = e.base + "/mcp"
	status, page = b.signIn(f3, "alice")
	if status != http.StatusOK || !strings.Contains(page, "Other App") || b.landed != nil {
		t.Fatalf("a second client was not asked for consent: %d %.300s", status, page)
	}
	b.approve(page, "deny")
	if b.landed == nil || b.landed.Query().Get("error") != "access_denied" || b.landed.Query().Get("state") != f3.state {
		t.Fatalf("denied consent: landed %v; want error=access_denied with the state", b.landed)
	}
	// The browser session is what other packages ask.
	req, _ := http.NewRequest(http.MethodGet, e.base+"/x", nil)
	for _, c := range b.c.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if u := e.srv.User(req); u == nil || u.Subject != "alice" {
		t.Fatalf("browser session user: %+v; want alice", u)
	}
}

func TestLoginHostileInputs(t *testing.T) {
	e := newEnv(t, "  registrations_per_minute: 3\n")
	id := e.register("App", "http://127.0.0.1/callback")
	b := e.browser()

	t.Run("redirect mismatch", func(t *testing.T) {
		f := newFlow(id)
		f.redirect = "https://evil.example/callback"
		status, page := b.get(f.url(e.base))
		if status != http.StatusBadRequest || !strings.Contains(page, "not one registered") || b.landed != nil {
			t.Fatalf("%d %.300s; want a 400 page and no redirect", status, page)
		}
	})
	t.Run("missing or plain PKCE", func(t *testing.T) {
		for _, method := range []string{"", "plain"} {
			b.landed = nil
			q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {appCB}, "state": {"s"}}
			if method != "" {
				q.Set("code_challenge", "abc")
				q.Set("code_challenge_method", method)
			}
			b.get(e.base + "/oauth/authorize?" + q.Encode())
			if b.landed == nil || b.landed.Query().Get("error") != "invalid_request" || !strings.Contains(b.landed.Query().Get("error_description"), "S256") {
				t.Fatalf("PKCE %q: landed %v; want invalid_request naming S256", method, b.landed)
			}
		}
		if n := e.entries("pending"); n != 0 {
			t.Fatalf("%v sign-ins kept after refusals", n)
		}
	})
	t.Run("replayed code revokes its tokens", func(t *testing.T) {
		f := newFlow(id)
		f.resource = e.base + "/mcp"
		status, page := b.signIn(f, "alice")
		if status != http.StatusOK {
			t.Fatalf("%d %.300s", status, page)
		}
		if b.landed == nil {
			b.approve(page, "allow")
		}
		code := b.code(f)
		st, tok := e.redeem(f, code)
		if st != http.StatusOK {
			t.Fatalf("first redemption: %d %+v", st, tok)
		}
		if st, r := e.redeem(f, code); st != http.StatusBadRequest || r.Error != "invalid_grant" || !strings.Contains(r.Desc, "already used") {
			t.Fatalf("replayed code: %d %+v", st, r)
		}
		if st, r := e.refresh(id, tok.Refresh); st != http.StatusBadRequest || r.Error != "invalid_grant" {
			t.Fatalf("refresh token of a replayed code: %d %+v; want revoked", st, r)
		}
		if st, body := e.call("/mcp", tok.Access); st != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
			t.Fatalf("access token of a replayed code: %d %s; want 401, revoked", st, body)
		}
	})
	t.Run("wrong verifier", func(t *testing.T) {
		f := newFlow(id)
		f.resource = e.base + "/mcp"
		b.signIn(f, "alice")
		code := b.code(f)
		f.verifier = oauth2.GenerateVerifier()
		if st, r := e.redeem(f, code); st != http.StatusBadRequest || !strings.Contains(r.Desc, "code_verifier") {
			t.Fatalf("wrong verifier: %d %+v", st, r)
		}
	})
	t.Run("replayed state", func(t *testing.T) {
		fresh := e.browser()
		f := newFlow(id)
		f.resource = e.base + "/mcp"
		// Stop at the gateway's callback to keep its URL.
		var callback string
		fresh.c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), e.base+config.LoginCallbackPath) {
				callback = req.URL.String()
				return http.ErrUseLastResponse
			}
			return nil
		}
		fresh.signIn(f, "bob")
		if callback == "" {
			t.Fatal("the provider did not send the browser to the gateway's callback")
		}
		fresh.c.CheckRedirect = nil
		// Another browser presenting it (a forwarded link: login CSRF)
		// finds nothing, and leaves it to its own browser.
		if st, page := e.browser().get(callback); st != http.StatusBadRequest || !strings.Contains(page, "another browser") {
			t.Fatalf("callback in another browser: %d %.300s; want 400", st, page)
		}
		cu, _ := url.Parse(callback)
		cookies := fresh.c.Jar.Cookies(cu) // the flow cookie as it was
		if st, page := fresh.get(callback); st != http.StatusOK || !strings.Contains(page, "Allow") {
			t.Fatalf("callback: %d %.300s", st, page)
		}
		// Replayed with the very cookies it first came with: the state
		// is spent.
		req, _ := http.NewRequest(http.MethodGet, callback, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), "already used") {
			t.Fatalf("replayed callback: %d %.300s; want 400", resp.StatusCode, page)
		}
	})
	t.Run("cross-site consent", func(t *testing.T) {
		fresh := e.browser()
		f := newFlow(e.register("App 2", "http://127.0.0.1/callback"))
		f.resource = e.base + "/mcp"
		_, page := fresh.signIn(f, "bob")
		r, c := consentReq.FindStringSubmatch(page), consentCSRF.FindStringSubmatch(page)
		if r == nil || c == nil {
			t.Fatalf("no consent form: %.300s", page)
		}
		before := e.entries("consents")
		st, body := fresh.post(e.base+"/oauth/consent", url.Values{"request": {r[1]}, "csrf": {c[1]}, "decision": {"allow"}}, "https://evil.example")
		if st != http.StatusForbidden || !strings.Contains(body, "another site") || fresh.landed != nil {
			t.Fatalf("cross-site POST: %d %.300s", st, body)
		}
		// Without the session's csrf token (a forged form) too.
		st, body = fresh.post(e.base+"/oauth/consent", url.Values{"request": {r[1]}, "csrf": {"forged"}, "decision": {"allow"}}, e.base)
		if st != http.StatusForbidden || fresh.landed != nil {
			t.Fatalf("forged csrf: %d %.300s", st, body)
		}
		if after := e.entries("consents"); after != before {
			t.Fatalf("consents %v → %v after refused posts", before, after)
		}
	})
	t.Run("registration spam", func(t *testing.T) {
		before := e.entries("clients")
		var last int
		var body string
		for range 5 {
			last, body = e.postJSON("/oauth/register", map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}})
		}
		if last != http.StatusTooManyRequests || !strings.Contains(body, "registrations_per_minute") {
			t.Fatalf("registration spam: %d %s; want 429 naming the key", last, body)
		}
		if after := e.entries("clients"); after > before+3 {
			t.Fatalf("clients %v → %v; at most 3 a minute", before, after)
		}
	})
	t.Run("client metadata at a private address", func(t *testing.T) {
		f := newFlow("https://10.0.0.1/client.json")
		st, page := e.browser().get(f.url(e.base))
		if st != http.StatusBadRequest || !strings.Contains(page, "private") {
			t.Fatalf("%d %.300s; want 400 naming the private address", st, page)
		}
		if n := e.entries("metadata_clients"); n != 0 {
			t.Fatalf("%v metadata clients kept", n)
		}
	})
}

func TestLoginAudienceOfTheRootRoute(t *testing.T) {
	e := newEnv(t, "")
	id := e.register("App", "http://127.0.0.1/callback")
	f := newFlow(id)
	f.resource = e.base + "/" // the route at /: public_url itself, as a client's URL library writes it
	tok := e.authorize(e.browser(), f, "alice")
	if st, body := e.call("/", tok.Access); st != http.StatusOK {
		t.Fatalf("/ with its token: %d %s", st, body)
	}
	// An OIDC token for public_url is good on every route; the gateway's
	// own is for exactly the route it names.
	if st, body := e.call("/mcp", tok.Access); st != http.StatusUnauthorized {
		t.Fatalf("/mcp with the token of /: %d %s; want 401", st, body)
	}
}

func TestLoginStateSurvivesARestart(t *testing.T) {
	e := newEnv(t, "")
	id := e.register("App", "http://127.0.0.1/callback")
	f := newFlow(id)
	f.resource = e.base + "/mcp"
	tok := e.authorize(e.browser(), f, "alice")
	// A second server on the same state directory (a restart) knows the
	// refresh token and signs with the same keys.
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := login.New(e.cfg, login.Options{StateDir: e.state})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.Refresh}, "client_id": {id}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	again.ServeHTTP(rec, req)
	var out tokens
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != http.StatusOK || out.Access == "" {
		t.Fatalf("refresh after a restart: %d %s", rec.Code, rec.Body)
	}
	if st, body := e.call("/mcp", out.Access); st != http.StatusOK {
		t.Fatalf("a token of the restarted server: %d %s", st, body)
	}
}

func TestLoginRegistrationBound(t *testing.T) {
	e := newEnv(t, "  max_clients: 2\n")
	e.register("one", "http://127.0.0.1/cb")
	e.register("two", "http://127.0.0.1/cb")
	st, body := e.postJSON("/oauth/register", map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb"}})
	if st != http.StatusServiceUnavailable || !strings.Contains(body, "login.max_clients") {
		t.Fatalf("third registration: %d %s; want 503 naming login.max_clients", st, body)
	}
	if n := e.entries("clients"); n != 2 {
		t.Fatalf("%v clients kept; want 2", n)
	}
	// A redirect URI the gateway would never send a code to is refused.
	for _, bad := range []string{"http://evil.example/cb", "https://app.example/cb#frag", "myapp:/cb"} {
		if st, body := e.postJSON("/oauth/register", map[string]any{"redirect_uris": []string{bad}}); st != http.StatusBadRequest || !strings.Contains(body, "invalid_redirect_uri") {
			t.Fatalf("redirect %q: %d %s", bad, st, body)
		}
	}
}

func TestLoginSignInReturnsOnlyToTheGateway(t *testing.T) {
	e := newEnv(t, "")
	for _, bad := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
		st, page := e.browser().get(e.base + "/oauth/signin?return_to=" + url.QueryEscape(bad))
		if st != http.StatusBadRequest || !strings.Contains(page, "not a page of this gateway") {
			t.Fatalf("return_to %q: %d %.200s; want 400", bad, st, page)
		}
	}
	b := e.browser()
	var back string
	b.c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.base+"/mcp/page") {
			back = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	_, page := b.get(e.base + "/oauth/signin?return_to=" + url.QueryEscape("/mcp/page?x=1"))
	m := opLoginID.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no OP login form: %.300s", page)
	}
	b.post(e.idp.Issuer+"login/username", url.Values{"id": {m[1]}, "username": {"bob"}, "password": {"pw-bob"}}, "")
	if back != e.base+"/mcp/page?x=1" {
		t.Fatalf("came back to %q", back)
	}
	req := httptest.NewRequest(http.MethodGet, e.base+"/mcp/page", nil)
	for _, c := range b.c.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	if u := e.srv.User(req); u == nil || u.Subject != "bob" {
		t.Fatalf("user after sign-in: %+v", u)
	}
	if u := e.srv.User(httptest.NewRequest(http.MethodGet, e.base+"/", nil)); u != nil {
		t.Fatalf("a browser without the cookie is %+v", u)
	}
}

func TestLoginConsentRevoked(t *testing.T) {
	e := newEnv(t, "")
	id := e.register("App", "http://127.0.0.1/callback")
	b := e.browser()
	f := newFlow(id)
	f.resource = e.base + "/mcp"
	tok := e.authorize(b, f, "alice")
	st, page := b.get(e.base + "/oauth/consents")
	c := consentCSRF.FindStringSubmatch(page)
	if st != http.StatusOK || c == nil || !strings.Contains(page, "App") {
		t.Fatalf("approvals page: %d %.400s", st, page)
	}
	// Revoking is a form of the gateway's own: cross-site, it changes nothing.
	if st, _ := b.post(e.base+"/oauth/consents", url.Values{"client_id": {id}, "csrf": {c[1]}}, "https://evil.example"); st != http.StatusForbidden {
		t.Fatalf("cross-site revocation: %d; want 403", st)
	}
	if st, _ := e.call("/mcp", tok.Access); st != http.StatusOK {
		t.Fatalf("token after a refused revocation: %d", st)
	}
	b.post(e.base+"/oauth/consents", url.Values{"client_id": {id}, "csrf": {c[1]}}, e.base)
	if st, _ := e.call("/mcp", tok.Access); st != http.StatusUnauthorized {
		t.Fatalf("access token after the approval was revoked: %d; want 401", st)
	}
	if st, r := e.refresh(id, tok.Refresh); st != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Fatalf("refresh after the approval was revoked: %d %+v", st, r)
	}
	f2 := newFlow(id)
	f2.resource = e.base + "/mcp"
	if st, page := b.signIn(f2, "alice"); st != http.StatusOK || b.landed != nil || consentReq.FindStringSubmatch(page) == nil {
		t.Fatalf("after revocation the client was not asked again: %d %v %.200s", st, b.landed, page)
	}
}

func TestLoginClientMetadataDocument(t *testing.T) {
	e := newEnv(t, "  insecure_client_metadata_loopback: true\n")
	var docURL string
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := docURL
		if r.URL.Path == "/liar.json" {
			id = "https://someone.else/client.json"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": "CIMD App", "redirect_uris": []string{"http://127.0.0.1/callback"}, "token_endpoint_auth_method": "none"})
	}))
	t.Cleanup(docs.Close)
	docURL = docs.URL + "/client.json"
	b := e.browser()
	f := newFlow(docURL)
	f.resource = e.base + "/mcp"
	st, page := b.signIn(f, "alice")
	if st != http.StatusOK || !strings.Contains(page, "CIMD App") {
		t.Fatalf("consent for a metadata document client: %d %.300s", st, page)
	}
	b.approve(page, "allow")
	if st, tok := e.redeem(f, b.code(f)); st != http.StatusOK {
		t.Fatalf("token: %d %+v", st, tok)
	} else if st, body := e.call("/mcp", tok.Access); st != http.StatusOK || !strings.Contains(body, docURL) {
		t.Fatalf("call: %d %s; want the document's URL as client_id", st, body)
	}
	// A document naming another client_id is refused.
	st, page = e.browser().get(newFlow(docs.URL + "/liar.json").url(e.base))
	if st != http.StatusBadRequest || !strings.Contains(page, "not its own URL") {
		t.Fatalf("a document naming another client: %d %.300s", st, page)
	}
}

// Fetching documents is bounded: past maxFetching at once, an authorize
// request naming another is refused at once rather than queued.
func TestLoginClientMetadataFetchesBounded(t *testing.T) {
	e := newEnv(t, "  insecure_client_metadata_loopback: true\n")
	release := make(chan struct{})
	var mu sync.Mutex
	inflight := 0
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		mu.Unlock()
		<-release
		http.Error(w, "gone", http.StatusNotFound)
	}))
	t.Cleanup(docs.Close)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(newFlow(fmt.Sprintf("%s/c%d.json", docs.URL, i)).url(e.base))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	testwait.Until(t, "8 document fetches under way", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inflight == 8
	})
	st, page := e.browser().get(newFlow(docs.URL + "/ninth.json").url(e.base))
	close(release)
	wg.Wait()
	if st != http.StatusBadRequest || !strings.Contains(page, "being fetched already") {
		t.Fatalf("a ninth document at once: %d %.300s", st, page)
	}
}

// One user signing in without end ends their own oldest grants, within
// login.max_grants_per_user, rather than filling login.max_grants.
func TestLoginGrantsPerUserBound(t *testing.T) {
	e := newEnv(t, "  max_grants_per_user: 2\n")
	id := e.register("App", "http://127.0.0.1/callback")
	b := e.browser()
	var toks []tokens
	for range 3 {
		f := newFlow(id)
		f.resource = e.base + "/mcp"
		toks = append(toks, e.authorize(b, f, "alice"))
	}
	if n := e.entries("families"); n != 2 {
		t.Fatalf("%v families kept for one user; want 2", n)
	}
	if st, r := e.refresh(id, toks[0].Refresh); st != http.StatusBadRequest || r.Error != "invalid_grant" {
		t.Fatalf("the oldest grant's refresh token: %d %+v; want invalid_grant", st, r)
	}
	if st, _ := e.call("/mcp", toks[0].Access); st != http.StatusUnauthorized {
		t.Fatalf("the oldest grant's access token: %d; want 401", st)
	}
	for _, tok := range toks[1:] {
		if st, r := e.refresh(id, tok.Refresh); st != http.StatusOK {
			t.Fatalf("a kept grant's refresh token: %d %+v", st, r)
		}
	}
}

// Sign-ins are begun without a credential: one address beginning them
// without end is refused past login.max_pending_per_source, and the other
// places stay free.
func TestLoginPendingPerSourceBound(t *testing.T) {
	e := newEnv(t, "  max_pending_per_source: 3\n")
	for i := range 3 {
		if st, page := e.browser().get(e.base + "/oauth/signin?return_to=/x"); st != http.StatusOK || opLoginID.FindStringSubmatch(page) == nil {
			t.Fatalf("sign-in %d: %d %.200s; want the OP's login form", i, st, page)
		}
	}
	st, page := e.browser().get(e.base + "/oauth/signin?return_to=/x")
	if st != http.StatusTooManyRequests || !strings.Contains(page, "login.max_pending_per_source") {
		t.Fatalf("a fourth sign-in from one address: %d %.300s; want 429 naming the key", st, page)
	}
	if n := e.entries("pending"); n != 3 {
		t.Fatalf("%v sign-ins kept; want 3", n)
	}
}
