package outbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A 307 from a token endpoint must not carry the form (subject token,
// client secret) to the host it points at.
func TestNoRedirectsRefusesCrossHostRedirect(t *testing.T) {
	var got atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer elsewhere.Close()
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
	}))
	defer token.Close()
	for _, c := range []*http.Client{NoRedirects(&http.Client{}), Client(nil, 5*time.Second)} {
		resp, err := c.Post(token.URL, "application/x-www-form-urlencoded", strings.NewReader("subject_token=secret"))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrRedirect) {
			t.Fatalf("Post = %v; want ErrRedirect", err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

func TestGuardRefusesInternalAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	g, err := NewGuard(nil, "upstreams.x.oauth.allow_addresses")
	if err != nil {
		t.Fatal(err)
	}
	c := Client(g, 5*time.Second)
	_, err = c.Get(srv.URL)
	var ae *AddressError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "upstreams.x.oauth.allow_addresses") {
		t.Fatalf("Get(loopback) = %v; want an AddressError naming the key", err)
	}
	// Trusted (operator-configured) host:port, and an allowlist, pass.
	g.Trust(srv.URL)
	if resp, err := c.Get(srv.URL); err != nil {
		t.Fatalf("trusted: %v", err)
	} else {
		resp.Body.Close()
	}
	g2, _ := NewGuard([]string{"127.0.0.0/8"}, "k")
	if resp, err := Client(g2, 5*time.Second).Get(srv.URL); err != nil {
		t.Fatalf("allowed: %v", err)
	} else {
		resp.Body.Close()
	}
}

// The check is on the resolved address at dial time: a name that
// resolves to an internal address is refused, and the dial goes to the
// address checked.
func TestGuardChecksResolvedAddress(t *testing.T) {
	g, _ := NewGuard(nil, "k")
	var dialed []string
	g.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return nil, errors.New("not dialing in tests")
	}
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("::ffff:10.1.2.3")}, nil
	}
	_, err := g.DialContext(t.Context(), "tcp", "metadata.example.com:80")
	var ae *AddressError
	if !errors.As(err, &ae) || len(dialed) != 0 {
		t.Fatalf("DialContext = %v (dialed %v); want refused without a dial", err, dialed)
	}
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("93.184.215.14")}, nil
	}
	_, _ = g.DialContext(t.Context(), "tcp", "mixed.example.com:443")
	if len(dialed) != 1 || dialed[0] != "93.184.215.14:443" {
		t.Fatalf("dialed %v; want only the public address", dialed)
	}
	for _, a := range []string{"127.0.0.2", "10.0.0.1", "192.168.1.1", "172.16.0.1", "169.254.1.1", "100.64.0.1", "0.0.0.0", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "2002:7f00:1::", "198.18.0.1", "255.255.255.255"} {
		if !Internal(netip.MustParseAddr(a)) {
			t.Errorf("Internal(%s) = false", a)
		}
	}
	if Internal(netip.MustParseAddr("8.8.8.8")) || Internal(netip.MustParseAddr("2606:4700::1111")) || Internal(netip.MustParseAddr("64:ff9b::808:808")) {
		t.Error("a public address counts as internal")
	}
	if _, err := NewGuard([]string{"not-a-cidr"}, "k"); err == nil {
		t.Error("a bad allowlist entry was accepted")
	}
}
