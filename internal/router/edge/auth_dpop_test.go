package edge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// TestGuardDPoPChallenges: a route with require_dpop answers a bearer
// token 401 with a DPoP challenge alone (algs, resource_metadata) and
// passes a DPoP-bound token with its proof; elsewhere a refusal about DPoP
// carries both challenges, and a nonce refusal its DPoP-Nonce.
func TestGuardDPoPChallenges(t *testing.T) {
	is := authtest.NewIssuer(t)
	cfg, err := config.Parse("t.yaml", []byte(`
public_url: https://mcp.example.com
upstreams: {fs: {command: [x]}}
routes:
  - {path: /mcp, require_dpop: true}
  - {path: /open}
auth:
  oidc: {issuer: "`+is.URL+`"}
  dpop: {nonce: true}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := oauthclient.NewDPoPKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := is.Claims("alice", "https://mcp.example.com/mcp")
	bound["cnf"] = map[string]any{"jkt": key.Thumbprint()}
	boundTok := is.Token(bound)
	bearerTok := is.Token(is.Claims("bob", "https://mcp.example.com/mcp"))
	bound["aud"] = "https://mcp.example.com/open"
	boundOpen := is.Token(bound)
	bearerOpen := is.Token(is.Claims("bob", "https://mcp.example.com/open"))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.FromContext(r.Context()) == nil {
			t.Error("no principal in the context")
		}
	})
	serve := func(route string, require bool, authz string, proof bool) *httptest.ResponseRecorder {
		t.Helper()
		g := edge.Guard{Auth: a, Route: route, Resource: a.Resource(route), RequireDPoP: require, Log: zap.NewNop()}
		r := httptest.NewRequest(http.MethodPost, "https://mcp.example.com"+route, strings.NewReader("{}"))
		r.Header.Set("Authorization", authz)
		if proof {
			_, tok, _ := strings.Cut(authz, " ")
			p, err := key.Proof(http.MethodPost, "https://mcp.example.com"+route, tok)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("DPoP", p)
		}
		w := httptest.NewRecorder()
		g.Authenticate(ok).ServeHTTP(w, r)
		return w
	}

	w := serve("/mcp", true, "Bearer "+bearerTok, false)
	if ch := w.Header().Values("WWW-Authenticate"); w.Code != http.StatusUnauthorized || len(ch) != 1 ||
		!strings.HasPrefix(ch[0], `DPoP algs="`) || !strings.Contains(ch[0], `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("bearer token on a DPoP-only route: HTTP %d, challenges %q", w.Code, ch)
	}
	// The first proof lacks the gateway's nonce: refused with one.
	w = serve("/mcp", true, "DPoP "+boundTok, true)
	nonce := w.Header().Get("DPoP-Nonce")
	if w.Code != http.StatusUnauthorized || nonce == "" || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="use_dpop_nonce"`) {
		t.Fatalf("proof without nonce: HTTP %d, %v", w.Code, w.Header())
	}
	key.SetNonce("https://mcp.example.com/mcp", nonce)
	if w = serve("/mcp", true, "DPoP "+boundTok, true); w.Code != http.StatusOK {
		t.Errorf("DPoP-bound token with its proof and the nonce: HTTP %d, %v", w.Code, w.Header())
	}
	// The bound token as Bearer on an ordinary route: both challenges,
	// the DPoP one saying what is wrong.
	w = serve("/open", false, "Bearer "+boundOpen, false)
	ch := w.Header().Values("WWW-Authenticate")
	if w.Code != http.StatusUnauthorized || len(ch) != 2 || !strings.HasPrefix(ch[0], "Bearer ") || strings.Contains(ch[0], "error=") ||
		!strings.HasPrefix(ch[1], "DPoP ") || !strings.Contains(ch[1], `error="invalid_token"`) {
		t.Errorf("bound token as Bearer: HTTP %d, challenges %q", w.Code, ch)
	}
	if w = serve("/open", false, "Bearer "+bearerOpen, false); w.Code != http.StatusOK {
		t.Errorf("bearer token on an ordinary route: HTTP %d", w.Code)
	}
}
