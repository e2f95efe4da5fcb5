package host

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/http1"
	"github.com/mcpgw/mcpgw/internal/tlsconf"
)

// upstreamBase is the HTTP client an upstream's requests start from: the
// host's shared one, or, for an upstream with its own tls: or proxy:, a
// transport of its own (returned too, so that stop closes its idle
// connections). TLS files that do not load make every request of the
// upstream fail with the reason (fail closed) rather than the host.
func (h *Host) upstreamBase(name string, cfg *config.Upstream) (*http.Client, *http1.Transport) {
	base := h.opts.HTTPClient
	if cfg.URL == "" || (cfg.TLS == nil && cfg.Proxy == "") {
		return base, nil
	}
	t := client.DefaultHTTPTransport()
	var tc *tlsconf.Client
	if cfg.TLS != nil {
		var err error
		tc, err = tlsconf.NewClient(name, cfg.TLS, tlsconf.Options{Logger: h.opts.Logger, Host: hostOf(cfg.URL)})
		if err != nil {
			h.opts.Logger.Error("upstream TLS could not be set up; its requests are refused", zap.String("upstream", name), zap.Error(err))
			return &http.Client{Transport: failingTransport{err: err}, CheckRedirect: base.CheckRedirect, Timeout: base.Timeout}, nil
		}
		// Proxied connections (CONNECT) use TLSClientConfig; direct ones
		// are dialed here, where the host the certificate must name is
		// known even for an IP address (which sends no SNI).
		t.Fallback.TLSClientConfig = tc.Config()
		t.Fallback.DialTLSContext = dialTLS(tc)
	}
	if cfg.Proxy != "" {
		pu, err := url.Parse(cfg.Proxy)
		if err == nil { // validation refuses the rest
			t.Fallback.Proxy = http.ProxyURL(pu)
		}
	}
	var rt http.RoundTripper = t
	if tc != nil {
		rt = &rotatingTransport{t: t, tc: tc}
	}
	return &http.Client{Transport: rt, CheckRedirect: base.CheckRedirect, Timeout: base.Timeout}, t
}

// rotatingTransport closes the kept connections once the upstream's TLS
// files change, so that the next request presents the rotated client
// certificate (and is verified with the rotated CA) within a reload
// interval, instead of whenever the connections happen to close. Calls
// in flight keep their connections.
type rotatingTransport struct {
	t    *http1.Transport
	tc   *tlsconf.Client
	seen atomic.Int64
}

func (r *rotatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if g := r.tc.Generation(); r.seen.Swap(g) != g {
		r.t.CloseIdleConnections()
	}
	return r.t.RoundTrip(req)
}

// upstreamTLSHandshakeTimeout bounds a TLS handshake with an upstream, as
// net/http's TLSHandshakeTimeout does for the connections it dials.
const upstreamTLSHandshakeTimeout = 10 * time.Second

// dialTLS dials host:port and handshakes with tc's configuration for host.
func dialTLS(tc *tlsconf.Client) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, tc.ConfigFor(host))
		hctx, cancel := context.WithTimeout(ctx, upstreamTLSHandshakeTimeout)
		defer cancel()
		if err := conn.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// failingTransport refuses every request with err.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return nil, f.err
}

// hostOf is a URL's host without port ("" when it does not parse).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
