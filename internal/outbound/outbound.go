// Package outbound owns the rules for the gateway's own outbound requests
// to authorization servers and metadata documents (DESIGN.md invariant
// 11): they follow no redirect, since a redirect would carry a subject
// token, a client secret or a code to a host nobody configured; and a URL
// an upstream names (its challenge's resource_metadata, the authorization
// server its metadata names, that server's endpoints) may not reach a
// loopback, private or link-local address unless the operator allows it.
//
// The address check runs at dial time on the resolved address, and the
// connection goes to exactly the address checked, so a name that resolves
// to a public address when a URL is judged and to an internal one when it
// is fetched (DNS rebinding) is refused too.
//
// It imports only the standard library, so every layer (auth, host,
// credentials) can use it.
package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// ErrRedirect is wrapped by the error of a request that was answered with
// a redirect: such requests never follow one.
var ErrRedirect = errors.New("the server answered with a redirect, which mcpgw does not follow for OAuth and metadata requests (it would carry credentials to a host nobody configured); configure the endpoint's final URL")

// refuseRedirect is an http.Client CheckRedirect that follows none.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w (redirected to %s)", ErrRedirect, req.URL.Redacted())
}

// NoRedirects returns a copy of c (http.DefaultClient when nil) that
// follows no redirect: a 3xx fails the request with ErrRedirect.
func NoRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	n := *c
	n.CheckRedirect = refuseRedirect
	return &n
}

// Guard decides which addresses a connection for a URL an upstream named
// may go to: public addresses always; loopback, private (RFC 1918, RFC
// 4193), link-local, CGNAT, unspecified and multicast ones only when an
// allowed prefix covers them, or when the host:port is one the operator
// configured (Trust) — an upstream's own URL, a pinned issuer.
type Guard struct {
	allow   []netip.Prefix
	trusted map[string]bool // lower-case host:port
	key     string          // the config key that allows more, for errors
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewGuard returns a guard allowing the prefixes allow (CIDRs or single
// addresses); key names the config setting that lists them, for errors.
func NewGuard(allow []string, key string) (*Guard, error) {
	g := &Guard{trusted: map[string]bool{}, key: key}
	for _, a := range allow {
		p, err := ParsePrefix(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		g.allow = append(g.allow, p)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	g.dial = d.DialContext
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	return g, nil
}

// ParsePrefix reads an allowlist entry: a CIDR prefix or one address.
func ParsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a CIDR prefix (e.g. 10.0.0.0/8, 127.0.0.1)", s)
}

// Trust exempts the host:port of each URL (configured by the operator,
// not named by an upstream) from the address check.
func (g *Guard) Trust(urls ...string) *Guard {
	for _, raw := range urls {
		if hp := hostPort(raw); hp != "" {
			g.trusted[hp] = true
		}
	}
	return g
}

// hostPort is a URL's lower-case host:port, with the scheme's default port.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return ""
		}
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// Internal reports whether a is an address an upstream-named URL may not
// reach by default.
func Internal(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() {
		// An IPv4 address inside an IPv6 one (NAT64, 6to4) reaches that
		// IPv4 host: judge it.
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return Internal(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return Internal(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	// reserved are IPv4 ranges that are not the public internet beyond
	// what netip classifies.
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),     // this network
		netip.MustParsePrefix("100.64.0.0/10"), // RFC 6598, shared address space (CGNAT)
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and broadcast
	}
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func (g *Guard) allowed(a netip.Addr) bool {
	if !Internal(a) {
		return true
	}
	a = a.Unmap()
	for _, p := range g.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AddressError is a connection the guard refused.
type AddressError struct {
	Host string
	Addr netip.Addr
	Key  string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("refusing to connect to %s (%s): a URL the upstream named leads to a loopback, private or link-local address; if this server is meant to be reached there, list the address in %s", e.Host, e.Addr, e.Key)
}

// DialContext dials addr (host:port) if the host is trusted, or else
// only to a resolved address the guard allows, and exactly that address.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.trusted[strings.ToLower(addr)] {
		return g.dial(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = g.lookup(ctx, host); err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		if !g.allowed(a) {
			if first == nil {
				first = &AddressError{Host: host, Addr: a, Key: g.key}
			}
			continue
		}
		c, err := g.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%s resolves to no address", host)
	}
	return nil, first
}

// Client is an HTTP client for OAuth and metadata requests: it follows no
// redirect, and with g (nil: no address check) dials only where g allows.
// Its transport is its own (no shared pool with upstream traffic).
func Client(g *Guard, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if g != nil {
		t.DialContext = g.DialContext
		// A proxy would resolve the name itself, past the check.
		t.Proxy = nil
	}
	return &http.Client{Transport: t, Timeout: timeout, CheckRedirect: refuseRedirect}
}
