package peruser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/test/idptest"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one upstream protected by the test OP, and the gateway's pages
// for it on a loopback listener whose address the OP knows as the
// redirect URI's.
type env struct {
	t        *testing.T
	idp      *idptest.IdP
	public   string
	upstream string // the protected resource's URL
	keys     [][]byte
	store    string
	clock    *clock
	reg      *prometheus.Registry
	metrics  *peruser.Metrics
	src      atomic.Pointer[peruser.Source]
	done     chan string // elicitation ids of completed flows
	max      int
	browsers peruser.BrowserUsers // the gateway's browser session; nil: none
}

const name = "gh"

func key(b byte) []byte { k := make([]byte, 32); k[0] = b; return k }

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv whose OP config and gateway pages setup may
// change first (the mux gets the gateway's other pages).
func newEnvWith(t *testing.T, setup func(e *env, cfg *idptest.Config, mux *http.ServeMux)) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, public: "http://" + ln.Addr().String(), keys: [][]byte{key(1)}, store: filepath.Join(t.TempDir(), "state", "tokens-gh.json"),
		clock: &clock{t: time.Now()}, done: make(chan string, 8), max: 100}
	cfg := idptest.Config{
		Users:   []idptest.User{{ID: "alice", Username: "alice", Password: "pw-a"}, {ID: "bob", Username: "bob", Password: "pw-b"}},
		Clients: []idptest.Client{{ID: "mcpgw", Type: "web", Secret: "s3cret", RedirectURIs: []string{e.public + config.RedirectPath(name)}}},
	}
	mux := http.NewServeMux()
	if setup != nil {
		setup(e, &cfg, mux)
	}
	e.idp = idptest.Start(t, cfg)
	// The upstream publishes its RFC 9728 metadata naming the OP.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, "http://"+r.Host+"/mcp", e.idp.Issuer)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(up.Close)
	e.upstream = up.URL + "/mcp"
	src := func() *peruser.Source { return e.src.Load() }
	mux.HandleFunc("GET "+config.StartPath(name), func(w http.ResponseWriter, r *http.Request) { src().ServeStart(w, r) })
	mux.HandleFunc("GET "+config.RedirectPath(name), func(w http.ResponseWriter, r *http.Request) { src().ServeCallback(w, r) })
	gw := httptest.NewUnstartedServer(mux)
	gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	t.Cleanup(gw.Close)
	e.restart()
	return e
}

// restart builds the source again over the same file and key ring, as a
// gateway restart does.
func (e *env) restart() {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	e.metrics = peruser.NewMetrics(e.reg)
	cfg := &config.UpstreamPerUser{ClientID: "mcpgw", ClientSecret: "s3cret", Issuer: e.idp.Issuer, Scopes: []string{"openid"}}
	client, err := peruser.NewOAuthClient(name, e.upstream, cfg, nil, nil, nil, e.clock.Now)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := peruser.OpenFile(e.store, e.max, e.clock.Now)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := peruser.New(peruser.Options{
		Upstream: name, PublicURL: e.public, Client: client, Backend: b, Keys: e.keys,
		Clock: e.clock.Now, Metrics: e.metrics, OnComplete: func(id string) { e.done <- id }, Browser: e.browsers,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.src.Store(s)
}

func subject(user string) credentials.Subject {
	return credentials.Subject{Principal: &auth.Principal{Subject: user, Issuer: "https://login.example.com"}}
}

// elicit expects Token to ask for authorization and returns the error.
func (e *env) elicit(user string) *credentials.AuthorizationRequiredError {
	e.t.Helper()
	tok, err := e.src.Load().Token(context.Background(), subject(user))
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) {
		e.t.Fatalf("Token(%s) = %q, %v; want *AuthorizationRequiredError", user, tok, err)
	}
	if ar.Upstream != name || ar.ElicitationID == "" || !strings.HasPrefix(ar.URL, e.public+config.StartPath(name)+"?t=") {
		e.t.Fatalf("authorization required = %+v; want the start page of %s with an elicitation id", ar, e.public)
	}
	return ar
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// browser is a user's browser: a cookie jar, redirects followed except
// into the gateway's callback, which it records.
type browser struct {
	c        *http.Client
	callback *url.URL
	visited  []*url.URL // every redirect followed (the authorization request among them)
}

func newBrowser(e *env) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{}
	b.c = &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		b.visited = append(b.visited, req.URL)
		if req.URL.Path == config.RedirectPath(name) {
			b.callback = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

// consent follows link to the OP, fills its login form as user and
// returns the callback URL the OP sent the browser to (not yet visited).
func (b *browser) consent(t *testing.T, e *env, link, user, password string) *url.URL {
	t.Helper()
	status, page := b.get(t, link)
	m := hiddenID.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("start link: %d %.400s; want the OP's login form", status, page)
	}
	resp, err := b.c.PostForm(e.idp.Issuer+"login/username", url.Values{"id": {m[1]}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if b.callback == nil {
		t.Fatalf("the OP did not send the browser to the gateway's callback (status %d)", resp.StatusCode)
	}
	return b.callback
}

func (b *browser) get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// authorize runs a whole flow for user and checks the success page.
func (e *env) authorize(user, password string) {
	e.t.Helper()
	ar := e.elicit(user)
	b := newBrowser(e)
	cb := b.consent(e.t, e, ar.URL, user, password)
	if status, page := b.get(e.t, cb.String()); status != http.StatusOK || !strings.Contains(page, "You can close this window") || !strings.Contains(page, user+"@https://login.example.com") {
		e.t.Fatalf("callback: %d %s", status, page)
	}
	select {
	case id := <-e.done:
		if id != ar.ElicitationID {
			e.t.Fatalf("completed elicitation %q, want %q", id, ar.ElicitationID)
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		e.t.Fatal("OnComplete was not called")
	}
}

// token returns user's upstream token and checks it is theirs.
func (e *env) token(user string) string {
	e.t.Helper()
	tok, err := e.src.Load().Token(context.Background(), subject(user))
	if err != nil {
		e.t.Fatalf("Token(%s): %v", user, err)
	}
	c, err := e.idp.Verify(context.Background(), tok, "mcpgw")
	if err != nil || c.Subject != user {
		e.t.Fatalf("token of %s: sub %q, %v", user, c.Subject, err)
	}
	return tok
}

func TestFlowStoresEachUsersOwnToken(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	alice := e.token("alice")
	if again := e.token("alice"); again != alice {
		t.Fatal("a second Token returned another token: the stored one was not used")
	}
	// bob has no authorization of his own: alice's never serves him.
	e.elicit("bob")
	e.authorize("bob", "pw-b")
	if bob := e.token("bob"); bob == alice {
		t.Fatal("bob got alice's token")
	}
	if got := testutil.ToFloat64(e.metricsGauge()); got != 2 {
		t.Fatalf("mcpgw_peruser_tokens = %v, want 2", got)
	}
	// At rest the file holds no token, and only its owner reads it.
	fi, err := os.Stat(e.store)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(e.store)
	if strings.Contains(string(data), alice) || strings.Contains(string(data), "alice") {
		t.Fatal("the token file shows a token or a principal in clear")
	}
}

func (e *env) metricsGauge() prometheus.Collector {
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "mcpgw_peruser_tokens" {
			return gaugeOf(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return gaugeOf(-1)
}

func gaugeOf(v float64) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	g.Set(v)
	return g
}

func TestRestartKeepsTheToken(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	before := e.token("alice")
	codes := e.idp.TokenRequests(t)["authorization_code"]
	e.restart()
	if after := e.token("alice"); after != before {
		t.Fatal("after a restart the stored token was not used")
	}
	// A rotated ring (new key first, the old one still there) opens it too.
	e.keys = [][]byte{key(2), key(1)}
	e.restart()
	if after := e.token("alice"); after != before {
		t.Fatal("after a key rotation the stored token was not used")
	}
	if n := e.idp.TokenRequests(t)["authorization_code"]; n != codes {
		t.Fatalf("%d new code exchanges after the restarts, want none", n-codes)
	}
	// Without the key that sealed it, it is gone: authorize again.
	e.keys = [][]byte{key(3)}
	e.restart()
	e.elicit("alice")
}

// TestSetKeysRotatesInPlace: a reload that rotates the ring rekeys the
// live source. What it seals afterwards (a token record here) opens with
// the new key alone, and what it sealed before still opens meanwhile.
func TestSetKeysRotatesInPlace(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	before := e.token("alice")
	if err := e.src.Load().SetKeys([][]byte{key(2), key(1)}); err != nil {
		t.Fatal(err)
	}
	if got := e.token("alice"); got != before {
		t.Fatal("after rekeying, the token sealed with the old key was not used")
	}
	e.authorize("bob", "pw-b") // sealed with key 2
	bob := e.token("bob")
	e.keys = [][]byte{key(2)} // a replica that knows only the new key
	e.restart()
	if got := e.token("bob"); got != bob {
		t.Fatal("a record sealed after rekeying did not open with the new key alone")
	}
	e.elicit("alice") // sealed with key 1 only: gone without it
	if err := e.src.Load().SetKeys(nil); err == nil {
		t.Error("an empty ring was accepted")
	}
}

func TestExpiryRefreshesOncePerPrincipal(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	first := e.token("alice")
	refreshes := e.idp.TokenRequests(t)["refresh_token"]
	e.clock.Add(10 * time.Minute) // past the access token's expiry (the OP's is at most 5m)
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := e.src.Load().Token(context.Background(), subject("alice"))
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		}()
	}
	wg.Wait()
	for _, g := range got {
		if g == first || g != got[0] {
			t.Fatalf("after expiry: tokens %q..., want one new token for all", got[0][:10])
		}
	}
	if n := e.idp.TokenRequests(t)["refresh_token"] - refreshes; n != 1 {
		t.Fatalf("%d refreshes for 20 concurrent calls, want 1", n)
	}
	e.token("alice") // the refreshed token is alice's
}

func TestRefusedTokenIsRefreshedOnceThenDropped(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	s := e.src.Load()
	first := e.token("alice")
	s.Refused(context.Background(), subject("alice"), first)
	second := e.token("alice")
	if second == first {
		t.Fatal("the refused token was returned again")
	}
	s.Refused(context.Background(), subject("alice"), second)
	e.elicit("alice") // refused right after the refresh it caused: authorize again
}

func TestStartAndCallbackRefusals(t *testing.T) {
	e := newEnv(t)
	ar := e.elicit("alice")
	u, _ := url.Parse(ar.URL)
	link := u.Query().Get("t")
	tampered := []byte(link)
	tampered[len(tampered)/2] ^= 1
	for _, tc := range []struct {
		name, url, want string
	}{
		{"no link", e.public + config.StartPath(name), "not valid"},
		{"tampered link", e.public + config.StartPath(name) + "?t=" + string(tampered), "not valid"},
	} {
		status, page := newBrowser(e).get(t, tc.url)
		if status != http.StatusBadRequest || !strings.Contains(page, tc.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", tc.name, status, page, tc.want)
		}
	}

	b := newBrowser(e)
	cb := b.consent(t, e, ar.URL, "alice", "pw-a")
	// The start link works once.
	if status, page := newBrowser(e).get(t, ar.URL); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Errorf("replayed start link: %d %s", status, page)
	}
	q := cb.Query()
	badState := cloneQuery(q)
	st := []byte(q.Get("state"))
	st[len(st)/3] ^= 2
	badState.Set("state", string(st))
	noState := cloneQuery(q)
	noState.Del("state")
	// A copy of the browser, cookie and all, to replay the answer from
	// after the first use cleared the cookie.
	copied := newBrowser(e)
	copied.c.Jar.SetCookies(cb, b.c.Jar.Cookies(cb))
	for _, tc := range []struct {
		name   string
		b      *browser
		query  url.Values
		status int
		want   string
	}{
		{"tampered state", b, badState, http.StatusBadRequest, "state of this authorization answer is missing or not valid"},
		{"no state", b, noState, http.StatusBadRequest, "missing or not valid"},
		{"another browser (no cookie: CSRF)", newBrowser(e), q, http.StatusBadRequest, "did not come back to the browser that started it"},
		{"the real answer", b, q, http.StatusOK, "You can close this window"},
		{"the answer replayed", copied, q, http.StatusBadRequest, "already used"},
		{"the answer again, cookie cleared", b, q, http.StatusBadRequest, "did not come back"},
	} {
		u := *cb
		u.RawQuery = tc.query.Encode()
		status, page := tc.b.get(t, u.String())
		if status != tc.status || !strings.Contains(page, tc.want) {
			t.Errorf("%s: %d %s; want %d naming %q", tc.name, status, page, tc.status, tc.want)
		}
		if h := status; h >= 300 && h < 400 {
			t.Errorf("%s: a redirect (%d): refusals are pages", tc.name, h)
		}
	}
	e.token("alice")
	for reason, want := range map[string]float64{"bad_link": 2, "replay": 2, "bad_state": 2, "csrf": 2} {
		if got := testutil.ToFloat64(refusals(e, reason)); got != want {
			t.Errorf("refusals{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

func refusals(e *env, reason string) prometheus.Collector {
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_peruser_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return gaugeOf(m.GetCounter().GetValue())
				}
			}
		}
	}
	return gaugeOf(0)
}

func cloneQuery(q url.Values) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

func TestExpiredLinkAndStateAreRefused(t *testing.T) {
	e := newEnv(t)
	ar := e.elicit("alice")
	e.clock.Add(config.DefaultPerUserLinkLifetime + time.Second)
	if status, page := newBrowser(e).get(t, ar.URL); status != http.StatusBadRequest || !strings.Contains(page, "expired") {
		t.Fatalf("expired link: %d %s", status, page)
	}
	ar = e.elicit("alice")
	b := newBrowser(e)
	cb := b.consent(t, e, ar.URL, "alice", "pw-a")
	e.clock.Add(config.DefaultPerUserLinkLifetime + time.Second)
	if status, page := b.get(t, cb.String()); status != http.StatusBadRequest || !strings.Contains(page, "expired") {
		t.Fatalf("expired state: %d %s", status, page)
	}
	e.elicit("alice")
}

func TestStoreFullRefusesClearly(t *testing.T) {
	e := newEnv(t)
	e.max = 1
	e.restart()
	e.authorize("alice", "pw-a")
	ar := e.elicit("bob")
	b := newBrowser(e)
	cb := b.consent(t, e, ar.URL, "bob", "pw-b")
	if status, page := b.get(t, cb.String()); status != http.StatusServiceUnavailable || !strings.Contains(page, "max_tokens") {
		t.Fatalf("store full: %d %s", status, page)
	}
	if got := testutil.ToFloat64(refusals(e, "store_full")); got != 1 {
		t.Fatalf("refusals{store_full} = %v", got)
	}
	e.token("alice") // a principal already held is served
}

func TestRevoke(t *testing.T) {
	e := newEnv(t)
	e.authorize("alice", "pw-a")
	e.authorize("bob", "pw-b")
	// The caller's own DELETE (behind the downstream authentication).
	req := httptest.NewRequest(http.MethodDelete, config.TokenPath(name), nil)
	req = req.WithContext(auth.WithPrincipal(req.Context(), subject("alice").Principal))
	rec := httptest.NewRecorder()
	e.src.Load().ServeRevoke(rec, req)
	var out struct{ Revoked bool }
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil || !out.Revoked {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	e.elicit("alice")
	e.token("bob") // only alice's went
	// An admin's, from another process's view of the same file (the CLI).
	b, err := peruser.OpenFile(e.store, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := peruser.StoreKeys(e.keys, name, subject("bob").Key())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Delete(context.Background(), keys[0]); err != nil || !ok {
		t.Fatalf("admin revoke: %v %v", ok, err)
	}
	e.elicit("bob") // the running source sees the file change
	// Without a principal, nothing to revoke.
	rec = httptest.NewRecorder()
	e.src.Load().ServeRevoke(rec, httptest.NewRequest(http.MethodDelete, config.TokenPath(name), nil))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("DELETE without a principal: %d", rec.Code)
	}
}

// TestStepUpAsksForTheUnionAndReplacesTheGrant: with the test OP, alice's
// authorization (scope openid) meets an upstream 403 insufficient_scope
// for profile. The source answers with a step-up link whose authorization
// request asks for openid and profile (the union, SEP-2350); after
// consent her new token replaces the old one, and the same challenge again
// gets no new link (the retry limit: it was asked for already).
func TestStepUpAsksForTheUnionAndReplacesTheGrant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.authorize("alice", "pw-a")
	first := e.token("alice")
	challenge := []string{`Bearer error="insufficient_scope", scope="profile", resource_metadata="` + strings.TrimSuffix(e.upstream, "/mcp") + `/.well-known/oauth-protected-resource/mcp"`}
	err := e.src.Load().InsufficientScope(ctx, subject("alice"), first, challenge)
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) || !strings.HasPrefix(ar.URL, e.public+config.StartPath(name)+"?t=") {
		t.Fatalf("InsufficientScope = %v, want a step-up link to the start page", err)
	}
	// Until she consents, the old token still serves what it was granted for.
	if tok := e.token("alice"); tok != first {
		t.Fatal("the stored token changed before the step-up was consented to")
	}
	b := newBrowser(e)
	cb := b.consent(t, e, ar.URL, "alice", "pw-a")
	var asked []string
	for _, u := range b.visited {
		if u.Query().Get("code_challenge") != "" {
			asked = strings.Fields(u.Query().Get("scope"))
		}
	}
	if !slices.Contains(asked, "openid") || !slices.Contains(asked, "profile") {
		t.Fatalf("the step-up authorization request asked for %q, want openid (granted before) and profile (challenged)", asked)
	}
	if status, page := b.get(t, cb.String()); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	if id := <-e.done; id != ar.ElicitationID {
		t.Fatalf("completed elicitation %q, want %q", id, ar.ElicitationID)
	}
	second := e.token("alice")
	if second == first {
		t.Fatal("the step-up's token did not replace the stored one")
	}
	// The stored grant is the new one: it asked for profile, so the same
	// challenge again offers no link (below).
	for _, tc := range []struct {
		name      string
		subj      credentials.Subject
		token     string
		challenge []string
		want      string // "": nil; "link": a step-up link; else a substring of the error
	}{
		{"the same challenge again: asked for already", subject("alice"), second, challenge, ""},
		{"a token replaced meanwhile", subject("alice"), first, []string{`Bearer error="insufficient_scope", scope="email"`}, ""},
		{"a new scope", subject("alice"), second, []string{`Bearer error="insufficient_scope", scope="email"`}, "link"},
		{"not insufficient_scope", subject("alice"), second, []string{`Bearer error="invalid_token", scope="email"`}, ""},
		{"no scope named", subject("alice"), second, []string{`Bearer error="insufficient_scope"`}, ""},
		{"an oversized challenge", subject("alice"), second, []string{`Bearer error="insufficient_scope", scope="email", error_description="` + strings.Repeat("x", 5000) + `"`}, "more than the 4096"},
		{"no principal", credentials.Subject{}, second, challenge, "no authenticated principal"},
	} {
		err := e.src.Load().InsufficientScope(ctx, tc.subj, tc.token, tc.challenge)
		var ar *credentials.AuthorizationRequiredError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil (the refusal stands)", tc.name, err)
		case tc.want == "link" && !errors.As(err, &ar):
			t.Errorf("%s: %v, want a step-up link", tc.name, err)
		case tc.want != "" && tc.want != "link" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	for outcome, want := range map[string]float64{"step_up": 2, "step_up_refused": 2} {
		if got := testutil.ToFloat64(e.flows(outcome)); got != want {
			t.Errorf("mcpgw_peruser_authorizations_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

// flows is the authorization counter of outcome.
func (e *env) flows(outcome string) prometheus.Collector {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_peruser_authorizations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
}
