package config_test

import (
	"testing"

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
