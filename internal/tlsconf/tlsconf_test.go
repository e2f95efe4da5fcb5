package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/internal/tlsconf"
	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// clock is a test clock the reload checks read.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// serve accepts TLS connections on 127.0.0.1 with cfg, completes each
// handshake and writes the client certificate's CN (or "-"), then closes.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	tln := tls.NewListener(ln, cfg)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() != nil {
					return
				}
				cn := "-"
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					cn = pc[0].Subject.CommonName
				}
				_, _ = io.WriteString(tc, cn)
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr and returns the server certificate's CN and
// what the server wrote.
func dial(addr string, cfg *tls.Config) (string, string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return "", "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, string(b), nil
}

func TestServerServesRotatedCertificateWithoutFailedHandshakes(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	dir := t.TempDir()
	a := ca.Server(t, "first")
	cfg := &config.ListenerTLS{CertFile: tlstest.Write(t, dir, "tls.crt", a.CertPEM), KeyFile: tlstest.Write(t, dir, "tls.key", a.KeyPEM)}
	clk := newClock()
	s, err := tlsconf.NewServer("tls", cfg, tlsconf.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}

	// Clients handshake throughout the rotation; none may fail.
	stop := make(chan struct{})
	// Every failure kept, whatever its type (an atomic.Value panics when a
	// second failure's type differs from the first's).
	var failedMu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := dial(addr, client); err != nil {
					failedMu.Lock()
					failed = append(failed, fmt.Sprintf("%T: %v", err, err))
					failedMu.Unlock()
				}
				clk.advance(300 * time.Millisecond)
			}
		}()
	}
	b := ca.Server(t, "second")
	// The key first, then the certificate: in between the pair does not
	// match, and the old one must go on being served.
	tlstest.Write(t, dir, "tls.key", b.KeyPEM)
	clk.advance(2 * time.Second)
	if cn, _, err := dial(addr, client); err != nil || cn != "first" {
		t.Fatalf("mid-rotation: cn %q, err %v; want the old certificate", cn, err)
	}
	tlstest.Write(t, dir, "tls.crt", b.CertPEM)
	// The handshakes beside this one check the files too, and one may
	// have read the certificate half written (and so kept the old pair
	// until the next check): wait for the new one, the clock moving on.
	testwait.Until(t, "the new certificate served", func() bool {
		clk.advance(2 * time.Second)
		cn, _, err := dial(addr, client)
		return err == nil && cn == "second"
	})
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d handshakes failed during the rotation: %q", len(failed), failed)
	}
	if s.Reloads() != 1 {
		t.Fatalf("reloads = %d, want 1", s.Reloads())
	}
}

func TestServerRefusesTLS11(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	dir := t.TempDir()
	a := ca.Server(t, "srv")
	s, err := tlsconf.NewServer("tls", &config.ListenerTLS{CertFile: tlstest.Write(t, dir, "c", a.CertPEM), KeyFile: tlstest.Write(t, dir, "k", a.KeyPEM)}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	_, _, err = dial(addr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the point of the test
	if err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
	if _, _, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("TLS 1.2 refused: %v", err)
	}
	// min_version "1.3" refuses TLS 1.2.
	s13, err := tlsconf.NewServer("tls", &config.ListenerTLS{CertFile: dir + "/c", KeyFile: dir + "/k", MinVersion: "1.3"}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dial(serve(t, s13.Config()), &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("min_version 1.3 served a TLS 1.2 client")
	}
}

func TestServerClientCertificates(t *testing.T) {
	ca := tlstest.NewCA(t, "clients")
	other := tlstest.NewCA(t, "other")
	dir := t.TempDir()
	a := ca.Server(t, "srv")
	s, err := tlsconf.NewServer("tls", &config.ListenerTLS{
		CertFile: tlstest.Write(t, dir, "c", a.CertPEM), KeyFile: tlstest.Write(t, dir, "k", a.KeyPEM),
		ClientCAFile: tlstest.Write(t, dir, "ca", ca.PEM),
	}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.Config())
	with := func(l *tlstest.Leaf) *tls.Config {
		c := &tls.Config{RootCAs: ca.Pool()}
		if l != nil {
			// Sent whatever CAs the server names, as many clients do.
			cert := l.TLS(t)
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		}
		return c
	}
	if _, got, err := dial(addr, with(ca.Client(t, "alice"))); err != nil || got != "alice" {
		t.Fatalf("good client certificate: got %q, %v", got, err)
	}
	expired := ca.Issue(t, tlstest.Opts{CN: "old", Client: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	for _, c := range []struct {
		name string
		leaf *tlstest.Leaf
		want string
	}{
		{"none", nil, "certificate required"},
		{"unknown CA", other.Client(t, "mallory"), "unknown certificate authority"},
		{"expired", expired, "expired certificate"},
	} {
		_, got, err := dial(addr, with(c.leaf))
		if err == nil && got != "" {
			t.Fatalf("%s: served (%q)", c.name, got)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// upstream serves TLS with leaf, asking for client certificates of ca
// when ca is not nil.
func upstream(t *testing.T, leaf *tlstest.Leaf, clients *tlstest.CA) string {
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf.TLS(t)}}
	if clients != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = clients.Pool()
	}
	return serve(t, cfg)
}

func TestClientErrorsNameTheUpstreamAndTheProblem(t *testing.T) {
	ca := tlstest.NewCA(t, "up-ca")
	wrong := tlstest.NewCA(t, "wrong-ca")
	dir := t.TempDir()
	caFile := tlstest.Write(t, dir, "ca", ca.PEM)
	good := upstream(t, ca.Server(t, "up"), nil)
	misnamed := upstream(t, ca.Issue(t, tlstest.Opts{CN: "x", DNS: []string{"other.example"}}), nil)
	expired := upstream(t, ca.Issue(t, tlstest.Opts{CN: "x", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), nil)
	unknown := upstream(t, wrong.Server(t, "up"), nil)

	c, err := tlsconf.NewClient("secure", &config.UpstreamTLS{CAFile: caFile}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func() *tls.Config { return c.ConfigFor("127.0.0.1") }
	if _, _, err := dial(good, cfg()); err != nil {
		t.Fatalf("good upstream: %v", err)
	}
	for _, tc := range []struct {
		name, addr string
		want       []string
	}{
		{"name mismatch", misnamed, []string{`upstream "secure"`, "name mismatch", `"other.example"`, "server_name"}},
		{"expired", expired, []string{`upstream "secure"`, "expired at"}},
		{"unknown authority", unknown, []string{`upstream "secure"`, "unknown authority", "tls.ca_file " + caFile}},
	} {
		_, _, err := dial(tc.addr, cfg())
		if err == nil {
			t.Fatalf("%s: accepted", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.name, err, w)
			}
		}
	}
}

func TestClientPresentsRotatedClientCertificateAndTrustsRotatedCA(t *testing.T) {
	clients := tlstest.NewCA(t, "clients")
	ca := tlstest.NewCA(t, "up-ca")
	ca2 := tlstest.NewCA(t, "up-ca-2")
	dir := t.TempDir()
	first := clients.Client(t, "gw-1")
	cfg := &config.UpstreamTLS{
		CAFile:   tlstest.Write(t, dir, "ca", ca.PEM),
		CertFile: tlstest.Write(t, dir, "c", first.CertPEM), KeyFile: tlstest.Write(t, dir, "k", first.KeyPEM),
	}
	clk := newClock()
	c, err := tlsconf.NewClient("secure", cfg, tlsconf.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	dialCfg := func() *tls.Config { return c.ConfigFor("127.0.0.1") }
	up := upstream(t, ca.Server(t, "up"), clients)
	if _, got, err := dial(up, dialCfg()); err != nil || got != "gw-1" {
		t.Fatalf("first: %q, %v", got, err)
	}
	second := clients.Client(t, "gw-2")
	tlstest.Write(t, dir, "c", second.CertPEM)
	tlstest.Write(t, dir, "k", second.KeyPEM)
	// Both CAs during the CA's rotation, then an upstream of the new one.
	tlstest.Write(t, dir, "ca", append(append([]byte{}, ca.PEM...), ca2.PEM...))
	clk.advance(2 * time.Second)
	if _, got, err := dial(up, dialCfg()); err != nil || got != "gw-2" {
		t.Fatalf("after rotation: %q, %v; want the new client certificate", got, err)
	}
	up2 := upstream(t, ca2.Server(t, "up2"), clients)
	if _, _, err := dial(up2, dialCfg()); err != nil {
		t.Fatalf("upstream of the new CA: %v", err)
	}
}

func TestClientInsecureSkipVerifyAcceptsAnyAndWarns(t *testing.T) {
	wrong := tlstest.NewCA(t, "wrong")
	up := upstream(t, wrong.Server(t, "up"), nil)
	c, err := tlsconf.NewClient("lab", &config.UpstreamTLS{InsecureSkipVerify: true}, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dial(up, c.Config()); err != nil {
		t.Fatal(err)
	}
}

func TestFilesThatDoNotLoadNameTheProblem(t *testing.T) {
	dir := t.TempDir()
	bad := tlstest.Write(t, dir, "ca", []byte("not pem"))
	_, err := tlsconf.NewClient("secure", &config.UpstreamTLS{CAFile: bad}, tlsconf.Options{})
	if err == nil || !strings.Contains(err.Error(), `upstream "secure"`) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("err = %v", err)
	}
	_, err = tlsconf.NewServer("tls", &config.ListenerTLS{CertFile: dir + "/missing", KeyFile: bad}, tlsconf.Options{})
	var pe interface{ Error() string }
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "tls: cannot read") {
		t.Fatalf("err = %v", err)
	}
}
