package host

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// TestUpstreamClientCertificateRotationReachesKeptConnections: an
// upstream's connections are kept alive between requests; once the
// gateway's client certificate files are replaced, a request within a
// reload interval or so presents the new certificate, rather than when the
// kept connection happens to close.
func TestUpstreamClientCertificateRotationReachesKeptConnections(t *testing.T) {
	upCA, clients := tlstest.NewCA(t, "up"), tlstest.NewCA(t, "clients")
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{upCA.Server(t, "up").TLS(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	first := clients.Client(t, "gw-1")
	cfg := &config.Upstream{URL: srv.URL + "/mcp", TLS: &config.UpstreamTLS{
		CAFile:   tlstest.Write(t, dir, "ca.pem", upCA.PEM),
		CertFile: tlstest.Write(t, dir, "c.pem", first.CertPEM), KeyFile: tlstest.Write(t, dir, "k.pem", first.KeyPEM),
	}}
	h := &Host{opts: Options{HTTPClient: &http.Client{}, Logger: zaptest.NewLogger(t)}}
	hc, own := h.upstreamBase("secure", cfg)
	t.Cleanup(own.CloseIdleConnections)
	get := func() string {
		resp, err := hc.Get(srv.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for range 3 {
		if cn := get(); cn != "gw-1" {
			t.Fatalf("presented %q, want gw-1", cn)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 requests; the test needs a kept connection", n)
	}
	second := clients.Client(t, "gw-2")
	tlstest.Write(t, dir, "k.pem", second.KeyPEM)
	tlstest.Write(t, dir, "c.pem", second.CertPEM)
	testwait.Until(t, "the new client certificate presented", func() bool { return get() == "gw-2" })
}
