package idptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// authURL is an authorization request of client "gw" at p, with extra
// parameters.
func authURL(p *IdP, extra url.Values) string {
	q := url.Values{
		"client_id": {"gw"}, "redirect_uri": {"http://127.0.0.1:1/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"st"}, "code_challenge_method": {"S256"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())},
	}
	for k, v := range extra {
		q[k] = v
	}
	return p.Issuer + "auth?" + q.Encode()
}

func stopAtCallback(u *url.URL) bool { return u.Port() == "1" }

var modeUsers = []User{
	{ID: "alice", Username: "alice", Password: "pw-alice"},
	{ID: "mallory", Username: "mallory", Password: "pw-mallory"},
}

var modeClients = []Client{
	{ID: "gw", Type: "web", Secret: "s", RedirectURIs: []string{"http://127.0.0.1:1/cb"}},
	{ID: "other", Type: "web", Secret: "s", RedirectURIs: []string{"http://127.0.0.1:1/cb"}},
}

// TestOPNoDynamicRegistration: the OP is a company provider without
// RFC 7591: its metadata names no registration endpoint and /register is
// not there, in either discovery mode.
func TestOPNoDynamicRegistration(t *testing.T) {
	p := Start(t, Config{Users: modeUsers, Clients: modeClients, Discovery: "both"})
	for _, doc := range []string{".well-known/openid-configuration", ".well-known/oauth-authorization-server"} {
		body, err := get(context.Background(), p.HTTP, p.Issuer+doc)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal([]byte(body), &meta); err != nil {
			t.Fatal(err)
		}
		if meta["issuer"] != p.Issuer || meta["authorization_endpoint"] == nil {
			t.Errorf("%s: %v, want the OP's metadata", doc, meta)
		}
		if _, ok := meta["registration_endpoint"]; ok {
			t.Errorf("%s names a registration_endpoint", doc)
		}
	}
	resp, err := p.HTTP.Post(p.Issuer+"register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		t.Errorf("POST /register: %s, want no registration", resp.Status)
	}
}

// TestOPDiscoveryOIDCOnly: by default only the OpenID document exists
// (no RFC 8414), as at Google or Entra ID.
func TestOPDiscoveryOIDCOnly(t *testing.T) {
	p := Start(t, Config{Users: modeUsers, Clients: modeClients})
	if _, err := get(context.Background(), p.HTTP, p.Issuer+".well-known/openid-configuration"); err != nil {
		t.Fatal(err)
	}
	resp, err := p.HTTP.Get(p.Issuer + ".well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("RFC 8414 document: %s, want 404 in the OIDC-only mode", resp.Status)
	}
}

// TestOPRejectResource: in the Entra-like mode an authorization request
// with resource comes back to the client as invalid_target (with its
// state), one without it signs the user in; an unregistered redirect URI
// is never redirected to.
func TestOPRejectResource(t *testing.T) {
	p := Start(t, Config{Users: modeUsers, Clients: modeClients, RejectResource: true})
	ctx := context.Background()
	b := NewBrowser("alice", "pw-alice")
	b.StopAt = stopAtCallback
	page, err := b.Visit(ctx, authURL(p, url.Values{"resource": {"https://gw.example/mcp"}}))
	if err != nil {
		t.Fatal(err)
	}
	q := page.URL.Query()
	if q.Get("error") != "invalid_target" || !strings.Contains(q.Get("error_description"), "AADSTS9010010") || q.Get("state") != "st" || b.Logins != 0 {
		t.Errorf("with resource: landed at %s after %d logins, want error=invalid_target with the state", page.URL, b.Logins)
	}
	page, err = b.Visit(ctx, authURL(p, url.Values{"resource": {"https://gw.example/mcp"}, "redirect_uri": {"http://127.0.0.1:2/evil"}}))
	if err != nil {
		t.Fatal(err)
	}
	if page.Status != http.StatusBadRequest || page.URL.Port() == "2" {
		t.Errorf("unregistered redirect: %d at %s, want a 400 page at the OP", page.Status, page.URL)
	}
	page, err = b.Visit(ctx, authURL(p, nil))
	if err != nil {
		t.Fatal(err)
	}
	if q := page.URL.Query(); q.Get("code") == "" || b.Logins != 1 {
		t.Errorf("without resource: landed at %s after %d logins, want a code after one login", page.URL, b.Logins)
	}
}

// TestOPRememberConsent: a browser signed in whose user approved a
// client gets a code with no form; another client, another browser, or
// prompt=consent / prompt=login show the form again; without the mode
// every request shows it.
func TestOPRememberConsent(t *testing.T) {
	p := Start(t, Config{Users: modeUsers, Clients: modeClients, RememberConsent: true})
	ctx := context.Background()
	alice := NewBrowser("alice", "pw-alice")
	alice.StopAt = stopAtCallback
	codeAfter := func(b *Browser, extra url.Values, logins int) {
		t.Helper()
		before := b.Logins
		page, err := b.Visit(ctx, authURL(p, extra))
		if err != nil {
			t.Fatal(err)
		}
		if page.URL.Query().Get("code") == "" || b.Logins-before != logins {
			t.Errorf("%s %v: landed at %s after %d logins, want a code after %d", b.Username, extra, page.URL, b.Logins-before, logins)
		}
	}
	codeAfter(alice, nil, 1)
	codeAfter(alice, nil, 0)                                // remembered
	codeAfter(alice, url.Values{"prompt": {"consent"}}, 1)  // fresh consent asked
	codeAfter(alice, url.Values{"prompt": {"login"}}, 1)    // fresh login asked
	codeAfter(alice, url.Values{"client_id": {"other"}}, 1) // another client asks again
	codeAfter(alice, url.Values{"client_id": {"other"}}, 0) // and is remembered
	mallory := NewBrowser("mallory", "pw-mallory")
	mallory.StopAt = stopAtCallback
	codeAfter(mallory, nil, 1) // alice's sign-in is not mallory's

	q := Start(t, Config{Users: modeUsers, Clients: modeClients})
	b := NewBrowser("alice", "pw-alice")
	b.StopAt = stopAtCallback
	for i := 0; i < 2; i++ {
		if page, err := b.Visit(ctx, authURL(q, nil)); err != nil || page.URL.Query().Get("code") == "" {
			t.Fatalf("without the mode: %v, %v", page, err)
		}
	}
	if b.Logins != 2 {
		t.Errorf("without the mode: %d logins, want 2 (nothing remembered)", b.Logins)
	}
}
