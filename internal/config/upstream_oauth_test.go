package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

// config judges allow_addresses entries without importing outbound (config
// imports only its own subpackages); both must read an entry alike.
func TestAllowAddressAsOutboundReadsIt(t *testing.T) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", "10.0.0.1/8", "192.168.1.0/33",
		"", "localhost", "10.0.0", "1.2.3.4/", "[::1]", "fe80::1%eth0", " 127.0.0.1", "0.0.0.0/0"} {
		_, err := outbound.ParsePrefix(s)
		if got, want := config.IsAllowAddress(s), err == nil; got != want {
			t.Errorf("IsAllowAddress(%q) = %v, outbound.ParsePrefix reads it: %v", s, got, want)
		}
	}
}

func TestUpstreamOAuthDefaultsAndExpansion(t *testing.T) {
	c := mustParse(t, `
upstreams:
  gh:
    url: https://api.example.com/mcp
    oauth:
      token_url: https://idp.example.com/token
      client_id: mcpgw
      client_secret: ${TOKEN}
      scopes: [repo:read, "mcp:tools"]
  other:
    url: https://other.example.com/mcp
    oauth:
      token_url: https://idp.example.com/token
      client_id: mcpgw
      client_secret_file: /run/secrets/other
      resource: https://other.example.com/
  pinned:
    url: https://pinned.example.com/mcp
    oauth:
      issuer: https://idp.example.com
      client_id: mcpgw
      client_secret: ${TOKEN}
`, testEnv)
	gh := c.Upstreams["gh"].OAuth
	if gh == nil || gh.ClientSecret != "t0k3n" || gh.Resource != "https://api.example.com/mcp" || len(gh.Scopes) != 2 || gh.AuthMethod != "" {
		t.Errorf("gh oauth = %+v, want the secret from ${TOKEN} and resource defaulting to the url", gh)
	}
	if o := c.Upstreams["other"].OAuth; o == nil || o.Resource != "https://other.example.com/" || o.ClientSecretFile != "/run/secrets/other" {
		t.Errorf("other oauth = %+v, want the explicit resource kept", o)
	}
	// A discovering client takes the resource from the upstream's metadata.
	if o := c.Upstreams["pinned"].OAuth; o == nil || o.Resource != "" || !o.Discovers() || c.Upstreams["gh"].OAuth.Discovers() {
		t.Errorf("pinned oauth = %+v, want no default resource and Discovers()", o)
	}
	if c.Upstreams["other"].Headers != nil && c.Upstreams["other"].Headers["Authorization"] != "" {
		t.Error("oauth must not turn into a static header")
	}
}

// TestUpstreamOAuthIdentityKeys: a key (private_key_jwt) or a workload
// identity token replaces the secret; exactly one way of proving who the
// gateway is.
func TestUpstreamOAuthIdentityKeys(t *testing.T) {
	c := mustParse(t, `
upstreams:
  jwt:
    url: https://api.example.com/mcp
    oauth: {issuer: https://idp.example.com, client_id: mcpgw, private_key_file: /run/keys/mcpgw.pem, key_id: k1, dpop: true}
  wif:
    url: https://api.example.com/mcp
    oauth: {issuer: https://idp.example.com, client_id: mcpgw, assertion_file: /var/run/secrets/tokens/mcpgw}
`, testEnv)
	if o := c.Upstreams["jwt"].OAuth; o.PrivateKeyFile == "" || o.KeyID != "k1" || !o.DPoP {
		t.Errorf("jwt oauth = %+v", o)
	}
	for _, tc := range []struct{ oauth, want string }{
		{`{token_url: https://idp.example.com/t, client_id: m, private_key_file: /k, assertion_file: /a}`, "both private_key_file and assertion_file"},
		{`{token_url: https://idp.example.com/t, client_id: m, private_key_file: /k, client_secret: s}`, "need none"},
		{`{token_url: https://idp.example.com/t, client_id: m, assertion_file: /a, auth_method: client_secret_basic}`, "auth_method applies to a client secret"},
		{`{token_url: https://idp.example.com/t, client_id: m, client_secret: s, key_id: k}`, "key_id names the key of private_key_file"},
		{`{token_url: https://idp.example.com/t, client_id: m}`, "or set private_key_file"},
	} {
		ps := parseProblems(t, "upstreams:\n  u:\n    url: https://api.example.com/mcp\n    oauth: "+tc.oauth+"\n", testEnv)
		if !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("oauth %s: problems %v, want one saying %q", tc.oauth, ps, tc.want)
		}
	}
}

// TestDPoPConfig: auth.dpop's defaults and bounds; require_dpop needs an
// issuer.
func TestDPoPConfig(t *testing.T) {
	base := "public_url: https://mcp.example.com\nupstreams: {fs: {command: [x]}}\n"
	c := mustParse(t, base+"routes: [{path: /mcp, require_dpop: true}]\nauth:\n  oidc: {issuer: https://idp.example.com}\n  dpop: {nonce: true}\n", testEnv)
	if d := c.Auth.DPoP; d == nil || len(d.Algorithms) != 6 || d.ProofLifetime.D() != time.Minute || d.MaxReplayEntries != 100000 || !d.Nonce || !c.Routes[0].RequireDPoP {
		t.Errorf("dpop = %+v", d)
	}
	for _, tc := range []struct{ src, want string }{
		{"routes: [{path: /mcp, require_dpop: true}]\nauth: {api_keys: [{name: k, key: 0123456789abcdef0123}]}\n", "routes[0].require_dpop"},
		{"auth:\n  oidc: {issuer: https://idp.example.com}\n  dpop: {algorithms: [HS256]}\n", "auth.dpop.algorithms[0]"},
		{"auth:\n  oidc: {issuer: https://idp.example.com}\n  dpop: {proof_lifetime: 1h}\n", "auth.dpop.proof_lifetime"},
		{"auth:\n  oidc: {issuer: https://idp.example.com}\n  dpop: {max_replay_entries: 0}\n", "auth.dpop.max_replay_entries"},
	} {
		if ps := parseProblems(t, base+tc.src, testEnv); !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("%s: problems %v, want one at %s", tc.src, ps, tc.want)
		}
	}
}

// TestTokenExchangeIDJAG: id_jag's defaults (an ID-JAG asked for with an
// ID token) and its checks.
func TestTokenExchangeIDJAG(t *testing.T) {
	base := "public_url: https://mcp.example.com\nauth: {oidc: {issuer: https://idp.example.com}}\nupstreams:\n  crm:\n    url: https://crm.example.com/mcp\n    auth:\n      token_exchange:\n        issuer: https://idp.example.com\n        client_id: mcpgw\n        client_secret: s\n"
	c := mustParse(t, base+"        id_jag: {discover: true, client_id: gw, client_secret: t}\n", testEnv)
	te := c.Upstreams["crm"].Auth.TokenExchange
	if te.RequestedTokenType != "urn:ietf:params:oauth:token-type:id-jag" || te.SubjectTokenType != "urn:ietf:params:oauth:token-type:id_token" || te.IDJAG.AuthMethod != "client_secret_basic" {
		t.Errorf("token_exchange with id_jag = %+v %+v", te, te.IDJAG)
	}
	if strings.Contains(te.IDJAG.String(), "t}") || !strings.Contains(te.IDJAG.String(), "gw") {
		t.Errorf("id_jag formats its secret: %s", te.IDJAG)
	}
	for _, tc := range []struct{ src, want string }{
		{"        id_jag: {client_id: gw, client_secret: t}\n", "neither issuer nor discover"},
		{"        id_jag: {discover: true, client_id: gw}\n", "neither client_secret nor client_secret_file"},
		{"        requested_token_type: urn:ietf:params:oauth:token-type:access_token\n        id_jag: {discover: true, client_id: gw, client_secret: t}\n", "asked for an ID-JAG"},
		{"        subject_token_type: urn:ietf:params:oauth:token-type:id_token\n", "not an ID token"},
	} {
		if ps := parseProblems(t, base+tc.src, testEnv); !strings.Contains(ps.Error(), tc.want) {
			t.Errorf("%s: problems %v, want one saying %q", tc.src, ps, tc.want)
		}
	}
}
