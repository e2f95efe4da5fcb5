package oauthclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// counting wraps a test server's handler to count its requests.
func counting(srv *httptest.Server) *atomic.Int32 {
	n := new(atomic.Int32)
	h := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
	return n
}

// With a pinned issuer, nothing the upstream names sends the gateway
// elsewhere: a challenge's resource_metadata on another origin is not
// fetched, and a resource naming another server is refused before that
// server is asked anything.
func TestPinnedIssuerFetchesNothingElsewhere(t *testing.T) {
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": "x", "authorization_servers": []string{"x"}})
	}))
	defer trap.Close()
	hits := counting(trap)

	f := newFakeAS(t)
	f.rsChallenge = `Bearer resource_metadata="` + trap.URL + `/internal/admin"`
	c := f.client(Config{Preregistered: map[string]Credentials{f.as.URL: {ClientID: "pre", ClientSecret: "s"}}})
	if _, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect, Issuer: f.as.URL}); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the challenge's foreign resource_metadata was fetched (%d requests)", n)
	}

	g := newFakeAS(t)
	g.prm["authorization_servers"] = []string{trap.URL}
	c = g.client(Config{Preregistered: map[string]Credentials{g.as.URL: {ClientID: "pre", ClientSecret: "s"}}})
	_, err := c.Begin(context.Background(), Request{UpstreamURL: g.upstream(), RedirectURI: testRedirect, Issuer: g.as.URL, NoProbe: true})
	if err == nil || !strings.Contains(err.Error(), "does not name the pinned authorization server") {
		t.Fatalf("Begin with a resource naming another server: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server the resource named was asked (%d requests) before the pin was checked", n)
	}
}

// Starting many authorizations reuses one discovery: the probe and the
// metadata documents are fetched once.
func TestDiscoveryIsReused(t *testing.T) {
	f := newFakeAS(t)
	f.rsChallenge = `Bearer resource_metadata="{RS}/.well-known/oauth-protected-resource/mcp"`
	rs, as := counting(f.rs), counting(f.as)
	c := f.client(Config{Preregistered: map[string]Credentials{"": {ClientID: "pre", ClientSecret: "s"}}})
	for range 5 {
		if _, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect}); err != nil {
			t.Fatal(err)
		}
	}
	if r, a := rs.Load(), as.Load(); r != 2 || a != 1 {
		t.Fatalf("5 starts made %d requests to the upstream and %d to the authorization server; want 2 (probe, metadata) and 1", r, a)
	}
}
