package peruser_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/test/idptest"
)

// sessions is a stand-in for the gateway's browser session (the login
// server's): a browser signs in by the code flow at the test OP as the
// gateway's own client "gwlogin", and gets a signed cookie naming its
// user, whose principal is subject(user)'s.
type sessions struct {
	e      *env
	key    []byte
	mu     sync.Mutex
	states map[string]string // state → where to come back
}

const sessionCookie = "gw_session"

func (s *sessions) conf() *oauth2.Config {
	return &oauth2.Config{
		ClientID: "gwlogin", ClientSecret: "gwlogin-secret", RedirectURL: s.e.public + "/login/callback", Scopes: []string{"openid"},
		Endpoint: oauth2.Endpoint{AuthURL: s.e.idp.Issuer + "auth", TokenURL: s.e.idp.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader},
	}
}

func (s *sessions) sign(user string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *sessions) User(r *http.Request) (peruser.BrowserUser, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return peruser.BrowserUser{}, false
	}
	user, sig, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign(user))) {
		return peruser.BrowserUser{}, false
	}
	p := subject(user).Principal
	return peruser.BrowserUser{Principals: []string{p.Key()}, Name: p.String()}, true
}

func (s *sessions) SignIn(w http.ResponseWriter, r *http.Request, returnTo string) {
	state := oauth2.GenerateVerifier()
	s.mu.Lock()
	s.states[state] = returnTo
	s.mu.Unlock()
	http.Redirect(w, r, s.conf().AuthCodeURL(state), http.StatusFound)
}

func (s *sessions) callback(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	back, ok := s.states[r.URL.Query().Get("state")]
	delete(s.states, r.URL.Query().Get("state"))
	s.mu.Unlock()
	if !ok {
		http.Error(w, "unknown state", http.StatusBadRequest)
		return
	}
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, s.e.idp.HTTP)
	tok, err := s.conf().Exchange(ctx, r.URL.Query().Get("code"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c, err := s.e.idp.Verify(r.Context(), tok.AccessToken, "gwlogin")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.Subject + "." + s.sign(c.Subject), Path: "/", HttpOnly: true})
	http.Redirect(w, r, back, http.StatusFound)
}

// newBoundEnv is an env whose gateway has a browser session and whose
// OP remembers consent (a signed-in user who approved a client is sent
// straight back with a code), with users alice and mallory.
func newBoundEnv(t *testing.T) *env {
	return newEnvWith(t, func(e *env, cfg *idptest.Config, mux *http.ServeMux) {
		s := &sessions{e: e, key: key(9), states: map[string]string{}}
		e.browsers = s
		cfg.RememberConsent = true
		cfg.Users = append(cfg.Users, idptest.User{ID: "mallory", Username: "mallory", Password: "pw-m"})
		cfg.Clients = append(cfg.Clients, idptest.Client{ID: "gwlogin", Type: "web", Secret: "gwlogin-secret", RedirectURIs: []string{e.public + "/login/callback"}})
		mux.HandleFunc("GET /login/callback", s.callback)
	})
}

// open opens a start link in b and expects the success page naming user.
func (e *env) open(b *idptest.Browser, ar string, user string) {
	e.t.Helper()
	page, err := b.Visit(context.Background(), ar)
	if err != nil {
		e.t.Fatal(err)
	}
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "You can close this window") || !strings.Contains(page.Body, user+"@https://login.example.com") {
		e.t.Fatalf("%s opening their link: %d at %s: %.500s", user, page.Status, page.URL, page.Body)
	}
	select {
	case <-e.done:
	case <-time.After(testwait.Long): // the failure's deadline, not a wait
		e.t.Fatal("OnComplete was not called")
	}
}

// refused opens a start link in b and expects the other-user page.
func (e *env) refused(b *idptest.Browser, link string) {
	e.t.Helper()
	logins, visited := b.Logins, len(b.Visited)
	page, err := b.Visit(context.Background(), link)
	if err != nil {
		e.t.Fatal(err)
	}
	if page.Status != http.StatusForbidden || !strings.Contains(page.Body, "made for another gateway user") || !strings.Contains(page.Body, b.Username+"@https://login.example.com") {
		e.t.Fatalf("%s opening another user's link: %d at %s: %.500s", b.Username, page.Status, page.URL, page.Body)
	}
	if b.Logins != logins || len(b.Visited) != visited {
		e.t.Fatalf("%s's browser was sent on (%v), want the refusal at the start page", b.Username, b.Visited[visited:])
	}
}

// TestStartLinkOpensOnlyForItsUser is the confused deputy in both
// directions, with two signed-in browsers and a provider that approves
// remembered consent without a form: mallory's link opened by alice and
// alice's opened by mallory are refused and bind nothing; each user's own
// link works, asks the provider for fresh consent, and a browser not
// signed in is sent to sign in first and comes back to the same link.
func TestStartLinkOpensOnlyForItsUser(t *testing.T) {
	e := newBoundEnv(t)
	ctx := context.Background()
	alice := idptest.NewBrowser("alice", "pw-a")
	mallory := idptest.NewBrowser("mallory", "pw-m")

	// Neither is signed in: the link sends each to sign in, back, then
	// to the provider, which asks again (prompt=consent) though it
	// remembers them: two forms.
	e.open(alice, e.elicit("alice").URL, "alice")
	e.open(mallory, e.elicit("mallory").URL, "mallory")
	if alice.Logins != 2 || mallory.Logins != 2 {
		t.Fatalf("logins: alice %d, mallory %d; want 2 each (sign-in, then fresh consent)", alice.Logins, mallory.Logins)
	}
	asked := false
	for _, u := range alice.Visited {
		if strings.HasPrefix(u.String(), e.idp.Issuer+"auth?") && u.Query().Get("client_id") == "mcpgw" {
			asked = u.Query().Get("prompt") == "consent"
		}
	}
	if !asked {
		t.Fatal("the authorization request did not ask the provider for fresh consent (prompt=consent)")
	}
	aliceTok, malloryTok := e.token("alice"), e.token("mallory")

	// mallory's link in alice's browser: refused, nothing bound.
	src := e.src.Load()
	if _, err := src.Revoke(ctx, subject("mallory").Key()); err != nil {
		t.Fatal(err)
	}
	malloryLink := e.elicit("mallory").URL
	e.refused(alice, malloryLink)
	e.elicit("mallory")
	if e.token("alice") != aliceTok {
		t.Fatal("alice's token changed")
	}

	// alice's link in mallory's browser: refused, nothing bound.
	if _, err := src.Revoke(ctx, subject("alice").Key()); err != nil {
		t.Fatal(err)
	}
	aliceLink := e.elicit("alice").URL
	e.refused(mallory, aliceLink)
	e.elicit("alice")

	// The refusals used neither link up: their own users still can.
	e.open(alice, aliceLink, "alice")
	e.open(mallory, malloryLink, "mallory")
	if got := e.token("alice"); got == aliceTok {
		t.Fatal("alice's new authorization stored no new token")
	}
	if got := e.token("mallory"); got == malloryTok {
		t.Fatal("mallory's new authorization stored no new token")
	}
	if n := testutil.ToFloat64(refusals(e, "other_user")); n != 2 {
		t.Fatalf("mcpgw_peruser_refusals_total{reason=other_user} = %v, want 2", n)
	}
}

// TestCallbackChecksTheBrowserUserAgain: a flow started by alice whose
// browser is signed in as someone else by the time the provider sends it
// back is refused at the callback, and nothing is stored.
func TestCallbackChecksTheBrowserUserAgain(t *testing.T) {
	e := newBoundEnv(t)
	ctx := context.Background()
	alice := idptest.NewBrowser("alice", "pw-a")
	alice.StopAt = func(u *url.URL) bool {
		return strings.HasSuffix(u.Path, "/callback") && u.Query().Get("state") != "" && strings.HasPrefix(u.String(), e.public+"/oauth/")
	}
	page, err := alice.Visit(ctx, e.elicit("alice").URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(page.URL.String(), e.public+"/oauth/") {
		t.Fatalf("alice's flow ended at %s, want the gateway's callback", page.URL)
	}
	// Her browser's session is now mallory's.
	s := e.browsers.(*sessions)
	gw, _ := url.Parse(e.public)
	alice.HTTP.Jar.SetCookies(gw, []*http.Cookie{{Name: sessionCookie, Value: "mallory." + s.sign("mallory"), Path: "/"}})
	alice.StopAt = nil
	page, err = alice.Visit(ctx, page.URL.String())
	if err != nil {
		t.Fatal(err)
	}
	if page.Status != http.StatusForbidden {
		t.Fatalf("callback in a browser now signed in as mallory: %d %.300s, want 403", page.Status, page.Body)
	}
	e.elicit("alice")
	e.elicit("mallory")
}
