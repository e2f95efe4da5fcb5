package edge

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Checks are the tests every request passes before anything else: Host on a
// loopback listener (DNS-rebinding protection) and Origin against
// allowed_origins. The admin listener uses the same checks, stricter
// (NewAdminChecks).
type Checks struct {
	origins map[string]bool
	hosts   []string // allowed Host names on a loopback listener; nil = any

	// admin marks the admin listener's checks: Host is checked on every
	// listener and any IP address is accepted; Origin must be the
	// listener's own; a cross-site request is refused unless it is a
	// top-level navigation; refusals are plain text.
	admin bool
}

// NewAdminChecks makes the checks of the admin listener at listen. Its
// answers (the catalog before policy, the config, metrics) are for
// operators and scrapers, never for web pages, so whatever the listen
// address:
//
//   - Host must be an IP address, a loopback name, the listen host or one
//     of allowedHosts (e.g. a Kubernetes Service name), or absent. A
//     DNS-rebinding page names its own domain in Host; a page whose origin
//     is an IP address was served by that address itself, and scrapers
//     and probes name the address they reach (Prometheus, the kubelet) or
//     none (HTTP/1.0 health checks).
//   - Origin, when sent, must be the listener's own (the status page).
//   - Sec-Fetch-Site other than same-origin or none is refused, except for
//     a top-level navigation (a link clicked elsewhere), whose answer the
//     page that made it cannot read.
func NewAdminChecks(listen string, allowedHosts []string) *Checks {
	hosts := []string{"localhost"}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && net.ParseIP(h) == nil {
		hosts = append(hosts, normHost(h))
	}
	for _, h := range allowedHosts {
		hosts = append(hosts, normHost(h))
	}
	return &Checks{origins: map[string]bool{}, hosts: hosts, admin: true}
}

// normHost is a Host header's name as compared: no port, no IPv6 brackets,
// lower case, no trailing dot (localhost. is localhost).
func normHost(h string) string {
	if hn, _, err := net.SplitHostPort(h); err == nil {
		h = hn
	}
	return strings.TrimSuffix(strings.Trim(strings.ToLower(h), "[]"), ".")
}

// NewChecks makes the checks of a listener at listen (host:port) whose
// canonical URL is publicURL, serving web apps from allowedOrigins.
func NewChecks(listen, publicURL string, allowedOrigins []string) *Checks {
	c := &Checks{origins: map[string]bool{}, hosts: allowedHosts(listen, publicURL)}
	for _, o := range allowedOrigins {
		c.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return c
}

// allowedHosts returns the Host names accepted when the listener is on
// loopback (DNS-rebinding protection), or nil when any Host is fine.
func allowedHosts(listen, publicURL string) []string {
	h, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopbackName(h) {
		return nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	return hosts
}

func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Middleware refuses a request that fails the checks, with 403 and the
// reason; log is the fallback for requests without their own logger.
func (c *Checks) Middleware(log *zap.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return c.handler(log, next) }
}

func (c *Checks) handler(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.hostAllowed(r.Host) {
			if c.admin {
				Logger(r.Context(), log).Warn("admin listener refused a request with a Host it does not serve", zap.String("host", r.Host))
				refuseAdmin(w, http.StatusForbidden, "Host "+r.Host+" is not served by the admin listener (DNS-rebinding protection); use its IP address or a loopback name, or add the name to admin.allowed_hosts")
				return
			}
			Logger(r.Context(), log).Warn("refused request with a non-loopback Host on a loopback listener", zap.String("host", r.Host))
			Error(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Host "+r.Host+" is not allowed on this loopback listener (DNS-rebinding protection); set public_url to serve another name")
			return
		}
		if c.admin {
			if msg := crossSite(r); msg != "" {
				Logger(r.Context(), log).Warn("admin listener refused a cross-site request", zap.String("origin", r.Header.Get("Origin")), zap.String("sec_fetch_site", r.Header.Get("Sec-Fetch-Site")))
				refuseAdmin(w, http.StatusForbidden, msg)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !c.originAllowed(o) {
			Logger(r.Context(), log).Warn("refused request from an Origin not in allowed_origins", zap.String("origin", o))
			Error(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Origin "+o+" is not allowed; add it to allowed_origins to serve this web app")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed applies the Host allowlist, if any.
func (c *Checks) hostAllowed(host string) bool {
	if c.hosts == nil {
		return true
	}
	h := normHost(host)
	if slices.Contains(c.hosts, h) || isLoopbackIP(h) {
		return true
	}
	// No Host at all is an HTTP/1.0 client (HAProxy's httpchk), never a
	// browser: browsers always send the name they resolved.
	return c.admin && (h == "" || net.ParseIP(h) != nil)
}

// crossSite says why an admin request comes from another site's page, or
// "" when it does not: its Origin, when sent, must be the listener's own
// (the Host it asks for, which hostAllowed accepted), and Sec-Fetch-Site
// must be same-origin or none (typed, bookmarked), unless the request is a
// top-level navigation.
func crossSite(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		return "Origin " + o + " is another site; the admin endpoints serve no web app but their own status page (open it directly)"
	}
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
	default:
		navigation := strings.EqualFold(r.Header.Get("Sec-Fetch-Mode"), "navigate") && strings.EqualFold(r.Header.Get("Sec-Fetch-Dest"), "document") &&
			(r.Method == http.MethodGet || r.Method == http.MethodHead)
		if !navigation {
			return "a " + site + " request (Sec-Fetch-Site) to the admin endpoints is refused; open the status page directly"
		}
	}
	return ""
}

// sameOrigin reports whether origin is a page of host (host:port as in the
// Host header), a missing port being the scheme's default.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	split := func(hp string) (string, string) {
		if h, p, err := net.SplitHostPort(hp); err == nil {
			return normHost(h), p
		}
		return normHost(hp), def
	}
	oh, op := split(u.Host)
	rh, rp := split(host)
	return oh == rh && op == rp
}

// refuseAdmin answers an admin request in plain text: the admin endpoints
// are read by people and scrapers, not JSON-RPC clients.
func refuseAdmin(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "mcpgw admin: "+msg, status)
}

// originAllowed accepts the configured origins and, on a loopback
// listener, pages served from loopback themselves (a local app talking to a
// local gateway); a page from any other site is refused.
func (c *Checks) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if c.origins[o] {
		return true
	}
	if c.hosts == nil {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackName(u.Hostname())
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
