package credentials

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
)

// redirectingTokenEndpoint is a token endpoint that 307-redirects every
// request to another server, which counts what reaches it.
func redirectingTokenEndpoint(t *testing.T) (tokenURL string, reached *atomic.Int32) {
	reached = new(atomic.Int32)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"stolen","token_type":"Bearer","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","expires_in":3600}`))
	}))
	t.Cleanup(elsewhere.Close)
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(token.Close)
	return token.URL + "/token", reached
}

// The exchange's POST (the caller's subject_token, the gateway's client
// secret) goes only to the configured token endpoint: a 307 elsewhere is
// refused, not followed.
func TestExchangeRefusesRedirect(t *testing.T) {
	tokenURL, reached := redirectingTokenEndpoint(t)
	env := Env{HTTPClient: &http.Client{}, Logger: zaptest.NewLogger(t)}
	src := NewUpstream(t.Context(), "jira", &config.Upstream{URL: "https://jira.example.com/mcp", Auth: &config.UpstreamAuth{
		TokenExchange: &config.UpstreamTokenExchange{TokenURL: tokenURL, ClientID: "mcpgw", ClientSecret: "s3cret"},
	}}, env.HTTPClient, env).source
	if tok, err := src.Token(context.Background(), subject("alice")); err == nil {
		t.Fatalf("Token = %q; want the redirect refused", tok)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target received %d exchange requests", n)
	}
}

// Likewise the client-credentials grant's POST (the client secret).
func TestClientCredentialsRefuseRedirect(t *testing.T) {
	tokenURL, reached := redirectingTokenEndpoint(t)
	env := Env{HTTPClient: &http.Client{}, Logger: zaptest.NewLogger(t)}
	hc := NewUpstream(t.Context(), "gh", &config.Upstream{URL: "https://api.example.com/mcp", OAuth: &config.UpstreamOAuth{
		TokenURL: tokenURL, ClientID: "mcpgw", ClientSecret: "s3cret",
	}}, env.HTTPClient, env).SharedClient()
	if tok, err := hc.Transport.(*oauthTransport).tokens.Token(); err == nil {
		t.Fatalf("Token = %v; want the redirect refused", tok)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target received %d token requests", n)
	}
}
