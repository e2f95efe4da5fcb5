package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// login: turns authentication on, is defaulted, and refuses what would
// make codes, tokens or cookies unsafe, each problem naming the fix.
func TestLoginConfig(t *testing.T) {
	c := mustParse(t, `
listen: 0.0.0.0:8080
public_url: https://mcp.example.com
upstreams: {fs: {command: [node]}}
login:
  provider: {issuer: "https://idp.example.com", client_id: mcpgw, client_secret: s3cret-s3cret}
`, nil)
	if !c.Auth.Enabled() || c.Policy.Default != config.PolicyDeny {
		t.Fatalf("login: leaves auth off (%v) or policy %q; want on and deny", c.Auth.Enabled(), c.Policy.Default)
	}
	l := c.Login
	if l.AccessTokenTTL.D() != config.DefaultLoginAccessTokenTTL || l.MaxClients != config.DefaultLoginMaxClients || strings.Join(l.Provider.Scopes, " ") != "openid profile email" || !l.DynamicRegistrationOn() {
		t.Fatalf("defaults: %+v %+v", l, l.Provider)
	}
	_, err := config.Parse("bad.yaml", []byte(`
public_url: http://mcp.example.com
upstreams: {fs: {command: [node]}}
login:
  access_token_ttl: 24h
  max_clients: 0
  provider: {issuer: "http://idp.example.com", client_id: mcpgw}
  clients:
    - {client_id: app, redirect_uris: ["http://app.example.com/cb", "https://app.example.com/cb#x", "myapp:/cb"]}
    - {client_id: app, redirect_uris: ["http://127.0.0.1/cb"]}
`), nil)
	if err == nil {
		t.Fatal("a bad login: section loaded")
	}
	text := err.Error()
	for _, want := range []string{
		"login: public_url \"http://mcp.example.com\" is plain http",
		"login.provider.issuer",
		"neither client_secret nor client_secret_file is set",
		"login.access_token_ttl: 24h0m0s is out of range",
		"login.max_clients: must be at least 1",
		"login.clients[0].redirect_uris[0]: \"http://app.example.com/cb\" is plain http on a non-loopback host",
		"login.clients[0].redirect_uris[1]: \"https://app.example.com/cb#x\" has a #fragment",
		"login.clients[0].redirect_uris[2]: \"myapp:/cb\" uses the scheme",
		"login.clients[1].client_id: \"app\" is listed twice",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(c.Redacted().Login.Provider.ClientSecret, "s3cret") || c.Login.Provider.ClientSecret != "s3cret-s3cret" {
		t.Fatal("the provider's client secret is not redacted in the copy, or is in the config")
	}
	if !slices.Contains(c.Secrets(), "s3cret-s3cret") {
		t.Fatal("the provider's client secret is not among the secrets the log scrubs")
	}
}
