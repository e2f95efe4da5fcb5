package auth_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/mcpgw/internal/auth"
)

// The introspection POST (the caller's token, the gateway's client
// secret) goes only to the configured endpoint: a 307 to another server
// is refused, not followed.
func TestIntrospectionRefusesRedirect(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"sub":"mallory","aud":"` + publicURL + `"}`))
	}))
	defer elsewhere.Close()
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/introspect", http.StatusPermanentRedirect)
	}))
	defer ep.Close()
	cfg := parse(t, `
public_url: `+publicURL+`
upstreams: {fs: {command: [x]}}
auth:
  introspection: {url: "`+ep.URL+`", client_id: mcpgw, client_secret: `+introspectSecret+`}
`)
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(request("opaque"), resource); err == nil {
		t.Fatalf("Authenticate = %+v; want the redirect refused", p)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target received %d introspection requests", n)
	}
}
