package login_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/login"
)

// groupsOP is a minimal OpenID provider whose ID tokens carry the claims
// a test gives (test/idp's carry no groups): it approves every
// authorization at once, and serves userinfo.
type groupsOP struct {
	*httptest.Server
	key      *ecdsa.PrivateKey
	idClaims map[string]any
	userinfo map[string]any
	mu       sync.Mutex
	nonce    string
}

func newGroupsOP(t *testing.T, idClaims, userinfo map[string]any) *groupsOP {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	op := &groupsOP{key: key, idClaims: idClaims, userinfo: userinfo}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": op.URL, "authorization_endpoint": op.URL + "/auth", "token_endpoint": op.URL + "/token",
			"jwks_uri": op.URL + "/jwks", "userinfo_endpoint": op.URL + "/userinfo", "id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		op.mu.Lock()
		op.nonce = q.Get("nonce")
		op.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=c1&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		op.mu.Lock()
		claims := map[string]any{"iss": op.URL, "sub": "carol", "aud": "mcpgw", "exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix(), "nonce": op.nonce}
		op.mu.Unlock()
		for k, v := range op.idClaims {
			claims[k] = v
		}
		payload, _ := json.Marshal(claims)
		signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
		obj, _ := signer.Sign(payload)
		idt, _ := obj.CompactSerialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "provider-access-token", "token_type": "Bearer", "expires_in": 60, "id_token": idt})
	})
	mux.HandleFunc("/userinfo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer provider-access-token" || op.userinfo == nil {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(op.userinfo)
	})
	op.Server = httptest.NewServer(mux)
	t.Cleanup(op.Close)
	return op
}

// Groups come from the ID token by groups_claim (a dotted path here), or
// from userinfo when the ID token has none; they reach the principal the
// policy sees, and the provider's tokens reach nobody.
func TestLoginGroupsFromTheProvider(t *testing.T) {
	for name, c := range map[string]struct {
		claim          string
		idClaims, info map[string]any
	}{
		"ID token, dotted path": {"realm_access.roles", map[string]any{"realm_access": map[string]any{"roles": []string{"eng", "ops"}}}, nil},
		"userinfo":              {"groups", nil, map[string]any{"sub": "carol", "groups": []string{"eng", "ops"}}},
	} {
		t.Run(name, func(t *testing.T) {
			op := newGroupsOP(t, c.idClaims, c.info)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, base: "http://" + ln.Addr().String(), reg: prometheus.NewRegistry()}
			cfg, err := config.Parse("login.yaml", []byte(fmt.Sprintf(`
public_url: %s
upstreams: {demo: {url: "http://127.0.0.1:1/mcp"}}
routes: [{path: /mcp}]
login:
  provider: {issuer: %q, client_id: mcpgw, client_secret: s, groups_claim: %s}
`, e.base, op.URL, c.claim)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.srv, err = login.New(cfg, login.Options{Logger: zaptest.NewLogger(t), Registerer: e.reg}); err != nil {
				t.Fatal(err)
			}
			a, err := auth.New(cfg, auth.Options{Local: &auth.LocalIssuer{Issuer: e.srv.Issuer(), Keys: e.srv.KeySet(), Active: e.srv.Active}})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			for _, p := range append(e.srv.Paths(), e.srv.WellKnownPaths()...) {
				mux.Handle(p, e.srv)
			}
			mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
				p, err := a.Authenticate(r, a.Resource("/mcp"))
				if err != nil {
					http.Error(w, err.Error(), http.StatusUnauthorized)
					return
				}
				fmt.Fprintf(w, "%s %s", p.Subject, strings.Join(p.Groups, ","))
			})
			hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = hs.Serve(ln) }()
			t.Cleanup(func() { _ = hs.Close() })

			f := newFlow(e.register("App", "http://127.0.0.1/callback"))
			tok := e.authorize(e.browser(), f, "carol")
			if st, body := e.call("/mcp", tok.Access); st != http.StatusOK || body != "carol eng,ops" {
				t.Fatalf("principal: %d %q; want carol in eng and ops", st, body)
			}
			payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok.Access, ".")[1])
			if strings.Contains(string(payload), "provider-access-token") || strings.Contains(tok.Access+tok.Refresh, "provider-access-token") {
				t.Fatal("the provider's token left the gateway")
			}
		})
	}
}
