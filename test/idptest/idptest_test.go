package idptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestOPFlows proves the harness drives the real OP: a user signs in by the
// code flow and gets a JWT for the native client; a wrong password fails;
// a confidential client exchanges the user's token (RFC 8693) for one
// whose sub is the user and aud the requested audience; a user who may not
// be exchanged is refused with invalid_grant.
func TestOPFlows(t *testing.T) {
	p := Start(t, Config{
		Users: []User{
			{ID: "alice", Username: "alice", Password: "pw-alice", MayBeExchanged: true},
			{ID: "carol", Username: "carol", Password: "pw-carol"},
		},
		Clients: []Client{
			{ID: "app", Type: "native", RedirectURIs: []string{"http://127.0.0.1/callback"}},
			{ID: "gw", Type: "web", Secret: "gw-secret", ClientCredentials: true},
		},
	})
	ctx := context.Background()
	tok, err := p.Login(ctx, "app", "http://127.0.0.1/callback", "alice", "pw-alice", "openid", "offline_access")
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Verify(ctx, tok.AccessToken, "app")
	if err != nil || c.Subject != "alice" {
		t.Fatalf("alice's token: %+v, %v", c, err)
	}
	if tok.RefreshToken == "" {
		t.Error("no refresh token for offline_access")
	}
	if _, err := p.Login(ctx, "app", "http://127.0.0.1/callback", "alice", "wrong", "openid"); err == nil || !strings.Contains(err.Error(), "username or password wrong") {
		t.Errorf("a wrong password: %v, want the login form's refusal", err)
	}

	exchange := func(subject string) (*http.Response, error) {
		form := url.Values{
			"grant_type":         {GrantTokenExchange},
			"subject_token":      {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"audience":           {"upstream-a"},
		}
		req, _ := http.NewRequest(http.MethodPost, p.TokenURL(), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("gw", "gw-secret")
		return p.HTTP.Do(req)
	}
	resp, err := exchange(tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	decode(t, resp, &out)
	c, err = p.Verify(ctx, out.AccessToken, "upstream-a")
	if err != nil || c.Subject != "alice" {
		t.Fatalf("exchanged token: %+v, %v", c, err)
	}

	carol, err := p.Login(ctx, "app", "http://127.0.0.1/callback", "carol", "pw-carol", "openid")
	if err != nil {
		t.Fatal(err)
	}
	resp, err = exchange(carol.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	var refusal struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	decode(t, resp, &refusal)
	if refusal.Error != "invalid_grant" || !strings.Contains(refusal.ErrorDescription, `"carol"`) {
		t.Errorf("carol's exchange: %+v, want invalid_grant", refusal)
	}
	if n := p.TokenRequests(t)[GrantTokenExchange]; n != 2 {
		t.Errorf("OP counted %d exchanges, want 2", n)
	}
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
