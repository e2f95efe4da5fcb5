package gateway_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// tlsSetup is a gateway serving TLS with client certificates, in front of
// an https upstream that requires the gateway's own client certificate.
type tlsSetup struct {
	dir                string
	serverCA, clientCA *tlstest.CA // the gateway listener's, its callers'
	upCA, gwClientCA   *tlstest.CA // the upstream's, the gateway's as its client
	upstreamCN         atomic.Value
	base               string // https://127.0.0.1:port
	gw                 *gateway.Gateway
	upstreamURL        string
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	s := &tlsSetup{dir: t.TempDir()}
	s.serverCA, s.clientCA = tlstest.NewCA(t, "listener-ca"), tlstest.NewCA(t, "callers-ca")
	s.upCA, s.gwClientCA = tlstest.NewCA(t, "upstream-ca"), tlstest.NewCA(t, "gateway-client-ca")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gatewaytest.SDKServer("secure", 0) }, nil)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.upstreamCN.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		h.ServeHTTP(w, r)
	}))
	up.TLS = &tls.Config{
		Certificates: []tls.Certificate{s.upCA.Server(t, "upstream").TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    s.gwClientCA.Pool(),
	}
	up.StartTLS()
	t.Cleanup(up.Close)
	s.upstreamURL = up.URL
	return s
}

func (s *tlsSetup) start(t *testing.T) {
	t.Helper()
	lis := s.serverCA.Server(t, "gateway-1")
	gwc := s.gwClientCA.Client(t, "mcpgw-1")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
tls:
  cert_file: %s
  key_file: %s
  client_ca_file: %s
auth:
  client_certificates: {principal: common_name}
upstreams:
  secure:
    url: %s/mcp
    tls: {ca_file: %s, cert_file: %s, key_file: %s}
routes:
  - {path: /mcp, upstreams: [secure]}
policy:
  default: deny
  rules:
    - match: {subjects: [alice]}
      allow: ["secure__*"]
`, tlstest.Write(t, s.dir, "tls.crt", lis.CertPEM), tlstest.Write(t, s.dir, "tls.key", lis.KeyPEM), tlstest.Write(t, s.dir, "client-ca.pem", s.clientCA.PEM),
		s.upstreamURL, tlstest.Write(t, s.dir, "up-ca.pem", s.upCA.PEM), tlstest.Write(t, s.dir, "gw.crt", gwc.CertPEM), tlstest.Write(t, s.dir, "gw.key", gwc.KeyPEM))
	cfg, err := config.Parse("tls.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.gw = gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	s.base = "https://" + ln.Addr().String()
}

// client is an https client trusting the listener's CA and presenting
// leaf (none when nil).
func (s *tlsSetup) client(t *testing.T, leaf *tlstest.Leaf) *http.Client {
	cfg := &tls.Config{RootCAs: s.serverCA.Pool()}
	if leaf != nil {
		c := leaf.TLS(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func (s *tlsSetup) session(t *testing.T, cn string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "tls-client", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp", HTTPClient: s.client(t, s.clientCA.Client(t, cn)), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v", cn, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func tlsEcho(ctx context.Context, cs *mcp.ClientSession, text string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "secure__echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", textOfContent(res))
	}
	return textOfContent(res), nil
}

func textOfContent(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestTLSBothSidesClientCertificatePrincipal: a caller's client
// certificate is its principal, matched by the policy; the gateway reaches
// an upstream that requires its own client certificate, verified with the
// configured CA.
func TestTLSBothSidesClientCertificatePrincipal(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	s.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	alice := s.session(t, "alice")
	if got, err := tlsEcho(ctx, alice, "hi"); err != nil || got != "secure:hi" {
		t.Fatalf("alice's call: %q, %v", got, err)
	}
	if cn, _ := s.upstreamCN.Load().(string); cn != "mcpgw-1" {
		t.Errorf("the upstream saw client certificate %q, want the gateway's (mcpgw-1)", cn)
	}
	bob := s.session(t, "bob")
	if _, err := tlsEcho(ctx, bob, "hi"); err == nil {
		t.Error("bob's call was allowed; the policy allows secure__* only to alice")
	}

	// No certificate, one of another CA, an expired one: refused in the
	// handshake, with the reason in the TLS alert.
	other := tlstest.NewCA(t, "other")
	expired := s.clientCA.Issue(t, tlstest.Opts{CN: "alice", Client: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	for _, c := range []struct {
		name string
		leaf *tlstest.Leaf
		want string
	}{
		{"none", nil, "certificate required"},
		{"unknown CA", other.Client(t, "alice"), "unknown certificate authority"},
		{"expired", expired, "expired certificate"},
	} {
		resp, err := s.client(t, c.leaf).Post(s.base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: served (HTTP %d)", c.name, resp.StatusCode)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.want)
		}
	}
}

// TestTLSRotationWhileCalling replaces the listener's certificate and the
// gateway's upstream client certificate while a client calls: no call
// fails, and both new certificates are in use within seconds.
func TestTLSRotationWhileCalling(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	s.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := s.session(t, "alice")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls atomic.Int64
	// Every failure is kept, whatever its type (an atomic.Value panics
	// when a second failure's type differs from the first's).
	var mu sync.Mutex
	var failed []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := tlsEcho(ctx, alice, "x"); err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%T: %v", err, err))
				mu.Unlock()
			}
			calls.Add(1)
		}
	}()
	testwait.Until(t, "calls before the rotation", func() bool { return calls.Load() > 5 })

	lis := s.serverCA.Server(t, "gateway-2")
	gwc := s.gwClientCA.Client(t, "mcpgw-2")
	tlstest.Write(t, s.dir, "tls.key", lis.KeyPEM)
	tlstest.Write(t, s.dir, "tls.crt", lis.CertPEM)
	tlstest.Write(t, s.dir, "gw.key", gwc.KeyPEM)
	tlstest.Write(t, s.dir, "gw.crt", gwc.CertPEM)

	served := func() string {
		c, err := tls.Dial("tcp", strings.TrimPrefix(s.base, "https://"), &tls.Config{RootCAs: s.serverCA.Pool(), Certificates: []tls.Certificate{s.clientCA.Client(t, "probe").TLS(t)}})
		if err != nil {
			t.Fatalf("probe handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	testwait.Until(t, "the listener serves the new certificate", func() bool { return served() == "gateway-2" })
	testwait.Until(t, "the upstream sees the gateway's new client certificate", func() bool {
		cn, _ := s.upstreamCN.Load().(string)
		return cn == "mcpgw-2"
	})
	n := calls.Load()
	testwait.Until(t, "calls after the rotation", func() bool { return calls.Load() > n+5 })
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed during the rotation: %q", len(failed), calls.Load(), failed)
	}
}

// TestUpstreamTLSNameMismatchNamesTheUpstream: an upstream whose
// certificate does not carry the dialed name is refused, and the error
// names the upstream and the problem.
func TestUpstreamTLSNameMismatchNamesTheUpstream(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "up")
	up := httptest.NewUnstartedServer(http.NotFoundHandler())
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, tlstest.Opts{CN: "x", DNS: []string{"elsewhere.example"}}).TLS(t)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	dir := t.TempDir()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  secure: {url: %s/mcp, tls: {ca_file: %s}}\n", up.URL, tlstest.Write(t, dir, "ca.pem", ca.PEM))), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	var last string
	testwait.Until(t, "the upstream's connection error", func() bool {
		if err := gw.Host().Upstream("secure").Status().LastError; err != nil {
			last = err.Error()
			return true
		}
		return false
	})
	for _, w := range []string{`upstream "secure"`, "name mismatch", `"elsewhere.example"`, "server_name"} {
		if !strings.Contains(last, w) {
			t.Errorf("error %q; want it to say %q", last, w)
		}
	}
}

// connectProxy is an HTTP CONNECT proxy on 127.0.0.1 that records the
// targets it was asked for.
func connectProxy(t *testing.T) (url string, targets func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	var closed bool // under mu: no pipe starts once the cleanup began
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		seen = append(seen, r.Host)
		mu.Unlock()
		up, err := net.DialTimeout("tcp", r.Host, 10*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		down, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		// The pipes are counted under mu, so that the cleanup's Wait never
		// runs beside an Add (a race, and a pipe it would not wait for).
		mu.Lock()
		if closed {
			mu.Unlock()
			_ = up.Close()
			_ = down.Close()
			return
		}
		wg.Add(2)
		mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(up, down)
		go pipe(down, up)
	}))
	t.Cleanup(func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// TestUpstreamThroughConnectProxy: an https upstream with proxy: is
// reached through the proxy's CONNECT, with its TLS verified end to end.
func TestUpstreamThroughConnectProxy(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "up")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gatewaytest.SDKServer("secure", 0) }, nil)
	up := httptest.NewUnstartedServer(h)
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "up").TLS(t)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	proxy, targets := connectProxy(t)
	dir := t.TempDir()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  secure: {url: %s/mcp, proxy: %s, tls: {ca_file: %s}}\n", up.URL, proxy, tlstest.Write(t, dir, "ca.pem", ca.PEM))), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	cs := gatewaytest.Connect(t, "http://"+ln.Addr().String()+"/mcp", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if got, err := tlsEcho(ctx, cs, "via proxy"); err != nil || got != "secure:via proxy" {
		t.Fatalf("call: %q, %v", got, err)
	}
	want := strings.TrimPrefix(up.URL, "https://")
	if ts := targets(); len(ts) == 0 || ts[0] != want {
		t.Errorf("the proxy was asked for %v, want CONNECT %s", ts, want)
	}
}

// TestAdminListenerTLS: admin.tls serves the admin endpoints over TLS,
// and only to clients with a certificate of its client CA.
func TestAdminListenerTLS(t *testing.T) {
	t.Parallel()
	ca, clients := tlstest.NewCA(t, "admin"), tlstest.NewCA(t, "ops")
	dir := t.TempDir()
	srv := ca.Server(t, "admin")
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gatewaytest.SDKServer("a", 0) }, nil))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf("listen: 127.0.0.1:0\nupstreams: {a: {url: %s/mcp}}\nadmin:\n  listen: 127.0.0.1:0\n  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\n", up.URL,
		tlstest.Write(t, dir, "a.crt", srv.CertPEM), tlstest.Write(t, dir, "a.key", srv.KeyPEM), tlstest.Write(t, dir, "ops.pem", clients.PEM))), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	url := "https://" + gw.AdminAddr().String() + "/healthz"
	tr := func(leaf *tlstest.Leaf) *http.Client {
		c := &tls.Config{RootCAs: ca.Pool()}
		if leaf != nil {
			c.Certificates = []tls.Certificate{leaf.TLS(t)}
		}
		h := &http.Transport{TLSClientConfig: c}
		t.Cleanup(h.CloseIdleConnections)
		return &http.Client{Transport: h, Timeout: 10 * time.Second}
	}
	resp, err := tr(clients.Client(t, "ops")).Get(url)
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: HTTP %d", resp.StatusCode)
	}
	if resp, err := tr(nil).Get(url); err == nil {
		resp.Body.Close()
		t.Error("served without a client certificate")
	}
}

// TestReloadRefusesListenerTLSChange: the listener's TLS is set at start,
// so a reload that changes it is refused, naming the key, instead of
// going unapplied.
func TestReloadRefusesListenerTLSChange(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	s.start(t)
	next := *s.gw.Config()
	next.TLS = nil
	err := s.gw.Reload(&next)
	if err == nil || !strings.Contains(err.Error(), "tls cannot change on reload") {
		t.Fatalf("reload turning TLS off: %v; want it refused naming tls", err)
	}
}
