package auth_test

import (
	"net/http"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
)

// BenchmarkAuthenticate measures the per-request cost of authentication
// with warm keys: what every MCP request pays.
func BenchmarkAuthenticate(b *testing.B) {
	is := authtest.NewIssuer(b)
	a := setup(b, is, "", auth.Options{})
	rsa := is.NewKey(jose.RS256)
	is.Publish(rsa)
	for name, tok := range map[string]string{
		"ES256":   is.Token(is.Claims("alice", resource, "mcp:tools")),
		"RS256":   authtest.Sign(rsa, is.Claims("alice", resource, "mcp:tools")),
		"api_key": ciKey,
	} {
		b.Run(name, func(b *testing.B) {
			req := request(tok)
			if _, err := a.Authenticate(req, resource); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(req, resource); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("no_credentials", func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = a.Authenticate(req, resource)
		}
	})
}
